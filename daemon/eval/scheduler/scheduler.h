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
#include "daemon/config/sections.h"
#include "daemon/eval/evaluator.h"

namespace htam::scheduler {

// All fields default from the configuration table (options.inc), whose defaults they take.
struct SchedulerOptions {
  std::string endpoint;              // worker.endpoint: ROUTER for htam-worker; "" = none
  bool curve = config::TableDefaults<config::Worker>().curve;  // worker.curve
  std::string secret_key_file;       // server.curve_secret_key_file (the daemon's key pair)
  std::string authorized_keys;       // worker.curve_authorized_keys
  bool allow_insecure_bind = config::TableDefaults<config::Server>().allow_insecure_bind;
  int heartbeat_ms = int(config::TableDefaults<config::Worker>().heartbeat_ms);
  int liveness = int(config::TableDefaults<config::Worker>().liveness);
  int queue_per_device = int(config::TableDefaults<config::Worker>().queue_per_device);
  int max_attempts = int(config::TableDefaults<config::Worker>().max_attempts);
  int wait_for_device_s = int(config::TableDefaults<config::Worker>().wait_for_device_s);
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
