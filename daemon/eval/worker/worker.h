// htam-worker's link to the daemon: a DEALER socket to htamd's worker endpoint (CURVE when keys
// are configured), registration of the devices of a local Evaluator, heartbeats both ways,
// reconnection when the daemon goes silent (a restart), and jobs run through the Evaluator (the
// same sandboxed per-candidate worker processes as on the daemon host; compiles happen here).
// Thread-safety: Run() on one thread; Stop() from any thread or a signal-driven flag.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "base/status.h"
#include "daemon/config/config.h"
#include "daemon/eval/evaluator.h"

namespace htam::worker {

struct WorkerOptions {
  std::string connect;                 // worker.connect
  std::string name;                    // worker.name ("" = host:pid)
  std::string server_public_key_file;  // worker.server_public_key_file ("" = no CURVE)
  std::string key_file;                // worker.key_file
  int heartbeat_ms = 1000;             // worker.heartbeat_ms (the daemon's value wins once known)
  int liveness = 5;                    // worker.liveness
  std::string task_root;               // where shipped task files are unpacked

  static WorkerOptions FromConfig(const Config& config);
};

// Serves jobs until *stop becomes true. Returns non-OK only for set-up errors (bad keys).
Status RunWorker(const WorkerOptions& options, eval::Evaluator* evaluator,
                 const std::atomic<bool>* stop);

}  // namespace htam::worker
