// The Evaluator: plugin discovery, one supervised worker slot per device, a bounded job queue,
// per-stage deadlines, outcome classification of dead workers, restart. See evaluator.h.
#include "daemon/eval/evaluator.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "base/file.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/process.h"
#include "base/thread_annotations.h"
#include "daemon/config/sections.h"
#include "daemon/eval/compile_ahead.h"
#include "daemon/eval/job_codec.h"
#include "daemon/eval/sandbox.h"
#include "daemon/eval/work_clock.h"

namespace htam::eval {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto b = item.find_first_not_of(" \t");
    auto e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

bool IsFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string MakeAbsolute(const std::string& p) {
  if (p.empty() || p[0] == '/') return p;
  char buf[4096];
  return std::string(getcwd(buf, sizeof buf) ? buf : ".") + "/" + p;
}

fb::OutcomeStatus StatusFromName(const std::string& n) {
  for (int i = 0; i <= int(fb::OutcomeStatus::MAX); ++i)
    if (n == fb::EnumNameOutcomeStatus(fb::OutcomeStatus(i))) return fb::OutcomeStatus(i);
  return fb::OutcomeStatus::InfraError;
}

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

struct Plugin {
  std::string name, path, language, version, notes;
  bool can_run = false;
  json devices;
};

struct Pending {
  EvalJob job;
  std::function<void(EvalResult)> done;
};

}  // namespace

EvalOptions EvalOptions::FromConfig(const Config& config) {
  const config::Eval ev = config::Eval::From(config);
  EvalOptions o;
  o.config = config;
  o.plugin_dir = ev.plugin_dir;
  o.worker_path = ev.worker_path;
  o.backends = SplitList(ev.backends);
  o.cache_dir = ev.cache_dir;
  if (o.cache_dir.empty()) o.cache_dir = config::General::From(config).data_dir + "/eval-cache";
  o.scratch_dir = ev.scratch_dir;
  o.sdk_include_dir = ev.sdk_include_dir;
  return o;
}

class EvaluatorImpl : public Evaluator {
 public:
  explicit EvaluatorImpl(EvalOptions o)
      : opt_(std::move(o)),
        cfg_(opt_.config),
        ev_(config::Eval::From(cfg_)),
        general_(config::General::From(cfg_)),
        server_(config::Server::From(cfg_)) {}
  ~EvaluatorImpl() override { Shutdown(); }

  Status Init();
  // Init's steps, in order.
  Status PrepareFolders();
  Status FindMemoryCgroup();
  void CheckSandboxUserReach(const std::map<std::string, std::string>& plugins);
  Status AddBackend(const std::string& name, const std::string& path);
  void StartCompileAhead();
  Status Submit(EvalJob job, std::function<void(EvalResult)> done) override EXCLUDES(mu_);
  Result<EvalResult> Evaluate(EvalJob job) override EXCLUDES(mu_);
  std::vector<fb::DeviceInfoT> Devices() override;
  std::vector<std::string> Backends() override;
  std::string BackendLanguage(const std::string& backend) override;
  std::string StatusText() override EXCLUDES(mu_);
  void Shutdown() override EXCLUDES(mu_);

 private:
  struct Slot {
    std::string backend, plugin, language;
    int device = 0;
    fb::DeviceInfoT info;
    std::thread thread;
    std::unique_ptr<WorkerProcess> worker;
    json sandbox;
    std::atomic<bool> busy{false};
    uint64_t jobs = 0, restarts = 0;
    double last_restart_ms = 0;
    bool worker_kb = false;  // the worker has a runner for KernelBench (ModelNew) jobs only
  };

  // kb: a worker whose runner serves KernelBench (ModelNew) jobs of a backend that otherwise runs
  // candidates in the verifier (not in eval.runner_backends).
  SandboxOptions SandboxFor(const std::string& backend, bool kb = false) const;
  // Whether candidates of `backend` run in a runner (eval.runner, eval.runner_backends).
  bool RunnerBackend(const std::string& backend) const;
  // Jobs one worker process serves (eval.runner_jobs with a runner, else eval.worker_jobs).
  int64_t JobsPerWorker(const std::string& backend) const;
  Status CheckKernelBenchJob(const EvalJob& job) const;
  std::vector<std::string> WorkerArgs(const Slot& s, bool describe, const std::string& plugin,
                                      const std::string& backend, bool kb = false) const;
  Result<std::unique_ptr<WorkerProcess>> StartWorker(Slot* s, bool kb = false);
  // The load_inline build cache of KernelBench candidates (eval.kernelbench_build_cache).
  std::string KbBuildCache() const;
  void SlotLoop(Slot* s) EXCLUDES(mu_);
  // Moves the first queued job that slot `s` can run into *p; false if there is none.
  bool TakeJob(const Slot& s, Pending* p) REQUIRES(mu_);
  EvalResult RunJob(Slot* s, const EvalJob& job) EXCLUDES(mu_);
  // A job whose candidate's process ran out of device memory beside other jobs (`first`, its
  // JobResult.retry_alone): once more on a fresh worker, with the whole share of the device's
  // memory reserved (GateSpec.kernelbench_alone); the diagnostics say both.
  EvalResult RunAlone(Slot* s, const EvalJob& job, const EvalResult& first) EXCLUDES(mu_);
  // RunJob's steps: a worker for the slot (started when there is none, or when a KernelBench job
  // needs one with a runner); the job's frame; sent to the worker (one fresh worker and one more
  // try when the idle one died); the worker's answer awaited within each stage's limit and the
  // job's (returns whether the worker serves on); its result taken; the cache entries sealed.
  Status EnsureWorker(Slot* s, bool kb_worker);
  // The job as its worker frame carries it; `candidate_hash` is the job's content key.
  std::string WorkerFrame(const EvalJob& job, const std::string& candidate_hash) const;
  Status SendJob(Slot* s, const std::string& frame);
  std::chrono::seconds StageLimit(const std::string& stage) const;
  // waited_s: seconds of waiting left out of the limits (eval.load_independent_limits), or -1.
  std::string TimeoutMessage(const std::string& stage, double waited_s) const;
  bool AwaitAnswer(WorkerProcess* w, const EvalJob& job, bool ahead, EvalResult* r,
                   std::string* stage) EXCLUDES(mu_);
  bool TakeResult(WorkerProcess* w, const EvalJob& job, bool ahead, const json& frame,
                  EvalResult* r);
  void SealCacheEntries() const;
  std::unique_ptr<fb::GateSpecT> GateSpec() const;
  std::unique_ptr<fb::ProfileRequestT> ProfileRequest() const;
  void Count(fb::OutcomeStatus st) EXCLUDES(mu_);
  // Whether a job's source is compiled ahead (compile_ahead.h): runner backends' own language.
  bool CompiledAhead(const EvalJob& job) const;
  // Whether `backend`'s candidates are compiled ahead (eval.compile_ahead_backends, runner only).
  bool AheadBackend(const std::string& backend) const;
  // The command line of a compile-only worker for `backend` (compile_ahead.h).
  std::vector<std::string> CompileOnlyArgs(const std::string& backend,
                                           const std::string& stage) const;
  // The command line of a compile-only worker that compiles a task's reference for `backend`
  // into the verifiers' cache (compile_ahead.h).
  std::vector<std::string> ReferenceCompileArgs(const std::string& backend) const;
  // --hide arguments: what a runner must not see (the task suite, the data directory, scratch,
  // the caches, eval.runner_hidden_dirs).
  void AddHidden(std::vector<std::string>* a) const;
  // --option arguments: eval.<backend>_<key> as key=value.
  void AddBackendOptions(const std::string& backend, std::vector<std::string>* a) const;

  EvalOptions opt_;
  Config cfg_;
  const config::Eval ev_;  // the eval section, typed (sections.h)
  const config::General general_;
  const config::Server server_;
  std::string worker_path_, sdk_include_;
  std::vector<Plugin> plugins_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::string> notes_;
  bool drop_user_ = true;  // false when eval.sandbox_user cannot reach what workers need
  // Where workers' memory cgroups go (eval.host_memory_limit_mb); unset when off or unavailable.
  std::optional<CgroupParent> cgroup_parent_;
  // Null when off (eval.compile_ahead_backends); set before the slots run.
  std::unique_ptr<CompileAhead> ahead_;

  Mutex mu_;
  CondVar cv_;  // a job queued, stopping
  std::deque<Pending> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::string, uint64_t> by_status_ GUARDED_BY(mu_);
  uint64_t submitted_ GUARDED_BY(mu_) = 0;
  uint64_t done_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> next_seed_{0};
};

namespace {
// Whether `user` can read every path (and search every parent directory): workers drop to that
// user, and a checkout or data directory under a private folder (mode 0700, such as /root or a
// mktemp -d) would otherwise fail every evaluation. Checked in a child that drops privileges.
bool UserCanReach(const std::string& user, const std::vector<std::string>& paths,
                  std::string* blocked) {
  struct passwd* pw = getpwnam(user.c_str());
  if (!pw) {
    *blocked = "no such user " + user;
    return false;
  }
  // The child keeps to async-signal-safe calls (this process has threads): a 4-byte reply stays in
  // the string's own buffer, nothing is allocated.
  auto run = RunForked([&](std::string* reply) {
    int bad = -1;
    if (setgroups(0, nullptr) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) bad = -2;
    for (size_t i = 0; bad == -1 && i < paths.size(); ++i)
      if (!paths[i].empty() && access(paths[i].c_str(), R_OK) != 0) bad = static_cast<int>(i);
    reply->assign(reinterpret_cast<const char*>(&bad), sizeof(bad));
    return 0;
  });
  int bad = -1;  // cannot check: keep the configured behaviour
  if (run.ok() && run->reply.size() == sizeof(bad))
    std::memcpy(&bad, run->reply.data(), sizeof(bad));
  if (bad == -1) return true;
  *blocked =
      bad == -2 ? std::string("cannot switch to that user") : paths[static_cast<size_t>(bad)];
  return false;
}
}  // namespace

int64_t EvaluatorImpl::JobsPerWorker(const std::string& backend) const {
  const bool runner = ev_.runner && RunnerBackend(backend);
  return std::max<int64_t>(1, (runner ? ev_.runner_jobs : ev_.worker_jobs));
}

Status CheckLanguage(const std::string& backend, const std::string& takes,
                     const std::string& language) {
  if (language.empty() || language == "kernelbench" || language == takes) return Status::OK();
  return Status::InvalidArgument("backend '" + backend + "' takes " + takes + ", not " + language);
}

Status CheckKernelBenchLanguage(const std::string& task_dir) {
  std::ifstream in(task_dir + "/task.json");
  json t = json::parse(in, nullptr, false);
  if (t.is_discarded() || !t.is_object() || !t.contains("kernelbench"))
    return Status::InvalidArgument(
        "language kernelbench (a ModelNew file) is for KernelBench tasks (task.json "
        "\"kernelbench\"); " +
        task_dir +
        " is not one: submit a kernel in the backend's "
        "language");
  return Status::OK();
}

// Language "kernelbench" (a ModelNew file): only on KernelBench tasks, only with the runner.
Status EvaluatorImpl::CheckKernelBenchJob(const EvalJob& job) const {
  HTAM_RETURN_IF_ERROR(CheckKernelBenchLanguage(job.task_dir));
  if (!ev_.runner)
    return Status::InvalidArgument(
        "language kernelbench needs eval.runner (ModelNew runs apart from the golden outputs)");
  return Status::OK();
}

bool EvaluatorImpl::RunnerBackend(const std::string& backend) const {
  for (const auto& b : SplitList(ev_.runner_backends))
    if (b == backend || b == "all") return true;
  return false;
}

SandboxOptions EvaluatorImpl::SandboxFor(const std::string& backend, bool kb) const {
  SandboxOptions s;
  auto mem_backends = SplitList(ev_.memory_limit_backends);
  for (const auto& b : mem_backends)
    if (b == backend) s.memory_bytes = uint64_t(ev_.memory_limit_mb) << 20;
  s.cpu_seconds = uint64_t(ev_.cpu_limit_s);
  s.file_bytes = uint64_t(ev_.file_size_limit_mb) << 20;
  s.max_processes = uint64_t(ev_.max_processes);
  s.isolate_network = ev_.sandbox_network;
  s.readonly_fs = ev_.sandbox_readonly_fs;
  s.pid_namespace = ev_.sandbox_pid_namespace;
  s.user = drop_user_ ? ev_.sandbox_user : std::string();
  s.defer_drop = ev_.runner && (RunnerBackend(backend) || kb);
  s.scratch_dir = opt_.scratch_dir.empty() ? "/tmp" : opt_.scratch_dir;
  if (!opt_.cache_dir.empty()) s.writable_dirs.push_back(opt_.cache_dir);
  if (!ev_.device_lock_dir.empty()) s.writable_dirs.push_back(ev_.device_lock_dir);
  s.env_keep = SplitList(ev_.env_keep);
  s.cgroup_parent = cgroup_parent_;
  s.host_memory_bytes = uint64_t(std::max<int64_t>(ev_.host_memory_limit_mb, 0)) << 20;
  return s;
}

std::vector<std::string> EvaluatorImpl::WorkerArgs(const Slot& s, bool describe,
                                                   const std::string& plugin,
                                                   const std::string& backend, bool kb) const {
  std::vector<std::string> a{worker_path_,
                             "--plugin",
                             plugin,
                             "--device",
                             std::to_string(s.device),
                             "--sdk-include",
                             sdk_include_,
                             "--jobs",
                             std::to_string(JobsPerWorker(backend)),
                             "--log-level",
                             general_.log_level};
  if (!opt_.cache_dir.empty()) a.insert(a.end(), {"--cache-dir", opt_.cache_dir});
  AddBackendOptions(backend, &a);
  if (describe) {
    a.push_back("--describe");
  } else if (ev_.runner && (RunnerBackend(backend) || kb)) {
    // Candidates run in a runner process that cannot see these (runner_spawn.h).
    a.insert(a.end(), {"--split", "--check-threads", ev_.check_threads ? "1" : "0",
                       "--thread-grace-ms", std::to_string(ev_.thread_grace_ms), "--runner-leak-mb",
                       std::to_string(std::max<int64_t>(0, ev_.runner_leak_mb))});
    for (const auto& b : SplitList(ev_.runner_allocates))
      if (b == backend || b == "all") a.push_back("--runner-allocates");
    AddHidden(&a);
    if (!RunnerBackend(backend)) a.push_back("--kb-only");
    // Builds compiled ahead: opened by key, never listed or written (compile_ahead.h).
    if (ahead_ && AheadBackend(backend))
      a.insert(a.end(), {"--runner-cache-dir", opt_.cache_dir + "/ahead"});
    // The one place a runner may write that outlives it: content-keyed, not listable, sealed.
    if (!KbBuildCache().empty()) a.insert(a.end(), {"--kb-build-cache", KbBuildCache()});
    // Otherwise the runner compiles into its own temp dir: a compile cache it could write would be
    // a place to leave outputs for a later candidate, and one it could list would hand it other
    // candidates' compiled kernels.
  }
  return a;
}

void EvaluatorImpl::AddBackendOptions(const std::string& backend,
                                      std::vector<std::string>* a) const {
  const std::string prefix = "eval." + backend + "_";
  for (const auto& spec : OptionTable()) {
    if (spec.name.rfind(prefix, 0) == 0)
      a->insert(a->end(),
                {"--option", spec.name.substr(prefix.size()) + "=" + cfg_.GetString(spec.name)});
  }
}

void EvaluatorImpl::AddHidden(std::vector<std::string>* a) const {
  std::vector<std::string> hide = {ShippedPath(server_.tasks_dir, "tasks"), general_.data_dir,
                                   opt_.scratch_dir.empty() ? "/tmp" : opt_.scratch_dir,
                                   opt_.cache_dir};
  for (const auto& d : SplitList(ev_.runner_hidden_dirs)) hide.push_back(d);
  for (const auto& d : hide)
    if (!d.empty()) a->insert(a->end(), {"--hide", MakeAbsolute(d)});
}

bool EvaluatorImpl::AheadBackend(const std::string& backend) const {
  if (!ev_.runner || !RunnerBackend(backend)) return false;
  for (const auto& b : SplitList(ev_.compile_ahead_backends))
    if (b == backend || b == "all") return true;
  return false;
}

bool EvaluatorImpl::CompiledAhead(const EvalJob& job) const {
  return ahead_ && !job.source.empty() && job.language != "kernelbench" &&
         AheadBackend(job.backend);
}

std::vector<std::string> EvaluatorImpl::CompileOnlyArgs(const std::string& backend,
                                                        const std::string& stage) const {
  std::string plugin;
  for (const auto& p : plugins_)
    if (p.name == backend) plugin = p.path;
  std::vector<std::string> a{
      worker_path_,     "--plugin",           plugin,        "--device",         "0",
      "--sdk-include",  sdk_include_,         "--log-level", general_.log_level, "--split",
      "--compile-only", "--runner-cache-dir", stage};
  AddBackendOptions(backend, &a);
  AddHidden(&a);
  return a;
}

std::vector<std::string> EvaluatorImpl::ReferenceCompileArgs(const std::string& backend) const {
  std::string plugin;
  for (const auto& p : plugins_)
    if (p.name == backend) plugin = p.path;
  std::vector<std::string> a{worker_path_,     "--plugin",    plugin,
                             "--device",       "0",           "--sdk-include",
                             sdk_include_,     "--log-level", general_.log_level,
                             "--compile-only", "--cache-dir", opt_.cache_dir};
  AddBackendOptions(backend, &a);
  return a;
}

Status EvaluatorImpl::Init() {
  HTAM_RETURN_IF_ERROR(PrepareFolders());
  // Plugins: the one search (base/paths.h).
  const std::map<std::string, std::string> found = FindPlugins(opt_.plugin_dir);
  HTAM_RETURN_IF_ERROR(FindMemoryCgroup());
  CheckSandboxUserReach(found);
  for (const auto& [name, path] : found) {
    if (!opt_.backends.empty() &&
        std::find(opt_.backends.begin(), opt_.backends.end(), name) == opt_.backends.end())
      continue;
    HTAM_RETURN_IF_ERROR(AddBackend(name, path));
  }
  if (slots_.empty()) {
    notes_.push_back("no backend can evaluate here; Submit answers Unavailable");
    HTAM_LOG(kWarn, "eval") << notes_.back();
  }
  StartCompileAhead();
  for (auto& s : slots_) {
    Slot* raw = s.get();
    raw->thread = std::thread([this, raw] { SlotLoop(raw); });
  }
  return Status::OK();
}

// The worker binary, the SDK's headers and the folders the workers write.
Status EvaluatorImpl::PrepareFolders() {
  // Worker binary: configured, else shipped (base/paths.h).
  if (!opt_.worker_path.empty()) {
    if (IsFile(opt_.worker_path)) worker_path_ = MakeAbsolute(opt_.worker_path);
  } else {
    worker_path_ = FindExecutable("htam-eval-worker");
  }
  if (worker_path_.empty())
    return Status::NotFound("htam-eval-worker not found (set eval.worker_path); looked at " +
                            (opt_.worker_path.empty()
                                 ? ExecutableDir() + "/../lib/htam/htam-eval-worker"
                                 : opt_.worker_path));
  sdk_include_ = MakeAbsolute(ShippedPath(opt_.sdk_include_dir, "include"));
  if (!opt_.cache_dir.empty()) {
    opt_.cache_dir = MakeAbsolute(opt_.cache_dir);
    HTAM_RETURN_IF_ERROR(MakeDirs(opt_.cache_dir, 0755).WithContext("eval cache"));
    // Workers may run as an unprivileged user: the cache is a sticky, world-writable directory;
    // entries are sealed (root-owned, read-only) after every job so no candidate can rewrite them.
    if (geteuid() == 0 && !ev_.sandbox_user.empty()) chmod(opt_.cache_dir.c_str(), 01777);
  }
  if (!KbBuildCache().empty()) {
    HTAM_RETURN_IF_ERROR(MakeDirs(KbBuildCache(), 0755).WithContext("kernelbench build cache"));
    // Runners add entries by name (a content key) but cannot list the directory (no read
    // permission for them) or replace an entry (sticky; sealed root-owned after every job).
    if (geteuid() == 0 && !ev_.sandbox_user.empty()) chmod(KbBuildCache().c_str(), 01733);
  }
  if (!opt_.scratch_dir.empty()) HTAM_RETURN_IF_ERROR(MakeDirs(opt_.scratch_dir, 0755));
  if (!ev_.device_lock_dir.empty()) {
    // Shared by every evaluation of the host, whoever made it and whatever user its workers run
    // as: sticky and world-writable, like /tmp (each holder's files stay its own).
    HTAM_RETURN_IF_ERROR(MakeSharedDir(ev_.device_lock_dir).WithContext("eval.device_lock_dir"));
  }
  return Status::OK();
}

// eval.host_memory_limit_mb: the memory cgroup parent the workers' cgroups go under, or a note.
Status EvaluatorImpl::FindMemoryCgroup() {
  if (ev_.host_memory_limit_mb > 0 && ev_.memory_cgroup != "off") {
    if (ev_.memory_cgroup != "auto")
      return Status::InvalidArgument("eval.memory_cgroup must be auto or off, not " +
                                     std::string(ev_.memory_cgroup));
    auto parent = FindMemoryCgroupParent();
    if (parent.ok()) {
      cgroup_parent_ = *parent;
      HTAM_LOG(kInfo, "eval") << "workers' host memory: " << ev_.host_memory_limit_mb
                              << " MiB each (memory cgroups under " << parent->dir << ")";
    } else {
      notes_.push_back("memory cgroup not available here (" + parent.status().message() +
                       "): GPU workers' host memory is bounded only by the host");
      HTAM_LOG(kWarn, "eval") << notes_.back();
    }
  }
  return Status::OK();
}

// As root with eval.sandbox_user: whether that user can reach every file a worker needs; if not,
// workers keep this process's user (a note says so).
void EvaluatorImpl::CheckSandboxUserReach(const std::map<std::string, std::string>& plugins) {
  const std::string sandbox_user = ev_.sandbox_user;
  if (geteuid() == 0 && !sandbox_user.empty()) {
    std::vector<std::string> needed{worker_path_, sdk_include_, opt_.cache_dir, opt_.scratch_dir,
                                    ShippedPath("", "tasks")};
    for (const auto& [name, path] : plugins) needed.push_back(path);
    std::string blocked;
    if (!UserCanReach(sandbox_user, needed, &blocked)) {
      drop_user_ = false;
      notes_.push_back("eval.sandbox_user " + sandbox_user + " cannot read " + blocked +
                       " (a parent directory is private); workers keep this process's user, the "
                       "other sandbox layers stay. Move the checkout or data directory under a "
                       "directory others can search to get the user drop back");
      HTAM_LOG(kWarn, "eval") << notes_.back();
    }
  }
}

// Probes the plugin `name` at `path` in a sandboxed worker (a broken plugin cannot take htamd
// down) and adds a slot per device lane when it can run here; else a note.
Status EvaluatorImpl::AddBackend(const std::string& name, const std::string& path) {
  Slot probe;
  auto w = WorkerProcess::Spawn(WorkerArgs(probe, true, path, name), SandboxFor(name));
  if (!w.ok()) return w.status();
  auto deadline = Clock::now() + std::chrono::seconds(ev_.worker_start_timeout_s);
  auto frame = (*w)->Receive(deadline, 8192, 1 << 20);
  if (!frame.ok() || (*frame)["type"] != "describe") {
    std::string why = frame.ok() ? frame->value("message", std::string("bad reply"))
                                 : frame.status().ToString() + " " + Tail((*w)->output(), 500);
    notes_.push_back("plugin " + name + " (" + path + ") not usable: " + why);
    HTAM_LOG(kWarn, "eval") << notes_.back();
    return Status::OK();
  }
  Plugin p;
  p.name = name;
  p.path = path;
  p.language = frame->value("language", "");
  p.version = frame->value("version", "");
  p.notes = frame->value("notes", "");
  p.can_run = frame->value("can_run", false);
  p.devices = (*frame)["devices"];
  plugins_.push_back(p);
  if (!p.can_run) {
    // Plugins say why in their notes, mostly as "runtime path cannot run here: ..."; the
    // phrase is added only where they do not.
    const bool says_why = p.notes.find("cannot run here") != std::string::npos;
    notes_.push_back("backend " + name + ": " +
                     (says_why ? p.notes : "runtime path cannot run here: " + p.notes));
    HTAM_LOG(kInfo, "eval") << notes_.back();
    return Status::OK();
  }
  // eval.device_workers lanes per device: each a worker (and runner) of its own; their
  // verification overlaps on the device, their timed phases take turns (gate.h device_index).
  const int lanes = int(std::max<int64_t>(1, ev_.device_workers));
  for (const auto& d : p.devices) {
    for (int lane = 0; lane < lanes; ++lane) {
      auto s = std::make_unique<Slot>();
      s->backend = name;
      s->plugin = path;
      s->language = p.language;
      s->device = d.value("index", 0);
      s->info.backend = name;
      s->info.arch = d.value("arch", "");
      s->info.name = d.value("name", "");
      s->info.memory_bytes = d.value("memory_bytes", uint64_t(0));
      s->info.worker = "local:" + name + ":" + std::to_string(s->device) +
                       (lane ? "/lane" + std::to_string(lane) : "");
      slots_.push_back(std::move(s));
    }
  }
  HTAM_LOG(kInfo, "eval") << "backend " << name << " (" << p.version << "): " << p.devices.size()
                          << " device(s)";
  return Status::OK();
}

// The compile-ahead pool, when a backend compiles ahead and there is a cache; off with a note when
// it cannot start.
void EvaluatorImpl::StartCompileAhead() {
  bool any_ahead = false;
  for (const auto& s : slots_) any_ahead = any_ahead || AheadBackend(s->backend);
  if (any_ahead && !opt_.cache_dir.empty()) {
    CompileAheadOptions co;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    co.threads = ev_.compile_ahead_threads > 0 ? int(ev_.compile_ahead_threads) : int(cores);
    co.cache_dir = opt_.cache_dir + "/ahead";
    co.stage_dir = opt_.cache_dir + "/ahead-stage";
    co.verifier_cache_dir = opt_.cache_dir;
    co.compile_timeout_s = double(ev_.compile_timeout_s);
    co.start_timeout_s = int(ev_.worker_start_timeout_s);
    if (geteuid() == 0 && drop_user_ && !ev_.sandbox_user.empty())
      if (struct passwd* pw = getpwnam(ev_.sandbox_user.c_str())) {
        co.stage_uid = pw->pw_uid;
        co.stage_gid = pw->pw_gid;
      }
    ahead_ = std::make_unique<CompileAhead>(
        co,
        [this](const std::string& b, const std::string& stage) {
          return CompileOnlyArgs(b, stage);
        },
        [this](const std::string& b) { return SandboxFor(b); },
        [this](const std::string& b) { return ReferenceCompileArgs(b); });
    if (Status st = ahead_->Start(); !st.ok()) {
      notes_.push_back("compiling ahead is off: " + st.ToString());
      HTAM_LOG(kWarn, "eval") << notes_.back();
      ahead_.reset();
    }
  }
}

std::string EvaluatorImpl::KbBuildCache() const {
  std::string d = ev_.kernelbench_build_cache;
  if (d.empty() && !opt_.cache_dir.empty()) d = opt_.cache_dir + "/kernelbench-build";
  return d.empty() ? d : MakeAbsolute(d);
}

Result<std::unique_ptr<WorkerProcess>> EvaluatorImpl::StartWorker(Slot* s, bool kb) {
  HTAM_ASSIGN_OR_RETURN(auto w,
                        WorkerProcess::Spawn(WorkerArgs(*s, false, s->plugin, s->backend, kb),
                                             SandboxFor(s->backend, kb)));
  s->worker_kb = kb;
  auto deadline = Clock::now() + std::chrono::seconds(ev_.worker_start_timeout_s);
  auto hello = w->Receive(deadline, 8192, 1 << 20);
  if (!hello.ok() || (*hello)["type"] != "hello") {
    std::string why = hello.ok() ? hello->value("message", std::string("unexpected frame"))
                                 : hello.status().ToString();
    return Status::Unavailable("worker for " + s->info.worker + " did not start: " + why + " " +
                               Tail(w->output(), 500));
  }
  if (s->sandbox.is_null()) {
    s->sandbox = (*hello)["sandbox"];
    if (ev_.sandbox_network && !s->sandbox.value("network_isolated", false)) {
      HTAM_LOG(kWarn, "eval") << "network isolation not permitted on this host; workers of "
                              << s->backend << " keep the host network (fallback)";
    }
  }
  w->ClearOutput();
  return w;
}

void EvaluatorImpl::SlotLoop(Slot* s) {
  for (;;) {
    if (!s->worker) {
      auto t0 = Clock::now();
      auto w = StartWorker(s);
      if (w.ok()) {
        s->worker = std::move(*w);
        if (s->jobs > 0) {
          ++s->restarts;
          s->last_restart_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        }
      } else {
        HTAM_LOG(kWarn, "eval") << w.status().ToString();
      }
    }
    Pending p;
    bool have = false, stop = false;
    {
      MutexLock lock(&mu_);
      // cv_.wait_for with a predicate, written as a loop the analysis can follow: after the
      // timeout the condition is checked once more.
      const auto until = Clock::now() + std::chrono::seconds(s->worker ? 3600 : 2);
      while (!stopping_ && !(have = TakeJob(*s, &p))) {
        if (!cv_.WaitUntil(&mu_, until)) {
          if (!stopping_) have = TakeJob(*s, &p);
          break;
        }
      }
      stop = stopping_;
    }
    if (stop) break;
    if (!have) continue;
    s->busy = true;
    auto t0 = Clock::now();
    EvalResult r = RunJob(s, p.job);
    if (r.retry_alone && !p.job.kernelbench_alone) r = RunAlone(s, p.job, r);
    r.retry_alone = false;  // the worker frame's, answered here
    r.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    s->busy = false;
    ++s->jobs;
    Count(r.status);
    if (p.done) p.done(std::move(r));
  }
  s->worker.reset();
}

bool EvaluatorImpl::TakeJob(const Slot& s, Pending* p) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->job.backend == s.backend && (it->job.arch.empty() || it->job.arch == s.info.arch)) {
      *p = std::move(*it);
      queue_.erase(it);
      return true;
    }
  }
  return false;
}

std::unique_ptr<fb::GateSpecT> EvaluatorImpl::GateSpec() const {
  auto g = std::make_unique<fb::GateSpecT>(GateSpecFromConfig(ev_));
  g->kernelbench_build_cache = KbBuildCache();
  return g;
}

// What the worker needs to profile an Ok candidate with its plugin's profiler (backend.h, API
// 1.3; the evaluator knows none by name): the configured binary (eval.ncu, made absolute; "" = the
// plugin finds its own), where to look for it (this process's PATH: a sandboxed worker's is
// short), the run's wall limit and the thresholds of the bottleneck classes.
std::unique_ptr<fb::ProfileRequestT> EvaluatorImpl::ProfileRequest() const {
  const char* path = getenv("PATH");
  auto p = std::make_unique<fb::ProfileRequestT>();
  p->tool = ev_.ncu.empty() ? std::string() : MakeAbsolute(ev_.ncu);
  p->search_path = path ? path : "";
  p->timeout_s = double(ev_.cuda_profile_timeout_s);
  p->memory_pct = double(ev_.cuda_profile_memory_pct);
  p->compute_pct = double(ev_.cuda_profile_compute_pct);
  p->launch_us = double(ev_.cuda_profile_launch_us);
  return p;
}

EvalResult EvaluatorImpl::RunAlone(Slot* s, const EvalJob& job, const EvalResult& first) {
  // Its worker and runner ended with the crash; the next RunJob starts a fresh pair.
  if (job.on_stage)
    job.on_stage(job.job_id, "running",
                 "out of device memory beside other jobs; again with the memory to itself");
  EvalJob again = job;
  again.kernelbench_alone = true;
  EvalResult r = RunJob(s, again);
  r.diagnostics += fb::EvaluatedTwiceNote(fb::kOutOfMemoryInCandidate, first.diagnostics);
  return r;
}

EvalResult EvaluatorImpl::RunJob(Slot* s, const EvalJob& job) {
  EvalResult r;
  r.job_id = job.job_id;
  r.device = s->info.name;
  r.arch = s->info.arch;
  const bool kb = job.language == "kernelbench";
  // The one hash of the source: htamd's when it gave one, else made here; the worker frame
  // carries it to the gate, which does not hash again.
  r.candidate_hash = !job.candidate_hash.empty()
                         ? job.candidate_hash
                         : CandidateKey(kb ? job.language : s->language, job.source);
  const bool ahead = CompiledAhead(job);
  if (ahead) ahead_->Claim(job.job_id);
  // A ModelNew job on a backend whose candidates run in the verifier: a worker with a runner.
  if (Status st = EnsureWorker(s, kb && ev_.runner && !RunnerBackend(s->backend)); !st.ok()) {
    r.status = fb::OutcomeStatus::InfraError;
    r.diagnostics = st.message();
    return r;
  }
  if (job.on_stage) job.on_stage(job.job_id, "running", "on " + s->info.name);
  const uint64_t ooms_before = s->worker->cgroup() ? s->worker->cgroup()->OomKills() : 0;
  const Status sent = SendJob(s, WorkerFrame(job, r.candidate_hash));
  if (!sent.ok()) {
    r.status = fb::OutcomeStatus::InfraError;
    r.diagnostics = "cannot send the job to the worker: " + sent.message();
    s->worker.reset();
    return r;
  }
  WorkerProcess* w = s->worker.get();
  std::string stage = "start";
  bool keep_worker = AwaitAnswer(w, job, ahead, &r, &stage);
  // The kernel killed a process of the worker's memory cgroup (the runner, or the worker itself,
  // whichever used most): the candidate went over eval.host_memory_limit_mb, whatever the worker
  // could tell of it.
  if (r.status != fb::OutcomeStatus::Ok && w->cgroup() && w->cgroup()->OomKills() > ooms_before) {
    r.status = fb::OutcomeStatus::ResourceLimit;
    r.diagnostics = "host memory limit of " + std::to_string(w->cgroup()->limit_bytes() >> 20) +
                    " MiB exceeded (memory cgroup) during " + stage + "; " + r.diagnostics;
    keep_worker = false;
  }
  if (!w->output().empty() && r.status != fb::OutcomeStatus::Ok)
    r.diagnostics += "\n--- worker output ---\n" + Tail(w->output(), 2048);
  if (!keep_worker) {
    w->Reap(std::chrono::milliseconds(200));
    s->worker.reset();  // kills the group, removes the temp dir
  } else {
    w->ClearOutput();
  }
  SealCacheEntries();
  return r;
}

Status EvaluatorImpl::EnsureWorker(Slot* s, bool kb_worker) {
  if (kb_worker && s->worker && !s->worker_kb) s->worker.reset();
  if (s->worker) return Status::OK();
  auto w = StartWorker(s, kb_worker);
  if (!w.ok()) return w.status();
  s->worker = std::move(*w);
  return Status::OK();
}

std::string EvaluatorImpl::WorkerFrame(const EvalJob& job,
                                       const std::string& candidate_hash) const {
  fb::JobSpecT spec = job;  // the job as the worker frame carries it, with the frame's fields
  spec.task_dir = MakeAbsolute(job.task_dir);
  spec.candidate_hash = job.source.empty() ? std::string() : candidate_hash;
  spec.context.clear();  // the daemon's, not the worker's
  spec.reference_only = job.source.empty();
  spec.max_case_bytes = uint64_t(ev_.max_case_mb) << 20;
  spec.gate = GateSpec();
  spec.gate->kernelbench_alone = job.kernelbench_alone;
  if (job.profile) spec.profile_request = ProfileRequest();
  return PackJob(spec);
}

Status EvaluatorImpl::SendJob(Slot* s, const std::string& frame) {
  Status sent = s->worker->SendBuffer(frame);
  if (sent.ok()) return sent;
  // The idle worker died (killed from outside?): one fresh worker, one more try.
  s->worker.reset();
  auto fresh = StartWorker(s);
  if (!fresh.ok()) return sent;
  s->worker = std::move(*fresh);
  return s->worker->SendBuffer(frame);
}

std::chrono::seconds EvaluatorImpl::StageLimit(const std::string& stage) const {
  // The profile stage (after the gate, when asked) has its own wall limit, enforced by the worker
  // on the profiler (eval.cuda_profile_timeout_s); the evaluator allows that much beyond the
  // job's limit.
  return std::chrono::seconds(
      stage.rfind("compile kernelbench", 0) == 0 ? ev_.kernelbench_compile_timeout_s + 10
      : stage.rfind("compile", 0) == 0           ? ev_.compile_timeout_s + 10
      : stage.rfind("profile", 0) == 0           ? ev_.cuda_profile_timeout_s + 10
      // KernelBench golden data: PyTorch's first run on a device takes its time
      : stage.rfind("golden", 0) == 0 ? ev_.kernelbench_timeout_s + 10
                                      : ev_.case_timeout_s);
}

std::string EvaluatorImpl::TimeoutMessage(const std::string& stage, double waited_s) const {
  return "timed out during " + stage + " (limit " +
         std::to_string(stage.rfind("compile kernelbench", 0) == 0
                            ? ev_.kernelbench_compile_timeout_s
                        : stage.rfind("compile", 0) == 0 ? ev_.compile_timeout_s
                        : stage.rfind("profile", 0) == 0 ? ev_.cuda_profile_timeout_s
                                                         : ev_.case_timeout_s) +
         " s per stage, " + std::to_string(ev_.job_timeout_s) + " s per job" +
         (waited_s >= 0 ? ", of its own work: " + std::to_string(int(waited_s + 0.5)) +
                              " s of waiting not counted"
                        : std::string()) +
         "); the worker was killed";
}

bool EvaluatorImpl::AwaitAnswer(WorkerProcess* w, const EvalJob& job, bool ahead, EvalResult* r,
                                std::string* stage) {
  const size_t capture = size_t(ev_.capture_kb) << 10;
  const size_t flood = size_t(ev_.max_output_kb) << 10;
  const bool kb = job.language == "kernelbench";
  // Limits count the job's own work: wall time less its waits for a busy CPU and the waits its
  // worker declares (work_clock.h), never past limit * eval.limit_wall_factor of wall time.
  WorkClock work(w->pid());
  const double wall_factor = ev_.load_independent_limits ? double(ev_.limit_wall_factor) : 1.0;
  const Clock::time_point job_start = Clock::now();
  auto job_limit =
      std::chrono::seconds(ev_.job_timeout_s + (kb ? ev_.kernelbench_compile_timeout_s : 0));
  Clock::time_point stage_start = job_start;
  std::chrono::seconds stage_secs = StageLimit("compile");
  double stage_excluded = 0;
  Clock::time_point stage_deadline, job_deadline;
  auto update_deadlines = [&] {
    if (ev_.load_independent_limits) work.Sample();
    stage_deadline = work.Deadline(stage_start, stage_secs, stage_excluded, wall_factor);
    job_deadline = work.Deadline(job_start, job_limit, 0, wall_factor);
  };
  update_deadlines();
  bool keep_worker = false;
  for (bool finished = false; !finished;) {
    {
      MutexLock lock(&mu_);
      if (stopping_) {
        r->status = fb::OutcomeStatus::InfraError;
        r->diagnostics = "evaluator shutting down";
        break;
      }
    }
    update_deadlines();
    auto deadline =
        std::min({stage_deadline, job_deadline, Clock::now() + std::chrono::milliseconds(250)});
    auto f = w->Receive(deadline, capture, flood);
    if (f.ok()) {
      const std::string type = f->value("type", "");
      if (type == "progress") {
        // A declared wait (a device turn, a lock): excluded from the limits while it lasts.
        if (f->value("waiting", false)) {
          if (ev_.load_independent_limits) work.BeginWait();
          continue;
        }
        work.EndWait();
        const std::string next = f->value("stage", "");
        // The task's own size: a stage whose reference takes long gets the time it needs
        // (kb_candidate.cc says how much), up to the golden run's limit.
        const double asked = f->value("limit_s", 0.0);
        if (next == *stage && asked > double(stage_secs.count())) {
          stage_secs = std::chrono::seconds(
              int64_t(std::min(asked, double(std::max<int64_t>(ev_.kernelbench_timeout_s,
                                                               ev_.case_timeout_s)))));
          const auto need = std::chrono::duration_cast<std::chrono::seconds>(
                                stage_start - job_start) + stage_secs + std::chrono::seconds(30);
          job_limit = std::max(job_limit, need);
        }
        if (next != *stage || !f->contains("resumed")) {
          *stage = next;
          stage_start = Clock::now();
          stage_secs = StageLimit(*stage);
          stage_excluded = work.ExcludedSeconds();
        }
        if (job.on_stage) job.on_stage(job.job_id, *stage, "");
        if (job.profile && stage->rfind("profile", 0) == 0) {
          const auto since_start =
              std::chrono::duration_cast<std::chrono::seconds>(stage_start - job_start);
          job_limit = std::max(job_limit, since_start + stage_secs);
        }
      } else if (type == "result") {
        keep_worker = TakeResult(w, job, ahead, *f, r);
        finished = true;
      } else if (type == "fatal") {
        r->status = StatusFromName(f->value("status", "InfraError"));
        r->diagnostics = f->value("message", "") + " (during " + *stage + ")";
        finished = true;
      }
      continue;
    }
    const Status& e = f.status();
    if (e.code() == Status::Code::kTimeout) {
      update_deadlines();
      if (Clock::now() < std::min(stage_deadline, job_deadline)) continue;  // poll tick
      w->Kill();
      r->status = fb::OutcomeStatus::Timeout;
      r->diagnostics = TimeoutMessage(
          *stage, ev_.load_independent_limits ? work.ExcludedSeconds() : -1.0);
    } else if (e.code() == Status::Code::kResourceExhausted) {
      w->Kill();
      r->status = fb::OutcomeStatus::ResourceLimit;
      r->diagnostics = "output flood: more than " + std::to_string(flood >> 10) +
                       " KiB written to stdout/stderr during " + *stage +
                       "; the worker was killed";
    } else {
      // The worker died (or broke the protocol): classify by how it ended.
      int st = e.IsNotFound() ? w->Reap(std::chrono::milliseconds(500)) : w->Kill();
      ProcessEnd end = ClassifyProcessEnd(st, "the worker", " during " + *stage);
      r->status = end.status;
      r->diagnostics = std::move(end.message);
    }
    finished = true;
  }
  return keep_worker;
}

bool EvaluatorImpl::TakeResult(WorkerProcess* w, const EvalJob& job, bool ahead,
                               const json& frame, EvalResult* r) {
  auto spec = UnpackResult(FrameBuffer(frame), "the worker's result");
  if (!spec.ok()) {
    // A worker that answers garbage broke the protocol: it goes, the job is InfraError.
    w->Kill();
    r->status = fb::OutcomeStatus::InfraError;
    r->diagnostics = spec.status().message();
    return false;
  }
  // Everything the worker measured; the job id, device, arch and wall time are the evaluator's to
  // say, the hash the worker's when it gives one (a KernelBench candidate's is of what it built).
  EvalResult got = std::move(*spec);
  got.job_id = r->job_id;
  got.device = std::move(r->device);
  got.arch = std::move(r->arch);
  got.wall_ms = r->wall_ms;
  if (got.candidate_hash.empty()) got.candidate_hash = std::move(r->candidate_hash);
  *r = std::move(got);
  if (ahead && r->compile_cached) ahead_->CountHit();
  // A worker whose runner ran a candidate that crashed, timed out, failed an integrity check or
  // did not load ends after answering (verifier/eval_worker_main.cc, GateResult::runner_clean);
  // one whose candidate only computed wrong values serves on. A worker whose runner retired
  // (device memory left allocated) ends too.
  return JobsPerWorker(job.backend) > 1 && !r->runner_retired &&
         (r->status == fb::OutcomeStatus::Ok || r->runner_clean ||
          !(ev_.runner && RunnerBackend(job.backend)));
}

void EvaluatorImpl::SealCacheEntries() const {
  // Compile-cache entries written by the unprivileged worker and its runner become root's and
  // read-only.
  if (geteuid() != 0 || opt_.cache_dir.empty()) return;
  for (const std::string& dir : {opt_.cache_dir, opt_.cache_dir + "/runner", KbBuildCache()}) {
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::string p = dir + "/" + e->d_name;
        struct stat st;
        if (lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid != 0) {
          if (chown(p.c_str(), 0, 0) == 0) chmod(p.c_str(), 0444);
        }
      }
      closedir(d);
    }
  }
}

void EvaluatorImpl::Count(fb::OutcomeStatus st) {
  MutexLock lock(&mu_);
  ++done_;
  ++by_status_[fb::EnumNameOutcomeStatus(st)];
}

Status EvaluatorImpl::Submit(EvalJob job, std::function<void(EvalResult)> done) {
  bool served = false;
  std::string language;
  for (const auto& s : slots_) {
    if (s->backend == job.backend && (job.arch.empty() || job.arch == s->info.arch)) {
      served = true;
      language = s->language;
    }
  }
  if (!served)
    return Status::Unavailable("no worker serves backend '" + job.backend + "'" +
                               (job.arch.empty() ? "" : " arch '" + job.arch + "'"));
  // The plugin's own language decides. Behind htamd's scheduler this check already ran at the
  // daemon's Submit with this same language (BackendLanguage), so it refuses nothing new there;
  // it stays for the evaluator's own callers (htam-eval, a remote htam-worker), which have no
  // scheduler in front.
  if (job.language == "kernelbench") {
    HTAM_RETURN_IF_ERROR(CheckKernelBenchJob(job));
  } else {
    HTAM_RETURN_IF_ERROR(CheckLanguage(job.backend, language, job.language));
  }
  if (!IsFile(job.task_dir + "/task.json"))
    return Status::InvalidArgument("no task.json in " + job.task_dir);
  const bool ahead = CompiledAhead(job);
  const uint64_t id = job.job_id;
  const std::string backend = job.backend, arch = job.arch, task_dir = MakeAbsolute(job.task_dir);
  std::string source = ahead ? job.source : std::string();
  {
    MutexLock lock(&mu_);
    if (stopping_) return Status::Unavailable("evaluator is shutting down");
    if (queue_.size() >= size_t(ev_.queue_depth))
      return Status::ResourceExhausted("evaluation queue full (" + std::to_string(queue_.size()) +
                                       " jobs); try later");
    // Entered before the job can reach a device, so that its Claim finds it.
    if (ahead) {
      ahead_->EnqueueReference(task_dir, backend, arch);
      ahead_->Enqueue(id, backend, arch, source);
    }
    queue_.push_back({std::move(job), std::move(done)});
    ++submitted_;
    cv_.SignalAll();
  }
  return Status::OK();
}

Result<EvalResult> EvaluatorImpl::Evaluate(EvalJob job) {
  auto promise = std::make_shared<std::promise<EvalResult>>();
  auto fut = promise->get_future();
  HTAM_RETURN_IF_ERROR(
      Submit(std::move(job), [promise](EvalResult r) { promise->set_value(std::move(r)); }));
  return fut.get();
}

std::vector<fb::DeviceInfoT> EvaluatorImpl::Devices() {
  std::vector<fb::DeviceInfoT> out;
  for (const auto& s : slots_) out.push_back(s->info);
  return out;
}

std::string EvaluatorImpl::BackendLanguage(const std::string& backend) {
  for (const auto& s : slots_)
    if (s->backend == backend) return s->language;
  return "";
}

std::vector<std::string> EvaluatorImpl::Backends() {
  std::vector<std::string> out;
  for (const auto& s : slots_)
    if (std::find(out.begin(), out.end(), s->backend) == out.end()) out.push_back(s->backend);
  return out;
}

std::string EvaluatorImpl::StatusText() {
  std::ostringstream o;
  MutexLock lock(&mu_);
  o << "# evaluation\n";
  std::string b;
  for (const auto& name : [&] {
         std::vector<std::string> v;
         for (const auto& s : slots_)
           if (std::find(v.begin(), v.end(), s->backend) == v.end()) v.push_back(s->backend);
         return v;
       }())
    b += (b.empty() ? "" : ",") + name;
  o << "backends: " << b << "\n";
  o << "devices: " << slots_.size() << "\n";
  o << "queue_length: " << queue_.size() << "\n";
  o << "queue_capacity: " << ev_.queue_depth << "\n";
  o << "jobs_submitted: " << submitted_ << "\n";
  o << "jobs_done: " << done_ << "\n";
  for (const auto& [k, v] : by_status_) o << "jobs_" << k << ": " << v << "\n";
  uint64_t restarts = 0;
  double last = 0;
  for (const auto& s : slots_) {
    restarts += s->restarts;
    last = std::max(last, s->last_restart_ms);
  }
  o << "worker_restarts: " << restarts << "\n";
  o << "last_worker_restart_ms: " << last << "\n";
  for (size_t i = 0; i < slots_.size(); ++i) {
    const auto& s = *slots_[i];
    o << "worker" << i << ": backend=" << s.backend << " arch=" << s.info.arch << " device=\""
      << s.info.name << "\" state=" << (s.busy ? "busy" : "idle") << " jobs=" << s.jobs
      << " restarts=" << s.restarts;
    if (s.sandbox.is_object())
      o << " network_isolated=" << (s.sandbox.value("network_isolated", false) ? "yes" : "no")
        << " readonly_root=" << (s.sandbox.value("readonly_root", false) ? "yes" : "no")
        << " uid=" << s.sandbox.value("uid", -1)
        << " nproc_limit=" << s.sandbox.value("nproc_limit", uint64_t(0))
        << " memory_limit=" << s.sandbox.value("memory_limit", uint64_t(0))
        << " runner=" << (s.sandbox.value("runner", std::string("off")) == "on" ? "on" : "off")
        << " runner_files_hidden=" << (s.sandbox.value("runner_files_hidden", false) ? "yes" : "no")
        << " runner_seccomp=" << (s.sandbox.value("runner_seccomp", false) ? "yes" : "no");
    o << "\n";
  }
  o << (ahead_ ? ahead_->StatusText() : std::string("compile_ahead: off\n"));
  for (const auto& n : notes_) o << "note: " << n << "\n";
  return o.str();
}

void EvaluatorImpl::Shutdown() {
  std::deque<Pending> dropped;
  {
    MutexLock lock(&mu_);
    if (stopping_ && queue_.empty()) {
      // already stopped; threads joined below are idempotent
    }
    stopping_ = true;
    dropped.swap(queue_);
    cv_.SignalAll();
  }
  if (ahead_) ahead_->Stop();
  for (auto& p : dropped) {
    EvalResult r;
    r.job_id = p.job.job_id;
    r.status = fb::OutcomeStatus::InfraError;
    r.diagnostics = "evaluator shut down before the job ran";
    if (p.done) p.done(std::move(r));
  }
  for (auto& s : slots_)
    if (s->thread.joinable()) s->thread.join();
}

Result<std::unique_ptr<Evaluator>> Evaluator::Start(const EvalOptions& options) {
  auto e = std::make_unique<EvaluatorImpl>(options);
  HTAM_RETURN_IF_ERROR(e->Init());
  return std::unique_ptr<Evaluator>(std::move(e));
}

fb::GateSpecT GateSpecFromConfig(const config::Eval& e) {
  uint64_t seed = uint64_t(e.seed);
  if (seed == 0) {
    std::random_device rd;
    seed = (uint64_t(rd()) << 32) ^ rd();
  }
  fb::GateSpecT g;
  g.seeds = int32_t(e.seeds);
  g.seed_base = seed;
  g.guard_bytes = uint64_t(e.guard_bytes);
  g.check_threads = e.check_threads;
  g.thread_grace_ms = double(e.thread_grace_ms);
  g.warmup_reps = int32_t(e.warmup_reps);
  g.warmup_ms = double(e.warmup_ms);
  g.repetitions = int32_t(e.repetitions);
  g.input_sets = int32_t(e.input_sets);
  g.flush_bytes = uint64_t(e.flush_bytes);
  g.flush_max_bytes = uint64_t(e.flush_max_mb) << 20;
  g.compile_timeout_s = double(e.compile_timeout_s);
  g.time_baseline = e.time_baseline;
  g.golden_python = e.kernelbench_python;
  g.golden_helper = e.kernelbench_helper;
  if (const char* env = getenv("HTAM_KERNELBENCH_HELPER"); g.golden_helper.empty() && env && *env)
    g.golden_helper = env;
  g.golden_timeout_s = double(e.kernelbench_timeout_s);
  g.golden_seed_pool = int32_t(e.kernelbench_seed_pool);
  g.timing_lock_wait_s = double(e.timing_lock_wait_s);
  g.device_lock_dir = e.device_lock_dir;
  g.device_data = e.device_data;
  g.baseline_reuse_s = double(e.baseline_reuse_s);
  g.buffer_pool_bytes = uint64_t(std::max<int64_t>(0, e.buffer_pool_mb)) << 20;
  g.kernelbench_fast_path = e.kernelbench_fast_path;
  g.kernelbench_nvcc = e.kernelbench_nvcc;
  g.kernelbench_compile_timeout_s = double(e.kernelbench_compile_timeout_s);
  g.kernelbench_call_timeout_s = double(e.case_timeout_s);
  g.kernelbench_memory_headroom = e.kernelbench_memory_headroom;
  g.kernelbench_s_per_gib = e.kernelbench_s_per_gib;
  g.kernelbench_memory_share = e.kernelbench_memory_share;
  g.device_memory_wait_s = double(e.device_memory_wait_s);
  g.kernelbench_cache_bytes = uint64_t(std::max<int64_t>(0, e.kernelbench_cache_mb)) << 20;
  g.kernelbench_warmup_ms = double(e.kernelbench_warmup_ms);
  g.kernelbench_min_timed_ms = double(e.kernelbench_min_timed_ms);
  return g;
}

}  // namespace htam::eval
