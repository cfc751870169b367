// The scheduler: fair-share queues, device matching, remote workers (ROUTER, heartbeats, requeue),
// busy answers and the durable queue. See scheduler.h.
#include "daemon/eval/scheduler/scheduler.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/endpoint.h"
#include "base/log.h"
#include "base/thread_annotations.h"
#include "daemon/common/auth.h"
#include "daemon/config/sections.h"
#include "daemon/eval/pool/fleet.h"
#include "daemon/eval/scheduler/journal.h"
#include "daemon/eval/scheduler/wire.h"

namespace htam::scheduler {
namespace {

using nlohmann::json;
constexpr const char* kComponent = "scheduler";
constexpr const char* kWakeEndpoint = "inproc://htam-scheduler-wake";
constexpr const char* kLocal = "local";
constexpr size_t kMaxDevicesPerWorker = 256;

bool ArchMatches(const std::string& want, const std::string& have) {
  return want.empty() || want == have;
}

// What an HTW1 worker is told (it prints the daemon's refusal and stops).
std::string OldProtocolMessage() {
  return std::string("protocol version ") + kOldWorkerProtocol +
         " is no longer served: this daemon speaks " + kWorkerProtocol +
         " (jobs and results as schema/job.fbs buffers); upgrade htam-worker";
}

std::string Printable(const std::string& id) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : id.substr(0, 8)) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

struct Device {
  std::string backend, arch, name, language;
  uint64_t memory_bytes = 0;
  uint64_t job = 0;  // running job id, 0 = idle
  uint64_t jobs = 0;
};

struct Worker {
  std::string id, name, host, version, instance;
  bool local = false;
  std::vector<Device> devices;
  int64_t joined_ms = 0, last_seen_ms = 0;
  int64_t last_busy_ms = 0;  // a job last ran (or it joined)
  bool draining = false;     // FleetView::Drain: dispatch skips it
  uint64_t jobs = 0, failures = 0;
};

struct Job {
  eval::EvalJob job;
  std::function<void(eval::EvalResult)> done;
  uint32_t attempt = 0;  // dispatches so far; a result must carry the current one
  int64_t queued_ms = 0;
  std::string worker;  // "" while queued
  int device = -1;
};

// Work decided under the lock, carried out after it is released.
struct Actions {
  std::vector<std::pair<std::string, json>> sends;        // to remote workers
  std::vector<std::pair<eval::EvalJob, uint32_t>> local;  // to the local evaluator
  std::vector<std::pair<std::string, std::pair<eval::EvalJob, uint32_t>>> remote;  // id, job
  std::vector<std::pair<std::function<void(eval::EvalResult)>, eval::EvalResult>> done;
};

}  // namespace

SchedulerOptions SchedulerOptions::FromConfig(const Config& c) {
  const config::Worker w = config::Worker::From(c);
  const config::Server s = config::Server::From(c);
  SchedulerOptions o;
  o.endpoint = w.endpoint;
  o.curve = w.curve;
  o.secret_key_file = s.curve_secret_key_file;
  o.authorized_keys = w.curve_authorized_keys;
  o.allow_insecure_bind = s.allow_insecure_bind;
  o.heartbeat_ms = static_cast<int>(std::max<int64_t>(10, w.heartbeat_ms));
  o.liveness = static_cast<int>(std::max<int64_t>(1, w.liveness));
  o.queue_per_device = static_cast<int>(std::max<int64_t>(1, w.queue_per_device));
  o.max_attempts = static_cast<int>(std::max<int64_t>(1, w.max_attempts));
  o.wait_for_device_s = static_cast<int>(w.wait_for_device_s);
  if (w.durable_queue) o.queue_dir = config::General::From(c).data_dir + "/queue";
  return o;
}

class SchedulerImpl : public eval::Evaluator, public pool::FleetView {
 public:
  SchedulerImpl(SchedulerOptions o, std::unique_ptr<eval::Evaluator> local)
      : opt_(std::move(o)), local_(std::move(local)), context_(1) {}
  ~SchedulerImpl() override { Shutdown(); }

  Status Init();
  Status Submit(eval::EvalJob job, std::function<void(eval::EvalResult)> done) override;
  Result<eval::EvalResult> Evaluate(eval::EvalJob job) override;
  std::vector<fb::DeviceInfoT> Devices() override;
  std::vector<std::string> Backends() override;
  std::string StatusText() override;
  std::string WorkersStatusText() override;
  std::vector<eval::EvalJob> Recovered() override;
  void Shutdown() override;
  pool::FleetSnapshot Fleet() override;
  bool Drain(const std::string& name) override;
  void SetFleetStatus(std::function<std::string()> source) override;

 private:
  void Loop();
  void Wake();
  void Run(Actions& a);
  // One message of the worker protocol: [id][HTW2][type][body]. A control message's type is its
  // JSON "type"; a job's body is a JobSpec buffer (wire.h).
  void Send(const std::string& id, const json& body);
  void SendRaw(const std::string& id, const char* protocol, const std::string& type,
               const std::string& body);
  void OnMessage(const std::string& id, const std::string& type, const std::string& body,
                 Actions* a) REQUIRES(mu_);
  void OnRegister(const std::string& id, const json& m, int64_t now, Actions* a) REQUIRES(mu_);
  void OnResult(const std::string& worker, uint32_t attempt, eval::EvalResult r, Actions* a)
      REQUIRES(mu_);
  void DropWorker(const std::string& id, const std::string& why, Actions* a) REQUIRES(mu_);
  void Finish(uint64_t job_id, eval::EvalResult r, Actions* a) REQUIRES(mu_);
  void Dispatch(int64_t now, Actions* a) REQUIRES(mu_);
  void Expire(int64_t now, Actions* a) REQUIRES(mu_);
  size_t MatchingDevices(const std::string& backend, const std::string& arch) const REQUIRES(mu_);

  SchedulerOptions opt_;
  std::unique_ptr<eval::Evaluator> local_;
  zmq::context_t context_;
  std::unique_ptr<auth::ZapHandler> zap_;
  std::unique_ptr<zmq::socket_t> router_, wake_pull_;
  std::unique_ptr<Journal> journal_;
  std::thread thread_;
  std::atomic<bool> stop_thread_{false};
  std::string bound_;

  Mutex wake_mu_;
  std::unique_ptr<zmq::socket_t> wake_push_ GUARDED_BY(wake_mu_);

  Mutex mu_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::string, Worker> workers_ GUARDED_BY(mu_);
  std::map<uint64_t, Job> jobs_ GUARDED_BY(mu_);
  // session -> queued job ids (FIFO)
  std::map<uint64_t, std::deque<uint64_t>> queues_ GUARDED_BY(mu_);
  uint64_t last_session_ GUARDED_BY(mu_) = 0;  // round-robin position
  std::vector<eval::EvalJob> recovered_ GUARDED_BY(mu_);
  std::function<std::string()> fleet_status_ GUARDED_BY(mu_);
  std::set<uint64_t> awaiting_resubmit_ GUARDED_BY(mu_);
  // completion times of the last minute (throughput)
  std::deque<int64_t> finished_ms_ GUARDED_BY(mu_);
  // Counters (status text).
  uint64_t submitted_ GUARDED_BY(mu_) = 0;
  uint64_t finished_ GUARDED_BY(mu_) = 0;
  uint64_t failed_ GUARDED_BY(mu_) = 0;
  uint64_t requeued_ GUARDED_BY(mu_) = 0;
  uint64_t stale_dropped_ GUARDED_BY(mu_) = 0;
  uint64_t workers_lost_ GUARDED_BY(mu_) = 0;
  uint64_t workers_joined_ GUARDED_BY(mu_) = 0;
  uint64_t busy_refusals_ GUARDED_BY(mu_) = 0;
  uint64_t expired_ GUARDED_BY(mu_) = 0;
};

Status SchedulerImpl::Init() {
  // Nothing else runs yet (the loop starts at the end); the lock is for the analysis' sake and
  // costs nothing here.
  MutexLock lock(&mu_);
  if (local_) {
    Worker w;
    w.id = kLocal;
    w.name = kLocal;
    w.local = true;
    w.joined_ms = NowMs();
    for (const auto& d : local_->Devices()) {
      Device dev;
      dev.backend = d.backend;
      dev.arch = d.arch;
      dev.name = d.name;
      dev.memory_bytes = d.memory_bytes;
      dev.language = local_->BackendLanguage(d.backend);
      w.devices.push_back(dev);
    }
    workers_[kLocal] = std::move(w);
  }
  if (!opt_.queue_dir.empty()) {
    HTAM_ASSIGN_OR_RETURN(journal_, Journal::Open(opt_.queue_dir));
    size_t bad = 0;
    HTAM_ASSIGN_OR_RETURN(recovered_, journal_->List(&bad));
    if (bad) {
      HTAM_LOG(kWarn, kComponent) << bad << " unreadable queued job(s) skipped";
    }
    for (const auto& j : recovered_) awaiting_resubmit_.insert(j.job_id);
    if (!recovered_.empty()) {
      HTAM_LOG(kInfo, kComponent) << recovered_.size()
                                  << " job(s) queued before the restart will resume";
    }
  }
  try {
    wake_pull_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pull);
    wake_pull_->bind(kWakeEndpoint);
    {
      MutexLock lock(&wake_mu_);
      wake_push_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::push);
      wake_push_->set(zmq::sockopt::linger, 0);
      wake_push_->connect(kWakeEndpoint);
    }
    if (!opt_.endpoint.empty()) {
      if (!opt_.curve && !IsLocalEndpoint(opt_.endpoint) && !opt_.allow_insecure_bind)
        return Status::FailedPrecondition(
            "refusing to bind the worker endpoint " + opt_.endpoint +
            " without CURVE: anyone who can reach it could read candidates and forge results. "
            "Enable worker.curve (docs/operations.md, Remote workers) or set "
            "server.allow_insecure_bind = true");
      router_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
      router_->set(zmq::sockopt::linger, 0);
      router_->set(zmq::sockopt::router_mandatory, true);
      if (opt_.curve) {
        if (opt_.secret_key_file.empty() ||
            (opt_.authorized_keys.empty() && opt_.extra_worker_keys.empty()))
          return Status::InvalidArgument(
              "worker.curve needs server.curve_secret_key_file and worker.curve_authorized_keys");
        HTAM_ASSIGN_OR_RETURN(auth::KeyPair keys, auth::ReadKeyFile(opt_.secret_key_file));
        if (keys.secret_key.empty())
          return Status::InvalidArgument(opt_.secret_key_file + " holds no secret key");
        std::set<std::string> allowed;
        if (!opt_.authorized_keys.empty()) {
          HTAM_ASSIGN_OR_RETURN(allowed, auth::LoadAuthorizedKeys(opt_.authorized_keys));
        }
        allowed.insert(opt_.extra_worker_keys.begin(), opt_.extra_worker_keys.end());
        zap_ = std::make_unique<auth::ZapHandler>(&context_, std::move(allowed));
        HTAM_RETURN_IF_ERROR(zap_->Start());
        router_->set(zmq::sockopt::curve_server, true);
        router_->set(zmq::sockopt::curve_secretkey, keys.secret_key);
        router_->set(zmq::sockopt::zap_domain, "htam-workers");
      }
      router_->bind(opt_.endpoint);
      bound_ = router_->get(zmq::sockopt::last_endpoint);
      HTAM_LOG(kInfo, kComponent) << "worker endpoint " << bound_ << (opt_.curve ? " (CURVE)" : "")
                                  << ", heartbeat " << opt_.heartbeat_ms << " ms x "
                                  << opt_.liveness;
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot bind the worker endpoint " + opt_.endpoint + ": " +
                               e.what());
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

void SchedulerImpl::Wake() {
  MutexLock lock(&wake_mu_);
  if (!wake_push_) return;
  try {
    wake_push_->send(zmq::str_buffer("w"), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // The loop also runs on its heartbeat tick.
  }
}

void SchedulerImpl::Send(const std::string& id, const json& body) {
  SendRaw(id, kWorkerProtocol, body.value("type", ""), body.dump());
}

void SchedulerImpl::SendRaw(const std::string& id, const char* protocol, const std::string& type,
                            const std::string& body) {
  try {
    router_->send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router_->send(zmq::buffer(std::string_view(protocol)),
                  zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    // An HTW1 peer reads [protocol][json]: no type frame.
    if (std::string_view(protocol) == kWorkerProtocol)
      router_->send(zmq::buffer(type), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router_->send(zmq::buffer(body), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    // Unroutable (gone) or full: liveness drops the worker and requeues its job.
    HTAM_LOG(kDebug, kComponent) << "send to worker " << Printable(id) << ": " << e.what();
  }
}

void SchedulerImpl::Loop() {
  int64_t last_heartbeat = 0;
  while (!stop_thread_.load()) {
    std::vector<zmq::pollitem_t> items{{static_cast<void*>(*wake_pull_), 0, ZMQ_POLLIN, 0}};
    if (router_) items.push_back({static_cast<void*>(*router_), 0, ZMQ_POLLIN, 0});
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(opt_.heartbeat_ms));
      zmq::message_t m;
      while (wake_pull_->recv(m, zmq::recv_flags::dontwait)) {
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      continue;
    }
    Actions a;
    struct Inbound {
      std::string id, type, body;
    };
    std::vector<Inbound> inbox;
    if (router_ && (items[1].revents & ZMQ_POLLIN)) {
      for (int n = 0; n < 1000; ++n) {
        std::vector<zmq::message_t> parts;
        try {
          zmq::message_t part;
          if (!router_->recv(part, zmq::recv_flags::dontwait)) break;
          bool more = part.more();
          parts.push_back(std::move(part));
          while (more) {
            zmq::message_t next;
            (void)router_->recv(next, zmq::recv_flags::none);
            more = next.more();
            if (parts.size() < 5) parts.push_back(std::move(next));
          }
        } catch (const zmq::error_t&) {
          break;
        }
        if (parts.size() == 3 && parts[1].to_string_view() == kOldWorkerProtocol) {
          // A worker of the protocol before schema/job.fbs: told in its own protocol, so that it
          // stops with this message instead of retrying in silence.
          HTAM_LOG(kWarn, kComponent) << "worker " << Printable(parts[0].to_string()) << " speaks "
                                      << kOldWorkerProtocol << "; refused";
          SendRaw(parts[0].to_string(), kOldWorkerProtocol, "refused",
                  json{{"type", "refused"}, {"message", OldProtocolMessage()}}.dump());
          continue;
        }
        if (parts.size() != 4 || parts[1].to_string_view() != kWorkerProtocol) {
          HTAM_LOG(kWarn, kComponent) << "worker " << Printable(parts[0].to_string()) << ": not an "
                                      << kWorkerProtocol << " message; ignored";
          continue;
        }
        inbox.push_back({parts[0].to_string(), parts[2].to_string(), parts[3].to_string()});
      }
    }
    const int64_t now = NowMs();
    {
      MutexLock lock(&mu_);
      for (auto& in : inbox) OnMessage(in.id, in.type, in.body, &a);
      if (router_ && now - last_heartbeat >= opt_.heartbeat_ms) {
        last_heartbeat = now;
        const int64_t expiry = int64_t(opt_.heartbeat_ms) * opt_.liveness;
        std::vector<std::string> silent;
        for (auto& [id, w] : workers_) {
          if (w.local) continue;
          if (now - w.last_seen_ms > expiry)
            silent.push_back(id);
          else
            a.sends.emplace_back(id, json{{"type", "heartbeat"}});
        }
        for (const auto& id : silent)
          DropWorker(id, "silent for more than " + std::to_string(expiry) + " ms", &a);
      }
      Expire(now, &a);
      Dispatch(now, &a);
    }
    Run(a);
  }
}

void SchedulerImpl::Run(Actions& a) {
  for (auto& [id, body] : a.sends) Send(id, body);
  for (auto& [id, ja] : a.remote) {
    auto wire = JobToWire(ja.first, ja.second);
    if (wire.ok()) {
      SendRaw(id, kWorkerProtocol, "job", *wire);
      continue;
    }
    eval::EvalResult r;
    r.job_id = ja.first.job_id;
    r.status = fb::OutcomeStatus::InfraError;
    r.diagnostics = "cannot send the job: " + wire.status().ToString();
    Actions more;
    {
      MutexLock lock(&mu_);
      OnResult(id, ja.second, std::move(r), &more);
    }
    Run(more);
  }
  for (auto& [job, attempt] : a.local) {
    const uint64_t id = job.job_id;
    const uint32_t att = attempt;
    Status st = local_->Submit(std::move(job), [this, att](eval::EvalResult r) {
      Actions more;
      {
        MutexLock lock(&mu_);
        OnResult(kLocal, att, std::move(r), &more);
      }
      Run(more);
      Wake();  // a device is free
    });
    if (!st.ok()) {
      eval::EvalResult r;
      r.job_id = id;
      r.status = fb::OutcomeStatus::InfraError;
      r.diagnostics = "local evaluator refused the job: " + st.ToString();
      Actions more;
      {
        MutexLock lock(&mu_);
        OnResult(kLocal, att, std::move(r), &more);
      }
      Run(more);
    }
  }
  for (auto& [done, r] : a.done)
    if (done) done(std::move(r));
}

void SchedulerImpl::OnMessage(const std::string& id, const std::string& type,
                              const std::string& body, Actions* a) {
  const int64_t now = NowMs();
  if (type == "register") {
    json m = json::parse(body, nullptr, false);
    if (!m.is_object()) {
      HTAM_LOG(kWarn, kComponent) << "worker " << Printable(id) << ": malformed register dropped";
      return;
    }
    return OnRegister(id, m, now, a);
  }
  auto it = workers_.find(id);
  if (it == workers_.end()) {
    // A worker from before a daemon restart (or one dropped as silent): ask it to register.
    if (type == "result") ++stale_dropped_;
    if (type != "bye") a->sends.emplace_back(id, json{{"type", "reregister"}});
    return;
  }
  it->second.last_seen_ms = now;
  if (type == "heartbeat") return;
  if (type == "bye") return DropWorker(id, "it left", a);
  if (type == "result") {
    uint32_t attempt = 0;
    auto r = ResultFromWire(body, &attempt);
    if (!r.ok()) {
      // A protocol violation: the peer goes (its job is requeued), the daemon goes on.
      HTAM_LOG(kWarn, kComponent) << "worker " << it->second.name << ": " << r.status().message();
      return DropWorker(id, "it sent a malformed result", a);
    }
    return OnResult(id, attempt, std::move(*r), a);
  }
  HTAM_LOG(kWarn, kComponent) << "worker " << it->second.name << ": unknown message '"
                              << Printable(type) << "' ignored";
}

void SchedulerImpl::OnRegister(const std::string& id, const json& m, int64_t now, Actions* a) {
  Worker w;
  w.id = id;
  w.name = m.value("name", "");
  w.host = m.value("host", "");
  w.version = m.value("version", "");
  w.instance = m.value("instance", "");
  w.joined_ms = w.last_seen_ms = w.last_busy_ms = now;
  std::string why;
  if (m.value("protocol", std::string()) != kWorkerProtocol)
    why = "protocol " + m.value("protocol", std::string("?")) + " (this daemon speaks " +
          kWorkerProtocol + ")";
  if (!m.contains("devices") || !m["devices"].is_array() || m["devices"].empty() ||
      m["devices"].size() > kMaxDevicesPerWorker)
    why = "no devices (or too many)";
  if (why.empty()) {
    for (const auto& d : m["devices"]) {
      Device dev;
      if (!d.is_object() || !d.contains("backend") || !d["backend"].is_string()) {
        why = "a device without a backend";
        break;
      }
      dev.backend = d.value("backend", "");
      dev.arch = d.value("arch", "");
      dev.name = d.value("name", "");
      dev.language = d.value("language", "");
      dev.memory_bytes = d.value("memory_bytes", uint64_t(0));
      w.devices.push_back(dev);
    }
  }
  if (!why.empty()) {
    HTAM_LOG(kWarn, kComponent) << "worker " << w.name << " refused: " << why;
    a->sends.emplace_back(id, json{{"type", "refused"}, {"message", why}});
    return;
  }
  if (w.name.empty()) w.name = Printable(id);
  // The same process again (it reconnected): its old registration goes, jobs requeued.
  if (workers_.count(id)) DropWorker(id, "it registered again", a);
  std::vector<std::string> same;
  for (auto& [oid, ow] : workers_)
    if (!ow.local && !w.instance.empty() && ow.instance == w.instance) same.push_back(oid);
  for (const auto& oid : same) DropWorker(oid, "it reconnected", a);
  HTAM_LOG(kInfo, kComponent) << "worker " << w.name << " joined (" << w.host << ", "
                              << w.devices.size() << " device(s): " << w.devices[0].backend << " "
                              << w.devices[0].arch << ")";
  a->sends.emplace_back(id, json{{"type", "registered"},
                                 {"heartbeat_ms", opt_.heartbeat_ms},
                                 {"liveness", opt_.liveness}});
  workers_[id] = std::move(w);
  ++workers_joined_;
}

void SchedulerImpl::DropWorker(const std::string& id, const std::string& why, Actions* a) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  int requeued = 0;
  for (auto& d : w.devices) {
    if (d.job == 0) continue;
    auto j = jobs_.find(d.job);
    d.job = 0;
    if (j == jobs_.end()) continue;
    Job& job = j->second;
    job.worker.clear();
    job.device = -1;
    if (job.attempt >= uint32_t(opt_.max_attempts)) {
      eval::EvalResult r;
      r.job_id = job.job.job_id;
      r.status = fb::OutcomeStatus::InfraError;
      r.diagnostics = "lost " + std::to_string(job.attempt) +
                      " worker(s) while evaluating (worker.max_attempts); last: " + w.name + ", " +
                      why;
      Finish(job.job.job_id, std::move(r), a);
      continue;
    }
    job.queued_ms = NowMs();
    queues_[job.job.session_id].push_front(job.job.job_id);
    ++requeued_;
    ++requeued;
  }
  HTAM_LOG(kWarn, kComponent) << "worker " << w.name << " dropped: " << why << "; " << requeued
                              << " job(s) requeued";
  ++workers_lost_;
  workers_.erase(it);
}

void SchedulerImpl::OnResult(const std::string& worker, uint32_t attempt, eval::EvalResult r,
                             Actions* a) {
  auto j = jobs_.find(r.job_id);
  if (j == jobs_.end() || j->second.worker != worker || j->second.attempt != attempt) {
    // The late result of an attempt given up on (its worker was dropped): never recorded twice.
    ++stale_dropped_;
    HTAM_LOG(kInfo, kComponent) << "stale result of job " << r.job_id << " (attempt " << attempt
                                << ") dropped";
    return;
  }
  auto w = workers_.find(worker);
  if (w != workers_.end()) {
    int d = j->second.device;
    if (d >= 0 && size_t(d) < w->second.devices.size()) {
      w->second.devices[size_t(d)].job = 0;
      w->second.devices[size_t(d)].jobs++;
    }
    w->second.last_busy_ms = NowMs();
    w->second.jobs++;
    if (r.status == fb::OutcomeStatus::InfraError) w->second.failures++;
    if (r.device.empty() && d >= 0 && size_t(d) < w->second.devices.size())
      r.device = w->second.devices[size_t(d)].name;
  }
  Finish(r.job_id, std::move(r), a);
}

void SchedulerImpl::Finish(uint64_t job_id, eval::EvalResult r, Actions* a) {
  auto j = jobs_.find(job_id);
  if (j == jobs_.end()) return;
  // Shutting down: the job was not evaluated; it stays recorded and resumes at the next start.
  const bool keep = stopping_ && r.status == fb::OutcomeStatus::InfraError;
  if (journal_ && !keep) {
    Status st = journal_->Erase(job_id);
    if (!st.ok()) {
      HTAM_LOG(kWarn, kComponent) << st.ToString();
    }
  }
  ++finished_;
  if (r.status == fb::OutcomeStatus::InfraError) ++failed_;
  finished_ms_.push_back(NowMs());
  while (finished_ms_.size() > 1 && finished_ms_.back() - finished_ms_.front() > 60000)
    finished_ms_.pop_front();
  a->done.emplace_back(std::move(j->second.done), std::move(r));
  jobs_.erase(j);
}

size_t SchedulerImpl::MatchingDevices(const std::string& backend, const std::string& arch) const {
  size_t n = 0;
  for (const auto& [id, w] : workers_)
    if (!w.draining)
      for (const auto& d : w.devices)
        if (d.backend == backend && ArchMatches(arch, d.arch)) ++n;
  return n;
}

void SchedulerImpl::Dispatch(int64_t now, Actions* a) {
  if (queues_.empty() || stopping_) return;
  for (auto& [id, w] : workers_) {
    if (w.draining) continue;
    for (size_t di = 0; di < w.devices.size(); ++di) {
      Device& d = w.devices[di];
      if (d.job != 0 || queues_.empty()) continue;
      // Sessions take turns: start after the session served last, wrap around.
      auto start = queues_.upper_bound(last_session_);
      bool assigned = false;
      for (int pass = 0; pass < 2 && !assigned; ++pass) {
        auto it = pass == 0 ? start : queues_.begin();
        auto end = pass == 0 ? queues_.end() : start;
        for (; it != end && !assigned; ++it) {
          auto& q = it->second;
          for (auto qi = q.begin(); qi != q.end(); ++qi) {
            Job& job = jobs_.at(*qi);
            if (job.job.backend != d.backend || !ArchMatches(job.job.arch, d.arch)) continue;
            job.worker = id;
            job.device = static_cast<int>(di);
            job.attempt++;
            d.job = *qi;
            w.last_busy_ms = now;
            last_session_ = it->first;
            if (w.local)
              a->local.emplace_back(job.job, job.attempt);
            else
              a->remote.emplace_back(id, std::make_pair(job.job, job.attempt));
            q.erase(qi);
            assigned = true;
            break;
          }
          if (assigned && q.empty()) {
            queues_.erase(it);
            break;
          }
        }
      }
    }
  }
}

void SchedulerImpl::Expire(int64_t now, Actions* a) {
  if (opt_.wait_for_device_s <= 0) return;
  std::vector<uint64_t> expired;
  for (auto& [session, q] : queues_)
    for (uint64_t id : q) {
      const Job& j = jobs_.at(id);
      if (now - j.queued_ms > int64_t(opt_.wait_for_device_s) * 1000 &&
          MatchingDevices(j.job.backend, j.job.arch) == 0)
        expired.push_back(id);
    }
  for (uint64_t id : expired) {
    Job& j = jobs_.at(id);
    auto& q = queues_[j.job.session_id];
    q.erase(std::find(q.begin(), q.end(), id));
    if (q.empty()) queues_.erase(j.job.session_id);
    eval::EvalResult r;
    r.job_id = id;
    r.status = fb::OutcomeStatus::InfraError;
    r.diagnostics = "no worker serving backend '" + j.job.backend + "'" +
                    (j.job.arch.empty() ? "" : " arch '" + j.job.arch + "'") + " within " +
                    std::to_string(opt_.wait_for_device_s) + " s (worker.wait_for_device_s)";
    ++expired_;
    Finish(id, std::move(r), a);
  }
}

Status SchedulerImpl::Submit(eval::EvalJob job, std::function<void(eval::EvalResult)> done) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return Status::Unavailable("evaluator is shutting down");
    const bool resumed = awaiting_resubmit_.erase(job.job_id) > 0;
    if (jobs_.count(job.job_id)) return Status::InvalidArgument("job id already queued");
    const size_t devices = MatchingDevices(job.backend, job.arch);
    const std::string what =
        "backend '" + job.backend + "'" + (job.arch.empty() ? "" : " arch '" + job.arch + "'");
    if (devices == 0 && !router_ && !resumed)
      return Status::Unavailable("no worker serves " + what);
    // The authoritative language check of htamd's jobs: here, at Submit, the client hears the
    // refusal at once (a job refused later, at dispatch, could only end as InfraError). Each
    // device's language is its plugin's own (the local evaluator's BackendLanguage, a remote
    // worker's register message); a device that names none refuses nothing. "kernelbench" (a
    // ModelNew file) is checked against the task below.
    for (const auto& [id, w] : workers_)
      for (const auto& d : w.devices)
        if (d.backend == job.backend && !d.language.empty())
          HTAM_RETURN_IF_ERROR(eval::CheckLanguage(job.backend, d.language, job.language));
    struct stat st;
    if (!resumed && stat((job.task_dir + "/task.json").c_str(), &st) != 0)
      return Status::InvalidArgument("no task.json in " + job.task_dir);
    if (!resumed && job.language == "kernelbench")
      HTAM_RETURN_IF_ERROR(eval::CheckKernelBenchLanguage(job.task_dir));
    if (!resumed) {
      size_t waiting = 0;
      for (const auto& [s, q] : queues_)
        for (uint64_t id : q) {
          const auto& o = jobs_.at(id).job;
          if (o.backend == job.backend &&
              (o.arch.empty() || job.arch.empty() || o.arch == job.arch))
            ++waiting;
        }
      const size_t limit = size_t(opt_.queue_per_device) * std::max<size_t>(devices, 1);
      if (waiting >= limit) {
        ++busy_refusals_;
        return Status::ResourceExhausted("busy: " + std::to_string(waiting) + " job(s) wait for " +
                                         std::to_string(devices) + " device(s) of " + what +
                                         " (worker.queue_per_device = " +
                                         std::to_string(opt_.queue_per_device) + "); retry later");
      }
      if (journal_) {
        Status put = journal_->Put(job);
        if (!put.ok()) return Status::Unavailable("cannot record the job: " + put.ToString());
      }
    }
    Job j;
    j.queued_ms = NowMs();
    j.done = std::move(done);
    const uint64_t id = job.job_id, session = job.session_id;
    j.job = std::move(job);
    jobs_.emplace(id, std::move(j));
    queues_[session].push_back(id);
    ++submitted_;
  }
  Wake();
  return Status::OK();
}

Result<eval::EvalResult> SchedulerImpl::Evaluate(eval::EvalJob job) {
  auto promise = std::make_shared<std::promise<eval::EvalResult>>();
  auto fut = promise->get_future();
  HTAM_RETURN_IF_ERROR(
      Submit(std::move(job), [promise](eval::EvalResult r) { promise->set_value(std::move(r)); }));
  return fut.get();
}

std::vector<fb::DeviceInfoT> SchedulerImpl::Devices() {
  MutexLock lock(&mu_);
  std::vector<fb::DeviceInfoT> out;
  for (const auto& [id, w] : workers_)
    for (size_t i = 0; i < w.devices.size(); ++i) {
      fb::DeviceInfoT d;
      d.backend = w.devices[i].backend;
      d.arch = w.devices[i].arch;
      d.name = w.devices[i].name;
      d.memory_bytes = w.devices[i].memory_bytes;
      d.worker =
          (w.local ? std::string("local:") : w.name + ":") + d.backend + ":" + std::to_string(i);
      out.push_back(std::move(d));
    }
  return out;
}

std::vector<std::string> SchedulerImpl::Backends() {
  std::vector<std::string> out;
  for (const auto& d : Devices())
    if (std::find(out.begin(), out.end(), d.backend) == out.end()) out.push_back(d.backend);
  return out;
}

std::vector<eval::EvalJob> SchedulerImpl::Recovered() {
  MutexLock lock(&mu_);
  return std::move(recovered_);
}

std::string SchedulerImpl::StatusText() {
  std::string text = local_ ? local_->StatusText() : "# evaluation\nlocal: off\n";
  MutexLock lock(&mu_);
  size_t queued = 0;
  for (const auto& [s, q] : queues_) queued += q.size();
  std::ostringstream o;
  o << "scheduler_queued: " << queued << "\n"
    << "scheduler_running: " << jobs_.size() - queued << "\n"
    << "remote_workers: " << workers_.size() - (local_ ? 1 : 0) << "\n";
  return text + o.str();
}

std::string SchedulerImpl::WorkersStatusText() {
  MutexLock lock(&mu_);
  const int64_t now = NowMs();
  while (!finished_ms_.empty() && now - finished_ms_.front() > 60000) finished_ms_.pop_front();
  size_t queued = 0, devices = 0, busy = 0;
  std::map<std::string, size_t> by_kind;
  for (const auto& [s, q] : queues_)
    for (uint64_t id : q) {
      ++queued;
      const auto& j = jobs_.at(id).job;
      by_kind[j.backend + (j.arch.empty() ? "" : "/" + j.arch)]++;
    }
  for (const auto& [id, w] : workers_)
    for (const auto& d : w.devices) {
      ++devices;
      if (d.job) ++busy;
    }
  std::ostringstream o;
  o << "# workers\n"
    << "endpoint: " << (bound_.empty() ? "off" : bound_) << "\n"
    << "curve: " << (opt_.curve ? "on" : "off") << "\n"
    << "durable_queue: " << (journal_ ? "on" : "off") << "\n"
    << "workers: " << workers_.size() << "\n"
    << "devices: " << devices << "\n"
    << "devices_busy: " << busy << "\n"
    << "queue_length: " << queued << "\n"
    << "queue_limit_per_device: " << opt_.queue_per_device << "\n"
    << "sessions_waiting: " << queues_.size() << "\n"
    << "jobs_submitted: " << submitted_ << "\n"
    << "jobs_finished: " << finished_ << "\n"
    << "jobs_failed: " << failed_ << "\n"
    << "jobs_requeued: " << requeued_ << "\n"
    << "jobs_expired: " << expired_ << "\n"
    << "stale_results_dropped: " << stale_dropped_ << "\n"
    << "busy_refusals: " << busy_refusals_ << "\n"
    << "workers_joined: " << workers_joined_ << "\n"
    << "workers_lost: " << workers_lost_ << "\n"
    << "throughput_last_minute: " << finished_ms_.size() << "\n";
  for (const auto& [k, n] : by_kind) o << "queue_" << k << ": " << n << "\n";
  if (fleet_status_) o << fleet_status_();
  for (const auto& [id, w] : workers_) {
    size_t running = 0;
    for (const auto& d : w.devices) running += d.job ? 1 : 0;
    o << "worker_" << w.name << ": host=" << (w.local ? "local" : w.host)
      << " devices=" << w.devices.size() << " running=" << running << " jobs=" << w.jobs
      << " failures=" << w.failures << " idle_ms=" << (w.local ? 0 : now - w.last_seen_ms)
      << " up_s=" << (now - w.joined_ms) / 1000 << "\n";
    for (size_t i = 0; i < w.devices.size(); ++i) {
      const Device& d = w.devices[i];
      o << "device_" << w.name << "_" << i << ": backend=" << d.backend << " arch=" << d.arch
        << " memory_mb=" << (d.memory_bytes >> 20) << " state=" << (d.job ? "busy" : "idle")
        << " jobs=" << d.jobs << " name=\"" << d.name << "\"\n";
    }
  }
  return o.str();
}

void SchedulerImpl::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  stop_thread_ = true;
  Wake();
  if (thread_.joinable()) thread_.join();
  if (local_) local_->Shutdown();  // running local jobs end with InfraError: they stay recorded
  Actions a;
  {
    MutexLock lock(&mu_);
    std::vector<uint64_t> ids;
    for (auto& [id, j] : jobs_) ids.push_back(id);
    for (uint64_t id : ids) {
      eval::EvalResult r;
      r.job_id = id;
      r.status = fb::OutcomeStatus::InfraError;
      r.diagnostics = "the daemon stopped before the job ran; it resumes at the next start";
      Finish(id, std::move(r), &a);
    }
    queues_.clear();
  }
  for (auto& [done, r] : a.done)
    if (done) done(std::move(r));
  {
    MutexLock lock(&wake_mu_);
    wake_push_.reset();
  }
  router_.reset();
  wake_pull_.reset();
  if (zap_) zap_->Stop();
  zap_.reset();
}

pool::FleetSnapshot SchedulerImpl::Fleet() {
  MutexLock lock(&mu_);
  const int64_t now = NowMs();
  pool::FleetSnapshot out;
  std::map<std::pair<std::string, std::string>, size_t> queued;
  for (const auto& [s, q] : queues_)
    for (uint64_t id : q) {
      const auto& j = jobs_.at(id).job;
      queued[{j.backend, j.arch}]++;
    }
  for (const auto& [k, n] : queued) out.queues.push_back({k.first, k.second, n});
  for (const auto& [id, w] : workers_) {
    if (w.local) continue;
    pool::FleetWorker fw;
    fw.name = w.name;
    fw.draining = w.draining;
    bool running = false;
    for (const auto& d : w.devices) {
      fw.devices.push_back({d.backend, d.arch, d.job != 0});
      running = running || d.job != 0;
    }
    fw.idle_ms = running ? 0 : now - w.last_busy_ms;
    out.workers.push_back(std::move(fw));
  }
  return out;
}

bool SchedulerImpl::Drain(const std::string& name) {
  MutexLock lock(&mu_);
  for (auto& [id, w] : workers_) {
    if (w.local || w.name != name) continue;
    if (!w.draining) {
      HTAM_LOG(kInfo, kComponent) << "worker " << w.name << " draining (no new jobs)";
    }
    w.draining = true;
    for (const auto& d : w.devices)
      if (d.job != 0) return false;
    return true;
  }
  return false;
}

void SchedulerImpl::SetFleetStatus(std::function<std::string()> source) {
  MutexLock lock(&mu_);
  fleet_status_ = std::move(source);
}

Result<std::unique_ptr<eval::Evaluator>> StartScheduler(const SchedulerOptions& options,
                                                        std::unique_ptr<eval::Evaluator> local) {
  auto s = std::make_unique<SchedulerImpl>(options, std::move(local));
  HTAM_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<eval::Evaluator>(std::move(s));
}

}  // namespace htam::scheduler
