// What the worker pool needs of htamd's scheduler (daemon/eval/scheduler implements it) and the one
// thing the scheduler lets it do: demand by backend and architecture, the remote workers with how long each
// has run nothing, and draining a worker (no new job goes to it) before the controller ends it.
// The scheduler returned by StartScheduler implements FleetView (dynamic_cast from the Evaluator).
// Thread-safety: every method is safe for concurrent use.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace htam::pool {

struct FleetDevice {
  std::string backend, arch;
  bool busy = false;
};

struct FleetWorker {
  std::string name;
  std::vector<FleetDevice> devices;
  int64_t idle_ms = 0;    // since its last job finished (or it joined), 0 while a job runs
  bool draining = false;  // Drain() was called: no job is dispatched to it
};

struct FleetQueue {
  std::string backend, arch;  // arch "" = any of the backend
  size_t queued = 0;          // jobs waiting for a device (none running)
};

struct FleetSnapshot {
  std::vector<FleetQueue> queues;
  std::vector<FleetWorker> workers;  // remote workers only
};

class FleetView {
 public:
  virtual ~FleetView() = default;
  virtual FleetSnapshot Fleet() = 0;
  // Stops dispatching to the worker called `name`. True when it now runs nothing, so that ending
  // it loses no attempt; false while a job still runs there (ask again later) or no such worker.
  virtual bool Drain(const std::string& name) = 0;
  // Lines appended to the "# workers" status section (the controller's own state).
  virtual void SetFleetStatus(std::function<std::string()> source) = 0;
};

}  // namespace htam::pool
