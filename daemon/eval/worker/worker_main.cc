// htam-worker: evaluates candidates for a remote htamd. Started by the fleet's scheduler
// (systemd, Slurm, Kubernetes: docs/operations.md); one per GPU or one per host.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iostream>

#include "base/log.h"
#include "daemon/config/config.h"
#include "daemon/config/sections.h"
#include "daemon/eval/worker/worker.h"

namespace {
std::atomic<bool> g_stop{false};
extern "C" void OnSignal(int) {
  g_stop.store(true);
}
}  // namespace

int main(int argc, char** argv) {
  htam::ProgramInfo program{"htam-worker",
                            "evaluates candidate kernels on this host's devices for a remote htamd",
                            HTAM_VERSION};
  bool exit_now = false;
  auto config = htam::Config::Parse(argc, argv, program, std::cout, &exit_now);
  if (!config.ok()) {
    std::cerr << "htam-worker: " << config.status().message() << "\n";
    return 2;
  }
  if (exit_now) return 0;
  const htam::config::General general = htam::config::General::From(*config);
  htam::LogLevel level;
  if (!htam::ParseLogLevel(general.log_level, &level)) {
    std::cerr << "htam-worker: bad general.log_level\n";
    return 2;
  }
  htam::SetLogLevel(level);
  htam::LogFormat format;
  if (!htam::ParseLogFormat(general.log_format, &format)) {
    std::cerr << "htam-worker: bad general.log_format (text or json)\n";
    return 2;
  }
  htam::SetLogFormat(format);
  const std::string log_file = general.log_file;
  if (!log_file.empty() && !htam::SetLogFile(log_file)) {
    std::cerr << "htam-worker: cannot open log file " << log_file << "\n";
    return 1;
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto evaluator = htam::eval::Evaluator::Start(htam::eval::EvalOptions::FromConfig(*config));
  if (!evaluator.ok()) {
    HTAM_LOG(kError, "worker") << "cannot start evaluation: " << evaluator.status().ToString();
    return 1;
  }
  if ((*evaluator)->Devices().empty()) {
    HTAM_LOG(kError, "worker") << "no device can evaluate here (see the notes above)";
    return 1;
  }
  htam::Status st = htam::worker::RunWorker(htam::worker::WorkerOptions::FromConfig(*config),
                                            evaluator->get(), &g_stop);
  (*evaluator)->Shutdown();
  if (!st.ok()) {
    HTAM_LOG(kError, "worker") << st.ToString();
    return 1;
  }
  HTAM_LOG(kInfo, "worker") << "exiting";
  return 0;
}
