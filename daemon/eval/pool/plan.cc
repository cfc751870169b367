// The pool's decisions. See plan.h.
#include "daemon/eval/pool/plan.h"

#include <algorithm>

namespace htam::pool {

std::string WorkerName(const std::string& job_name, const std::string& job_id) {
  return job_name + "-" + job_id;
}

Plan MakePlan(const PlanOptions& o, const FleetSnapshot& fleet,
              const std::vector<ClusterJob>& jobs, const std::map<std::string, int64_t>& quiet_ms) {
  Plan plan;
  std::map<std::string, const FleetWorker*> workers;
  for (const auto& w : fleet.workers) workers[w.name] = &w;

  // Jobs whose worker has yet to connect count as capacity on the way.
  std::vector<const ClusterJob*> starting;
  int alive = 0;
  for (const auto& j : jobs) {
    ++alive;
    auto w = workers.find(WorkerName(o.job_name, j.id));
    const bool registered = w != workers.end();
    if (j.state == ClusterJob::State::kPending) {
      starting.push_back(&j);
      auto q = quiet_ms.find(j.backend);
      if (q != quiet_ms.end() && q->second >= o.idle_ms)
        plan.cancel.push_back({j.id, "pending while nothing of backend '" + j.backend +
                                         "' was queued for " + std::to_string(q->second / 1000) +
                                         " s (pool.idle_s)"});
    } else if (j.state == ClusterJob::State::kRunning && !registered) {
      if (j.running_ms >= o.start_timeout_ms)
        plan.cancel.push_back({j.id, "running " + std::to_string(j.running_ms / 1000) +
                                         " s without its worker connecting "
                                         "(pool.start_timeout_s); see its output in logs/"});
      else
        starting.push_back(&j);
    } else if (registered) {
      const auto* fw = w->second;
      const bool busy = std::any_of(fw->devices.begin(), fw->devices.end(),
                                    [](const FleetDevice& d) { return d.busy; });
      if (!busy && (fw->draining || fw->idle_ms >= o.idle_ms))
        plan.drain.emplace_back(fw->name, j.id);
    }
  }

  int room = o.max_jobs - alive;
  for (const auto& q : fleet.queues) {
    if (room <= 0) break;
    if (!o.backends.count(q.backend) || q.queued == 0) continue;
    auto serves = [&](const std::string& backend, const std::string& arch) {
      return backend == q.backend && (q.arch.empty() || arch == q.arch);
    };
    size_t idle = 0;
    for (const auto& w : fleet.workers)
      if (!w.draining)
        for (const auto& d : w.devices)
          if (!d.busy && serves(d.backend, d.arch)) ++idle;
    if (q.queued <= idle) continue;
    size_t coming = 0;
    for (const auto* j : starting)
      if (serves(j->backend, j->arch)) ++coming;
    const size_t per = size_t(std::max(1, o.queued_per_job));
    const size_t wanted = (q.queued - idle + per - 1) / per;
    for (size_t n = coming; n < wanted && room > 0; ++n, --room)
      plan.submit.push_back({q.backend, q.arch});
  }
  return plan;
}

}  // namespace htam::pool
