// RunDaemon: data directory lock, memory, evaluator, server, signals (handlers only set a flag).
#include "daemon/server/run.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "base/log.h"
#include "daemon/config/sections.h"
#include "daemon/memory/memory.h"
#include "daemon/server/metrics.h"
#include "daemon/server/server.h"
#ifdef HTAM_SERVER_HAVE_EVAL
#include "daemon/eval/evaluator.h"
#include "daemon/eval/pool/fleet.h"
#include "daemon/eval/pool/pool.h"
#include "daemon/eval/scheduler/scheduler.h"
#endif

namespace htam {

namespace {
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void HandleStopSignal(int) {
  g_stop.store(true);
}

void InstallSignalHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = HandleStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}
}  // namespace

namespace server {

Result<std::unique_ptr<PidLock>> PidLock::Acquire(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("cannot open lock file " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    ::close(fd);
    std::string other = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!other.empty() && (other.back() == '\n' || other.back() == ' ')) other.pop_back();
    return Status::FailedPrecondition("another htamd (pid " + other + ") holds " + path +
                                      "; two daemons never open the same store");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    ::close(fd);
    return Status::IOError("cannot write lock file " + path);
  }
  ::fsync(fd);
  return std::unique_ptr<PidLock>(new PidLock(fd, path));
}

PidLock::~PidLock() {
  ::unlink(path_.c_str());  // still holding the lock: nobody can race in between
  ::close(fd_);
}

}  // namespace server

int RunDaemon(const Config& config) {
  const config::General general = config::General::From(config);
  const config::Server server_cfg = config::Server::From(config);
  const std::string log_file = general.log_file;
  if (!log_file.empty() && !SetLogFile(log_file)) {
    HTAM_LOG(kError, "htamd") << "cannot open log file " << log_file;
    return 1;
  }
  const std::string data_dir = general.data_dir;
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    HTAM_LOG(kError, "htamd") << "cannot create data directory " << data_dir << ": "
                              << ec.message();
    return 1;
  }
  auto lock = server::PidLock::Acquire(data_dir + "/" + server_cfg.lock_file);
  if (!lock.ok()) {
    HTAM_LOG(kError, "htamd") << lock.status().message();
    return 1;
  }
  InstallSignalHandlers();
  HTAM_LOG(kInfo, "htamd") << "htamd " << HTAM_VERSION << " starting, pid " << ::getpid()
                           << ", data directory " << data_dir;
  for (const auto& [name, source] : config.sources())
    HTAM_LOG(kInfo, "htamd") << "option " << name << " = " << config.GetString(name) << " ("
                             << source << ")";

  // Metrics and health first (server.metrics_endpoint): /ready answers 503 while the memory and
  // its indexes load, which may take a while on a big store.
  server::Metrics metrics;
  std::unique_ptr<server::MetricsHttp> metrics_http;
  if (const std::string ep = server_cfg.metrics_endpoint; !ep.empty()) {
    auto http = server::MetricsHttp::Start(ep, &metrics);
    if (!http.ok()) {
      HTAM_LOG(kError, "htamd") << http.status().ToString();
      return 1;
    }
    metrics_http = std::move(*http);
  }

  auto memory = memory::Memory::Open(memory::MemoryOptions::FromConfig(config));
  if (!memory.ok()) {
    HTAM_LOG(kError, "htamd") << "cannot open the memory: " << memory.status().ToString();
    return 1;
  }
  memory::Memory* mem = memory->get();
  metrics.SetMemoryStatusSource([mem] { return mem->StatusText(); });
  // On every way out below, the HTTP thread stops before the memory goes away (this guard is
  // destroyed before `memory`).
  struct StopMetrics {
    std::unique_ptr<server::MetricsHttp>* http;
    ~StopMetrics() { http->reset(); }
  } stop_metrics{&metrics_http};
  server::Services services;
  services.memory = memory->get();
  if (metrics_http) services.metrics = &metrics;
#ifdef HTAM_SERVER_HAVE_EVAL
  std::unique_ptr<eval::Evaluator> evaluator;
  std::unique_ptr<pool::Pool> worker_pool;  // pool.manager: worker jobs on the cluster
  {
    // This host's devices (unless worker.local = false), behind the scheduler that also serves
    // remote workers (worker.endpoint) and keeps the durable queue.
    std::unique_ptr<eval::Evaluator> local;
    if (config::Worker::From(config).local) {
      auto ev = eval::Evaluator::Start(eval::EvalOptions::FromConfig(config));
      if (ev.ok())
        local = std::move(*ev);
      else
        HTAM_LOG(kWarn, "htamd") << "local evaluation unavailable: " << ev.status().ToString();
    }
    auto sched_options = scheduler::SchedulerOptions::FromConfig(config);
    auto created_pool = pool::CreatePool(config);
    if (!created_pool.ok()) {
      HTAM_LOG(kError, "htamd") << created_pool.status().ToString();
      return 1;
    }
    worker_pool = std::move(*created_pool);
    if (worker_pool && !worker_pool->worker_public_key().empty())
      sched_options.extra_worker_keys.push_back(worker_pool->worker_public_key());
    if (local || !sched_options.endpoint.empty()) {
      auto sched = scheduler::StartScheduler(sched_options, std::move(local));
      if (!sched.ok()) {
        HTAM_LOG(kError, "htamd") << "scheduler: " << sched.status().ToString();
        return 1;
      }
      evaluator = std::move(*sched);
      services.evaluator = evaluator.get();
      HTAM_LOG(kInfo, "htamd") << "evaluation: " << evaluator->Backends().size() << " backend(s), "
                               << evaluator->Devices().size() << " device(s)";
      if (worker_pool)
        worker_pool->Start(dynamic_cast<pool::FleetView*>(evaluator.get()));
    } else {
      HTAM_LOG(kWarn, "htamd") << "evaluation unavailable (Submit will be refused)";
    }
  }
#else
  HTAM_LOG(kWarn, "htamd") << "built without the evaluator: Submit will be refused";
#endif

  int code = 0;
  {
    server::Server srv(server::ServerOptions::FromConfig(config), services);
    srv.StopWhen(&g_stop);
    Status st = srv.Start();
    if (!st.ok()) {
      HTAM_LOG(kError, "htamd") << st.ToString();
      code = 1;
    } else {
      metrics.SetReady(true);
      st = srv.Run();
      metrics.SetReady(false);
      if (!st.ok()) {
        HTAM_LOG(kError, "htamd") << st.ToString();
        code = 1;
      }
    }
#ifdef HTAM_SERVER_HAVE_EVAL
    // Before the server goes away: Shutdown() fails queued jobs through their callbacks, which
    // hand results to the server.
    if (worker_pool) worker_pool->Stop();  // with pool.cancel_on_exit, its jobs end first
    if (evaluator) evaluator->Shutdown();
#endif
  }
#ifdef HTAM_SERVER_HAVE_EVAL
  evaluator.reset();
#endif
  metrics_http.reset();  // no scrape may reach into the memory while it closes
  Status snap = (*memory)->SnapshotIndexes();
  if (!snap.ok()) {
    HTAM_LOG(kWarn, "htamd") << "index snapshot at exit: " << snap.ToString();
  }
  memory->reset();
  HTAM_LOG(kInfo, "htamd") << (g_stop.load() ? "signal received, " : "") << "exiting with code "
                           << code;
  return code;
}

}  // namespace htam
