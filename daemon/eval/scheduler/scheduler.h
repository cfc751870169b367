// The scheduler: htamd's evaluator in front of the local one. It keeps one queue per session
// (fair share: sessions take turns), dispatches each job to a free device whose backend and
// architecture match (this host's devices through the local Evaluator, or devices of remote
// htam-worker processes connected to the worker endpoint), answers "busy" past a per-device queue
// limit, heartbeats workers both ways, requeues the job of a worker that died or went silent
// (a late result of the lost attempt is dropped), and records queued jobs durably so that they
// resume after a daemon restart. Protocol: docs/protocol.md, "Worker protocol".
// Thread-safety: every public method is safe for concurrent use; one internal thread owns the
// worker socket. Callbacks run on that thread or on the local evaluator's threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/config/config.h"
#include "daemon/eval/evaluator.h"

namespace htam::scheduler {

// All fields default from the `worker` section of the configuration table (options.inc).
struct SchedulerOptions {
  std::string endpoint;              // worker.endpoint: ROUTER for htam-worker; "" = none
  bool curve = false;                // worker.curve
  std::string secret_key_file;       // server.curve_secret_key_file (the daemon's key pair)
  std::string authorized_keys;       // worker.curve_authorized_keys
  bool allow_insecure_bind = false;  // server.allow_insecure_bind
  int heartbeat_ms = 1000;           // worker.heartbeat_ms
  int liveness = 5;                  // worker.liveness
  int queue_per_device = 8;          // worker.queue_per_device
  int max_attempts = 3;              // worker.max_attempts
  int wait_for_device_s = 600;       // worker.wait_for_device_s
  std::string queue_dir;             // <data_dir>/queue when worker.durable_queue; "" = not durable
  // Worker public keys allowed beside worker.curve_authorized_keys: the pool controller's key for
  // the worker jobs it submits (daemon/eval/pool). Not from the configuration.
  std::vector<std::string> extra_worker_keys;

  static SchedulerOptions FromConfig(const Config& config);
};

// Starts the scheduler (binds the worker endpoint, opens the durable queue). `local` may be null
// (no local devices: remote workers only). The result is the daemon's Evaluator; it is also a
// pool::FleetView (daemon/eval/pool/fleet.h).
Result<std::unique_ptr<eval::Evaluator>> StartScheduler(const SchedulerOptions& options,
                                                        std::unique_ptr<eval::Evaluator> local);

}  // namespace htam::scheduler
