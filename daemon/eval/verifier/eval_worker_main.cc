// htam-eval-worker: the sandboxed evaluation process. Loads one backend plugin, opens one device,
// and evaluates jobs sent by the Evaluator over fd 3 (frames, frame.h: a job is a schema/job.fbs
// JobSpec, its result a JobResult, a compile-only request too; the control messages hello,
// describe, progress and fatal are JSON) with the shared
// verification gate (daemon/eval/gate/gate.h). Candidate code runs only here, never in htamd.
//
//   htam-eval-worker --plugin PATH --device N [--describe] [--sdk-include DIR] [--cache-dir DIR]
//                    [--option key=value]... [--jobs K] [--single-call JOBFILE]
//   htam-eval-worker ... --split --compile-only --runner-cache-dir STAGE --hide DIR...
//   htam-eval-worker ... --compile-only --cache-dir DIR        (a task's reference)
//
// Compile-only (compiling ahead, evaluator.cc): the worker opens no device; its runner (same
// hidden view, user and seccomp filter as a candidate's runner, no device either) compiles the
// source of one job frame (a JobSpec: source, arch, gate.compile_timeout_s and compile_options)
// with STAGE as its plugin's cache, and the worker answers one result frame (a JobResult: status
// Ok or CompileError/Timeout/Crash/InfraError, diagnostics, compile_ms, compile_cached) and exits.
// The daemon then moves the one entry from STAGE into the runners' read-only cache. Nothing of the
// candidate runs. Without --split the job is reference_only with the task's folder as task_dir:
// the worker compiles that task's reference itself into its --cache-dir, the verifiers' cache,
// where the task's first verification finds it.
//
// Frames out: describe | hello {device, sandbox} | progress {job_id, stage} | result (JobResult) |
// fatal {status, message} (e.g. memory limit reached). It exits after K jobs (default 1: every
// candidate gets a fresh process, so nothing a candidate leaves behind reaches the next one).
//
// Profile on request (a job with a profile_request: {tool, search_path, timeout_s, thresholds}),
// for a plugin that offers a profiler (backend.h, API 1.3: profile_command / profile_parse; the
// worker knows no profiler by name, daemon/eval/verifier/profile_run.h): once the gate's result is
// Ok, the worker asks its plugin for the command and runs ITSELF in its one-call mode under it,
//   <plugin's command, e.g. ncu --metrics ... --csv> htam-eval-worker --single-call JOBFILE
//       --plugin ... --device N ... [--option <the plugin's options for the profiled process>]
// where JOBFILE (in the worker's temp dir) is the job's JobSpec (task dir, source, gate options);
// that process compiles (a cache hit) and loads the candidate, makes its one call on the first
// seen shape (GateOptions::single_call) and prints one JSON line. The plugin reads what the run
// printed into the result's profile fractions and bottleneck class. This runs after the gate, so
// the gate's check for child processes during a call is not involved; a plugin without a
// profiler, a missing profiler or a failing run leaves the result Ok with a
// "profile unavailable: ..." line in its diagnostics.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "backends/common/plugin_host.h"
#include "base/args.h"
#include "base/file.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/wait_report.h"
#include "daemon/eval/frame.h"
#include "daemon/eval/gate/gate.h"
#include "daemon/eval/gate/task_spec.h"
#include "daemon/eval/gate/timing_lock.h"
#include "daemon/eval/job_codec.h"
#include "daemon/eval/kernelbench/kb_candidate.h"
#include "daemon/eval/kernelbench/kernelbench.h"
#include "daemon/eval/runner/exec.h"
#include "daemon/eval/runner/runner_spawn.h"
#include "daemon/eval/sandbox.h"
#include "daemon/eval/verifier/profile_run.h"

namespace {

using nlohmann::json;
constexpr int kFd = 3;
using htam::eval::kExitResourceLimit;

void OnOutOfMemory() {
  // Candidate or harness allocation failed under RLIMIT_AS: report the class, exit at once.
  static const char kMsg[] =
      "{\"type\":\"fatal\",\"status\":\"ResourceLimit\",\"message\":\"memory limit reached "
      "(allocation failed under the worker's address-space limit)\"}";
  unsigned char hdr[4] = {0, 0, 0, static_cast<unsigned char>(sizeof(kMsg) - 1)};
  ssize_t a = write(kFd, hdr, 4);
  ssize_t b = write(kFd, kMsg, sizeof(kMsg) - 1);
  (void)a;
  (void)b;
  _exit(kExitResourceLimit);
}

// The worker may be the init of a PID namespace, where a self-sent SIGABRT is ignored and
// abort() ends in a fault instead; report abort() as what it is.
void OnAbort(int) {
  static const char kMsg[] =
      "{\"type\":\"fatal\",\"status\":\"Crash\",\"message\":\"the worker died (SIGABRT: "
      "abort() called)\"}";
  unsigned char hdr[4] = {0, 0, 0, static_cast<unsigned char>(sizeof(kMsg) - 1)};
  ssize_t a = write(kFd, hdr, 4);
  ssize_t b = write(kFd, kMsg, sizeof(kMsg) - 1);
  (void)a;
  (void)b;
  _exit(128 + SIGABRT);
}

// The runner has no protocol socket: a failed allocation ends it with this code, which the
// verifier reports as the memory limit.
void RunnerOutOfMemory() {
  _exit(kExitResourceLimit);
}

bool NetworkIsolated() {
  // In a fresh network namespace only "lo" exists (and it is down).
  std::ifstream in("/proc/net/dev");
  std::string line;
  int ifaces = 0;
  while (std::getline(in, line))
    if (line.find(':') != std::string::npos) ++ifaces;
  return ifaces <= 1;
}

bool RootReadOnly() {
  struct statvfs v;
  return statvfs("/", &v) == 0 && (v.f_flag & ST_RDONLY);
}

json DescribeJson(const htam::BackendInstance& b) {
  const auto& d = b.description();
  json devs = json::array();
  for (int i = 0; i < d.num_devices; ++i) {
    const auto& x = d.devices[i];
    devs.push_back({{"index", x.index},
                    {"name", x.name ? x.name : ""},
                    {"arch", x.arch ? x.arch : ""},
                    {"memory_bytes", x.memory_bytes},
                    {"sm_clock_mhz", x.sm_clock_mhz},
                    {"mem_clock_mhz", x.mem_clock_mhz},
                    {"cache_bytes", x.cache_bytes}});
  }
  return {{"type", "describe"},
          {"name", d.name ? d.name : ""},
          {"language", d.language ? d.language : ""},
          {"version", d.version ? d.version : ""},
          {"notes", d.notes ? d.notes : ""},
          {"can_run", d.can_run != 0},
          {"devices", devs},
          {"api_major", b.api().major},
          {"api_minor", b.api().minor}};
}

template <typename T>
T Get(const json& j, const char* k, T def) {
  if (!j.contains(k)) return def;
  try {
    return j[k].get<T>();
  } catch (...) {
    return def;
  }
}

// The gate's options of a job (its GateSpec, arch and language), the same in the one-call mode.
htam::GateOptions GateOptionsFromJob(const htam::fb::JobSpecT& j, const htam::BackendInstance& b,
                                     int device) {
  htam::GateOptions o;
  if (j.gate) static_cast<htam::fb::GateSpecT&>(o) = *j.gate;
  o.arch = j.arch;
  o.language = j.language;
  o.candidate_hash = j.candidate_hash;  // the job's key: the source is not hashed again
  o.device_index = device;  // turns on the device with the other lanes (eval.device_workers)
  if (o.flush_bytes == 0 && device < b.description().num_devices) {
    // 2x the last-level cache, capped (some hosts report the sum of all slices)
    uint64_t llc = b.description().devices[device].cache_bytes;
    o.flush_bytes = std::min<uint64_t>(2 * llc, o.flush_max_bytes);
  }
  return o;
}

// Profiles an Ok result: this binary in its one-call mode under the plugin's profiler (see the
// file comment). `self_args` are the worker's own arguments (plugin, device, options) for the
// child. Fills r's bottleneck class (Unknown when the profile is unavailable), the profiler's note,
// the number of kernels it saw and their summed time.
void Profile(const htam::BackendInstance& b, const htam::fb::JobSpecT& job,
             const std::vector<std::string>& self_args, const std::string& work_dir,
             htam::GateResult* r) {
  auto add_note = [&](const std::string& note) {
    r->diagnostics += std::string(r->diagnostics.empty() ? "" : "\n") + note;
  };
  const htam::ProfileRequest& pr = *job.profile_request;
  auto command = htam::GetProfileCommand(b, pr);
  if (!command.ok()) {
    r->profile_note = command.status().message();
    add_note(command.status().message());
    return;
  }
  std::string job_file = work_dir + "/profile-job.htjb";
  {
    // The same job (its JobSpec), without the request: the one-call run profiles nothing itself.
    htam::fb::JobSpecT one = job;
    one.profile_request.reset();
    std::ofstream out(job_file, std::ios::binary | std::ios::trunc);
    out << htam::eval::PackJob(one);
    if (!out) {
      r->profile_note = "profile unavailable: cannot write " + job_file;
      add_note("profile unavailable: cannot write " + job_file);
      return;
    }
  }
  const std::string exe = htam::ExecutablePath();
  std::vector<std::string> argv = {exe.empty() ? "htam-eval-worker" : exe, "--single-call",
                                   job_file};
  argv.insert(argv.end(), self_args.begin(), self_args.end());
  // The plugin's options for the profiled process come last: they win over the worker's own.
  for (const auto& o : command->child_options) argv.insert(argv.end(), {"--option", o});
  htam::ProfileOutcome p = htam::RunProfile(b, *command, argv, work_dir, pr);
  std::remove(job_file.c_str());
  std::string note = p.note;
  r->profile_note = p.note;
  r->profiled_kernels = p.kernels;
  r->profiled_us = p.total_us;
  if (p.available) {
    auto frac = [](double pct) { return pct < 0 ? -1.0f : float(pct / 100.0); };
    htam::fb::ProfileT& profile = htam::fb::MutableProfile(r);
    profile.dram_throughput = frac(p.dram_pct);
    profile.sm_throughput = frac(p.sm_pct);
    profile.occupancy = frac(p.occupancy_pct);
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " (dram %.0f%%, sm %.0f%%, occupancy %.0f%% of peak; %d kernel%s)", p.dram_pct,
                  p.sm_pct, p.occupancy_pct, p.kernels, p.kernels == 1 ? "" : "s");
    note += buf;
  }
  add_note(note);
  r->bottleneck = p.available ? p.bottleneck : htam::fb::Bottleneck::Unknown;
}

// --single-call JOBFILE (a JobSpec): the run the profiler watches. One JSON line on stdout; exit 0
// when the call ran.
int SingleCall(const std::string& job_file, htam::BackendInstance& b, htam_device* dev,
               int device) {
  std::string bytes;
  auto parsed = htam::ReadWholeFile(job_file, &bytes)
                    ? htam::eval::UnpackJob(bytes, "job file " + job_file)
                    : htam::Result<htam::fb::JobSpecT>(
                          htam::Status::IOError("cannot read job file " + job_file));
  if (!parsed.ok()) {
    std::cout << json{{"status", "InfraError"}, {"diagnostics", parsed.status().message()}}.dump()
              << std::endl;
    return 2;
  }
  const htam::fb::JobSpecT& j = *parsed;
  htam::GateResult r;
  auto task = htam::ParseTaskFile(j.task_dir, j.max_case_bytes);
  if (!task.ok()) {
    r.diagnostics = task.status().message();
  } else {
    htam::GateOptions o = GateOptionsFromJob(j, b, device);
    o.single_call = true;
    htam::Gate gate(&b, dev, *task, o);
    r = j.reference_only ? gate.EvaluateReference({}) : gate.Evaluate(j.source, {});
  }
  std::cout << json{{"status", htam::fb::EnumNameOutcomeStatus(r.status)},
                    {"diagnostics", r.diagnostics}}
                   .dump()
            << std::endl;
  return r.status == htam::fb::OutcomeStatus::Ok ? 0 : 1;
}

bool g_single_call = false;  // the one-call mode has no protocol socket: errors go to stdout

int Fatal(const std::string& status, const std::string& message) {
  if (g_single_call) {
    std::cout << json{{"status", status}, {"diagnostics", message}}.dump() << std::endl;
    return 2;
  }
  (void)htam::eval::WriteFrame(kFd, {{"type", "fatal"}, {"status", status}, {"message", message}});
  return 2;
}

// Reaps every ended child but `keep` (the runner, whose end RunnerDeath reads). In its own PID
// namespace the worker is the init of its sandbox: processes a profile left behind (a killed
// profiler's children) become its children when they end; a later call must not count them as
// its own.
void ReapOrphans(pid_t keep) {
  for (;;) {
    siginfo_t si{};
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) return;
    if (si.si_pid == keep) return;
    waitpid(si.si_pid, nullptr, 0);
  }
}

// How the runner ended, as the daemon classifies a worker's end (evaluator.cc): a fatal frame.
json RunnerDeath(pid_t pid) {
  int st = 0;
  pid_t r;
  for (int i = 0; i < 200; ++i) {  // the socket closed: the process ends at once
    r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    usleep(10000);
  }
  if (r != pid) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  htam::eval::ProcessEnd end =
      htam::eval::ClassifyProcessEnd(st, "the candidate's runner", "",
                                     " (allocation failed under the runner's address-space limit)");
  return {{"type", "fatal"},
          {"status", htam::fb::EnumNameOutcomeStatus(end.status)},
          {"message", end.message}};
}

}  // namespace

// Waits for the runner's "ready" frame (`wait_ms`). On failure the runner is killed.
htam::Status AwaitRunner(const htam::eval::RunnerReport& runner, int wait_ms) {
  pollfd p{runner.fd, POLLIN, 0};
  int ready = poll(&p, 1, wait_ms);
  std::vector<int> fds;
  auto hello_r = ready > 0 ? htam::RecvFrameFds(runner.fd, &fds)
                           : htam::Result<json>(htam::Status::Timeout(
                                 "no answer in " + std::to_string(wait_ms / 1000) + " s"));
  for (int f : fds) close(f);
  if (hello_r.ok() && (*hello_r).value("type", "") == "ready") return htam::Status::OK();
  kill(runner.pid, SIGKILL);
  return htam::Status::Unavailable(
      "the runner did not start: " +
      (hello_r.ok() ? std::string("unexpected frame") : hello_r.status().message()));
}

// --compile-only: one job frame in, one result frame out (see the file comment).
int CompileOnly(htam::BackendInstance& b, const htam::eval::RunnerReport& runner) {
  if (runner.pid > 0)
    if (auto st = AwaitRunner(runner, 120000); !st.ok()) return Fatal("InfraError", st.message());
  json hello = {{"type", "hello"},
                {"pid", getpid()},
                {"sandbox",
                 {{"network_isolated", NetworkIsolated()},
                  {"uid", getuid()},
                  {"runner_files_hidden", runner.files_hidden},
                  {"runner_seccomp", runner.seccomp}}}};
  if (!htam::eval::WriteFrame(kFd, hello).ok()) return 2;
  auto frame = htam::eval::ReadFrame(kFd);
  if (!frame.ok()) return 0;  // the daemon changed its mind
  if (frame->value("type", "") != "job") return Fatal("InfraError", "expected a job frame");
  auto job = htam::eval::UnpackJob(htam::eval::FrameBuffer(*frame), "compile-only job frame");
  if (!job.ok()) return Fatal("InfraError", job.status().message());
  htam::CompileSettings cs;
  cs.language = b.description().language ? b.description().language : "";
  cs.arch = job->arch;
  cs.name = "candidate";
  if (job->gate) {
    cs.options = job->gate->compile_options;
    if (job->gate->compile_timeout_s > 0) cs.timeout_s = job->gate->compile_timeout_s;
  }
  htam::CompileOutcome c;
  if (job->reference_only) {
    // A task's reference: trusted code from the tasks folder, compiled here into this worker's
    // --cache-dir (the verifiers' cache), never in a runner. The key is the plugin's own, so the
    // verifier of the task's first candidate finds the build.
    auto task = htam::ParseTaskFile(job->task_dir);
    auto path = task.ok() ? task->ReferencePath(b.description().name ? b.description().name : "")
                          : htam::Result<std::string>(task.status());
    std::string source;
    if (!path.ok()) return Fatal("InfraError", path.status().message());
    if (!htam::ReadWholeFile(*path, &source)) return Fatal("InfraError", "cannot read " + *path);
    cs.name = "reference";
    auto local = htam::MakeLocalExec(&b, nullptr, {});
    c = local->Compile(source, cs);
  } else {
    if (runner.pid <= 0)
      return Fatal("InfraError",
                   "--compile-only compiles a candidate in a runner: it needs --split");
    auto remote = htam::MakeRemoteExec(&b, runner.fd, runner.pid);
    c = remote->Compile(job->source, cs);
    remote.reset();  // closes the runner's socket: it ends
    int st = 0;
    waitpid(runner.pid, &st, 0);
  }
  // The answer is a result (schema/job.fbs): Ok when it compiled; the candidate's fault
  // (CompileError, Timeout) or the infrastructure's otherwise.
  htam::fb::JobResultT out;
  out.job_id = job->job_id;
  out.status = c.code < 0                   ? htam::fb::OutcomeStatus::Ok
               : c.runner_died              ? htam::fb::OutcomeStatus::Crash
               : c.code == HTAM_ERR_COMPILE ? htam::fb::OutcomeStatus::CompileError
               : c.code == HTAM_ERR_TIMEOUT ? htam::fb::OutcomeStatus::Timeout
                                            : htam::fb::OutcomeStatus::InfraError;
  out.diagnostics = c.diagnostics;
  out.compile_ms = c.ms;
  out.compile_cached = c.cached;
  return htam::eval::WriteBufferFrame(kFd, htam::eval::PackResult(out)).ok() ? 0 : 2;
}

namespace {
// The job and stage a declared wait belongs to (the worker runs one job at a time, on this thread).
uint64_t g_job_id = 0;
std::string g_stage;

void ReportWait(bool waiting) {
  nlohmann::json f = {{"type", "progress"}, {"job_id", g_job_id}, {"stage", g_stage}};
  f[waiting ? "waiting" : "resumed"] = true;
  (void)htam::eval::WriteFrame(kFd, f);
}

void ReportBudget(double seconds) {
  (void)htam::eval::WriteFrame(kFd, {{"type", "progress"},
                                     {"job_id", g_job_id},
                                     {"stage", g_stage},
                                     {"resumed", true},
                                     {"limit_s", seconds}});
}

// htam-eval-worker's command line.
struct WorkerArgs {
  std::string plugin, sdk_include, cache_dir, single_call;
  std::vector<std::string> options;
  std::vector<std::string> self_args;  // for the one-call child of a profile
  int device = 0, jobs = 1;
  bool describe = false, runner_mode = false, split = false, check_threads = true;
  bool kb_only = false;        // the runner serves KernelBench (ModelNew) jobs only
  bool compile_only = false;   // compile one source ahead of its evaluation (file comment)
  bool no_device = false;      // --runner: open no device (a compile-only runner)
  std::string kb_build_cache;  // load_inline build cache the runner may write
  double thread_grace_ms = 50;
  uint64_t leak_mb = 0;  // --runner-leak-mb (the verifier) / --leak-mb (its runner); 0 = unchecked
  std::vector<std::string> hide;
  std::string runner_cache;
  std::string reset_dir;          // --runner: emptied at every reset (its own working directory)
  bool runner_allocates = false;  // --split: device buffers come from the runner
  long drop_uid = -1, drop_gid = -1;
};

// Parses the command line into *a (base/args.h): -1 to go on, else the exit status.
int ParseWorkerArgs(int argc, char** argv, WorkerArgs* a) {
  namespace po = boost::program_options;
  std::string log_level, check_threads_text = "1";
  uint64_t runner_leak_mb = 0;
  po::options_description o;
  o.add_options()("plugin", po::value(&a->plugin),
                  "the backend plugin (libhtam_backend_<name>.so)")(
      "device", po::value(&a->device), "device index")(
      "sdk-include", po::value(&a->sdk_include), "folder holding htam/kernel_abi.h")(
      "cache-dir", po::value(&a->cache_dir), "the plugin's compile cache")(
      "option", po::value(&a->options)->composing(), "a plugin option key=value (repeatable)")(
      "jobs", po::value(&a->jobs), "jobs to serve before exiting")(
      "describe", po::bool_switch(&a->describe), "print the plugin's description and exit")(
      "single-call", po::value(&a->single_call), "one call of a job's candidate (a profiled run)")(
      "runner", po::bool_switch(&a->runner_mode), "serve as the runner of a verifier")(
      "split", po::bool_switch(&a->split), "verify here, run candidates in a runner")(
      "kb-only", po::bool_switch(&a->kb_only), "the runner serves KernelBench jobs only")(
      "compile-only", po::bool_switch(&a->compile_only), "compile one source ahead and exit")(
      "no-device", po::bool_switch(&a->no_device), "--runner: open no device")(
      "kb-build-cache", po::value(&a->kb_build_cache), "load_inline build cache the runner writes")(
      "hide", po::value(&a->hide)->composing(), "a folder the runner must not see (repeatable)")(
      "runner-cache-dir", po::value(&a->runner_cache), "the runner's compile cache")(
      "runner-allocates", po::bool_switch(&a->runner_allocates), "device buffers from the runner")(
      "reset-dir", po::value(&a->reset_dir), "--runner: emptied at every reset")(
      "drop-uid", po::value(&a->drop_uid), "user to drop to")(
      "drop-gid", po::value(&a->drop_gid), "group to drop to")(
      "check-threads", po::value(&check_threads_text), "0: no check for threads left running")(
      "thread-grace-ms", po::value(&a->thread_grace_ms), "wait for threads to end after a call")(
      "runner-leak-mb", po::value(&runner_leak_mb),
      "the verifier: device memory a runner may leave allocated (0 = unchecked)")(
      "leak-mb", po::value(&a->leak_mb), "the runner: the same limit")(
      "log-level", po::value(&log_level), "debug, info, warn, error, off");
  po::variables_map vm;
  const int rc = htam::ParseArgs("htam-eval-worker",
                                 "usage: htam-eval-worker --plugin PATH "
                                 "--device N [options] (started by htamd's evaluator)",
                                 std::vector<std::string>(argv + 1, argv + argc), o, {}, &vm);
  if (rc >= 0) return rc;
  a->jobs = std::max(1, a->jobs);
  a->check_threads = check_threads_text != "0";
  if (!vm.count("leak-mb")) a->leak_mb = runner_leak_mb;
  if (!log_level.empty()) {
    htam::LogLevel l;
    if (htam::ParseLogLevel(log_level, &l)) htam::SetLogLevel(l);
  }
  // What the one-call child of a profile gets again.
  for (const char* key : {"plugin", "device", "sdk-include", "cache-dir", "log-level"}) {
    if (!vm.count(key) || vm[key].defaulted()) continue;
    a->self_args.push_back(std::string("--") + key);
    a->self_args.push_back(key == std::string("device") ? std::to_string(a->device)
                                                        : vm[key].as<std::string>());
  }
  for (const std::string& opt : a->options)
    a->self_args.insert(a->self_args.end(), {"--option", opt});
  return -1;
}

// --runner: candidate code only, no daemon socket. Ends the process when it has served.
int RunRunner(const WorkerArgs& a, const std::string& work_dir) {
  std::set_new_handler(&RunnerOutOfMemory);
  auto lib = htam::PluginLibrary::Open(a.plugin);
  if (!lib.ok()) {
    std::cerr << "htam runner: " << lib.status().ToString() << "\n";
    return 2;
  }
  htam::HostOptions host{a.sdk_include, a.cache_dir, work_dir, a.options};
  auto inst = htam::BackendInstance::Create((*lib)->api(), host);
  if (!inst.ok()) {
    std::cerr << "htam runner: " << inst.status().ToString() << "\n";
    return 2;
  }
  htam_device* dev = nullptr;
  auto opened = a.no_device ? htam::Status::OK()
                            : htam::ConsumeError(
                                  (*inst)->api().device_open((*inst)->handle(), a.device, &dev),
                                  "opening device");
  if (!opened.ok()) {
    std::cerr << "htam runner: " << opened.ToString() << "\n";
    return 2;
  }
  if (!htam::SendFrameFds(4, {{"type", "ready"}, {"pid", getpid()}}, {}).ok()) _exit(2);
  // The directory emptied between jobs: only the runner's own working directory.
  if (!a.reset_dir.empty() && a.reset_dir != work_dir) {
    std::cerr << "htam runner: --reset-dir must be its working directory\n";
    return 2;
  }
  int rc = htam::ServeRunner(inst->get(), dev, 4,
                             {a.check_threads, a.thread_grace_ms, a.reset_dir, a.leak_mb << 20});
  std::cout.flush();
  _exit(rc);  // what candidates left in this process is not torn down
}

// The runner this verifier starts: its command line, what it sees and whom it runs as.
htam::eval::RunnerSpawn RunnerSpawnFor(const WorkerArgs& a, const std::string& work_dir) {
  const std::string exe = htam::ExecutablePath();
  // The plugin by its real path: a link (the build tree's lib/htam/backends) would point into a
  // directory the runner's view hides, and only the link's own directory is bound back.
  std::string plugin = a.plugin;
  if (char real[4096]; realpath(a.plugin.c_str(), real)) plugin = real;
  htam::eval::RunnerSpawn rs;
  rs.argv = {exe.empty() ? "htam-eval-worker" : exe,
             "--runner",
             "--plugin",
             plugin,
             "--device",
             std::to_string(a.device),
             "--sdk-include",
             a.sdk_include,
             "--check-threads",
             a.check_threads ? "1" : "0",
             "--thread-grace-ms",
             std::to_string(a.thread_grace_ms),
             "--leak-mb",
             std::to_string(a.leak_mb)};
  if (!a.runner_cache.empty()) rs.argv.insert(rs.argv.end(), {"--cache-dir", a.runner_cache});
  if (a.compile_only) rs.argv.push_back("--no-device");
  for (const auto& o : a.options) rs.argv.insert(rs.argv.end(), {"--option", o});
  // The ceilings (sol_fraction) are the verifier's to measure; a runner needs none.
  rs.argv.insert(rs.argv.end(), {"--option", "cuda_roofline=false"});
  // Nor a cache of the backend's own kernels: a runner writes nothing a later process reads.
  rs.argv.insert(rs.argv.end(), {"--option", "cuda_nvrtc_cache=false"});
  rs.hidden_dirs = a.hide;
  rs.hidden_dirs.push_back(work_dir);  // the verifier's own files
  rs.work_dir = work_dir + "/runner";
  rs.argv.insert(rs.argv.end(), {"--reset-dir", rs.work_dir});
  rs.visible_dirs = {rs.work_dir};
  if (!a.runner_cache.empty()) rs.visible_dirs.push_back(a.runner_cache);
  // What the runner itself needs stays in view, wherever the hidden directories are.
  auto dir_of = [](const std::string& p) { return p.substr(0, p.find_last_of('/')); };
  rs.visible_dirs.push_back(dir_of(rs.argv[0]));
  rs.visible_dirs.push_back(dir_of(plugin));
  // KernelBench candidates: the harness scripts and the load_inline build cache.
  if (!a.kb_build_cache.empty()) rs.visible_dirs.push_back(a.kb_build_cache);
  {
    char real[4096];
    std::string helper = htam::DefaultKernelBenchHelper();
    if (realpath(helper.c_str(), real)) rs.visible_dirs.push_back(dir_of(real));
  }
  if (!a.sdk_include.empty()) rs.visible_dirs.push_back(a.sdk_include);
  if (const char* ld = getenv("LD_LIBRARY_PATH")) {
    std::string l = ld;
    for (size_t b = 0, e; b < l.size(); b = e + 1) {
      e = l.find(':', b);
      if (e == std::string::npos) e = l.size();
      if (e > b) rs.visible_dirs.push_back(l.substr(b, e - b));
    }
  }
  rs.drop = a.drop_uid >= 0 && geteuid() == 0;
  rs.uid = uid_t(a.drop_uid);
  rs.gid = gid_t(a.drop_gid);
  return rs;
}

// The runner says it is ready (plugin loaded, device open) or ends; candidates go to it when the
// plugin can share buffers (*remote), else they run here and the runner goes.
htam::Status AttachRunner(const WorkerArgs& a, htam::BackendInstance& b,
                          htam::eval::RunnerReport* runner,
                          std::unique_ptr<htam::CandidateExec>* remote, std::string* note) {
  HTAM_RETURN_IF_ERROR(AwaitRunner(*runner, 120000));
  if (a.kb_only || (b.api().buffer_export && b.api().buffer_import)) {
    *remote = htam::MakeRemoteExec(&b, runner->fd, runner->pid, a.runner_allocates);
    *note = a.kb_only ? "kernelbench candidates only" : "on";
  } else {
    kill(runner->pid, SIGKILL);
    waitpid(runner->pid, nullptr, 0);
    close(runner->fd);
    runner->pid = -1;
    *note = "unavailable (the plugin cannot share buffers)";
  }
  return htam::Status::OK();
}

// Shared buffers are files (memfd): with a runner, the verifier lifts its own soft file-size
// limit (the runner made the limit hard for itself, and runs every candidate); without one,
// candidates run here and the limit is made hard.
void SetFileSizeLimit(bool runner_runs_every_candidate) {
  struct rlimit fs;
  if (getrlimit(RLIMIT_FSIZE, &fs) != 0) return;
  if (runner_runs_every_candidate)
    fs.rlim_cur = fs.rlim_max;
  else
    fs.rlim_max = fs.rlim_cur;
  setrlimit(RLIMIT_FSIZE, &fs);
}

// The first frame to the evaluator: this process, its device and its sandbox as it sees them.
json HelloFrame(int device, const htam::eval::RunnerReport& runner, bool remote,
                const std::string& runner_note) {
  struct rlimit as {
  }, nproc{};
  getrlimit(RLIMIT_AS, &as);
  getrlimit(RLIMIT_NPROC, &nproc);
  return {{"type", "hello"},
          {"pid", getpid()},
          {"device", device},
          {"sandbox",
           {{"network_isolated", NetworkIsolated()},
            {"readonly_root", RootReadOnly()},
            {"uid", getuid()},
            {"runner", runner_note},
            {"runner_files_hidden", remote && runner.files_hidden},
            {"runner_seccomp", remote && runner.seccomp},
            {"memory_limit", as.rlim_cur == RLIM_INFINITY ? 0 : uint64_t(as.rlim_cur)},
            {"nproc_limit", nproc.rlim_cur == RLIM_INFINITY ? 0 : uint64_t(nproc.rlim_cur)}}}};
}

// Serves up to a.jobs job frames: parse the task, run the gate (and the profile when asked),
// answer with the result. Returns -1 when done (the daemon gone, the jobs served, or a runner
// not to be reused), else the exit status of a fatal error.
int ServeJobs(const WorkerArgs& a, htam::BackendInstance& b, htam_device* dev,
              const htam::eval::RunnerReport& runner, htam::CandidateExec* remote,
              const std::string& work_dir) {
  htam::BaselineCache baselines;  // the reference timings this worker keeps (baseline_reuse_s)
  // Waits for a device turn or a lock (base/wait_report.h) go to the evaluator, which keeps them
  // out of the job's limits.
  htam::SetWaitObserver(ReportWait);
  htam::SetBudgetObserver(ReportBudget);
  for (int done = 0; done < a.jobs; ++done) {
    auto frame = htam::eval::ReadFrame(kFd);
    if (!frame.ok()) break;  // daemon gone or shutting down
    if ((*frame)["type"] != "job") continue;
    auto parsed = htam::eval::UnpackJob(htam::eval::FrameBuffer(*frame), "job frame");
    if (!parsed.ok()) return Fatal("InfraError", parsed.status().message());
    const htam::fb::JobSpecT& j = *parsed;
    uint64_t job_id = j.job_id;
    g_job_id = job_id;
    auto progress = [&](const std::string& stage) {
      g_stage = stage;
      (void)htam::eval::WriteFrame(kFd,
                                   {{"type", "progress"}, {"job_id", job_id}, {"stage", stage}});
    };
    ReapOrphans(runner.pid);
    progress("parse task");
    htam::GateResult r;
    auto task = htam::ParseTaskFile(j.task_dir, htam::HostCaseLimit(j.language, j.max_case_bytes));
    htam::GateOptions o = GateOptionsFromJob(j, b, a.device);
    o.baselines = &baselines;
    if (!task.ok()) {
      r.status = htam::fb::OutcomeStatus::InfraError;
      r.diagnostics = task.status().message();
    } else {
      // A KernelBench-only runner takes ModelNew candidates; lean-ABI ones run here as before.
      o.runner = a.kb_only && o.language != htam::kKernelBenchLanguage ? nullptr : remote;
      htam::Gate gate(&b, dev, *task, o);
      if (j.reference_only)
        r = gate.EvaluateReference(progress);
      else
        r = gate.Evaluate(j.source, progress);
    }
    if (r.status == htam::fb::OutcomeStatus::Ok && j.profile_request) {
      progress("profile");
      // A profiler measures every kernel on the device: the other lanes wait (timing_lock.h).
      htam::DeviceLock turn(htam::DeviceLockPathFor(o, b), o.timing_lock_wait_s);
      turn.Exclusive();
      Profile(b, j, a.self_args, work_dir, &r);
    }
    if (remote && r.status != htam::fb::OutcomeStatus::Ok &&
        r.diagnostics.find("the runner process died") != std::string::npos) {
      // The runner died under this candidate: say how, as the daemon would for a worker.
      (void)htam::eval::WriteFrame(kFd, RunnerDeath(runner.pid));
      _exit(0);
    }
    const bool retired = remote && !remote->Retired().empty();
    // The gate's result is the frame's (job_codec.h): the worker adds its own fields to it.
    r.job_id = job_id;
    r.runner_retired = retired;
    if (!htam::eval::WriteBufferFrame(kFd, htam::eval::PackResult(r)).ok()) break;
    // A runner whose candidate crashed, timed out, failed an integrity check or could not load is
    // not reused: the next job gets a fresh pair (GateResult::runner_clean).
    if (remote && r.status != htam::fb::OutcomeStatus::Ok && !r.runner_clean) break;
    // A runner retired by its reset (device memory its candidates left allocated) is replaced too.
    if (retired) break;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  WorkerArgs a;
  if (int rc = ParseWorkerArgs(argc, argv, &a); rc >= 0) return rc;
  g_single_call = !a.single_call.empty();
  char cwd[4096];
  const std::string work_dir = getcwd(cwd, sizeof cwd) ? cwd : "/tmp";
  if (a.runner_mode) return RunRunner(a, work_dir);
  // ---- the verifier: start the runner while privileged, then drop privileges ----
  htam::eval::RunnerReport runner;
  if (a.split && a.single_call.empty() && !a.describe) {
    auto r = htam::eval::SpawnRunner(RunnerSpawnFor(a, work_dir));
    if (!r.ok()) return Fatal("InfraError", "cannot start the runner: " + r.status().message());
    runner = *r;
  }
  if (a.drop_uid >= 0 && geteuid() == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid_t(a.drop_gid)) != 0 ||
        setuid(uid_t(a.drop_uid)) != 0)
      return Fatal("InfraError", "the worker cannot drop privileges");
  }
  // Nobody may trace this process or read its memory (/proc/PID/mem needs a dumpable target).
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (a.single_call.empty()) {
    // fd 3 is the protocol socket: not for the processes a profile starts.
    fcntl(kFd, F_SETFD, FD_CLOEXEC);
    std::set_new_handler(&OnOutOfMemory);
    signal(SIGABRT, &OnAbort);
  }
  auto lib = htam::PluginLibrary::Open(a.plugin);
  if (!lib.ok()) return Fatal("InfraError", lib.status().message());
  htam::HostOptions host;
  host.sdk_include_dir = a.sdk_include;
  host.cache_dir = a.cache_dir;
  host.work_dir = work_dir;
  host.options = a.options;
  auto inst = htam::BackendInstance::Create((*lib)->api(), host);
  if (!inst.ok()) return Fatal("InfraError", inst.status().message());
  htam::BackendInstance& b = **inst;
  if (a.describe) {
    auto st = htam::eval::WriteFrame(kFd, DescribeJson(b));
    return st.ok() ? 0 : 2;
  }
  if (a.compile_only) return CompileOnly(b, runner);
  if (!b.description().can_run)
    return Fatal("InfraError", std::string("backend cannot run here: ") +
                                   (b.description().notes ? b.description().notes : ""));
  htam_device* dev = nullptr;
  auto st = htam::ConsumeError(b.api().device_open(b.handle(), a.device, &dev), "opening device");
  if (!st.ok()) return Fatal("InfraError", st.message());
  if (!a.single_call.empty()) {
    int rc = SingleCall(a.single_call, b, dev, a.device);
    b.api().device_close(dev);
    std::cout.flush();
    _exit(rc);
  }
  std::unique_ptr<htam::CandidateExec> remote;
  std::string runner_note = "off";
  if (runner.pid > 0) {
    if (auto st = AttachRunner(a, b, &runner, &remote, &runner_note); !st.ok())
      return Fatal("InfraError", st.message());
  }
  SetFileSizeLimit(remote && !a.kb_only);
  if (!htam::eval::WriteFrame(kFd, HelloFrame(a.device, runner, remote != nullptr, runner_note))
           .ok())
    return 2;
  if (int rc = ServeJobs(a, b, dev, runner, remote.get(), work_dir); rc >= 0) return rc;
  b.api().device_close(dev);
  // Leave without running destructors of whatever the candidates left in this process.
  std::cout.flush();
  _exit(0);
}
