// htam-eval --in-process (in_process.h): the plugin host and the gate in this process, with the
// gate's and the plugin's settings from the configuration table as the evaluator sends them.
#include "tools/eval/in_process.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "backends/common/plugin_host.h"
#include "base/file.h"
#include "base/paths.h"
#include "daemon/config/sections.h"
#include "daemon/eval/gate/gate.h"
#include "daemon/eval/gate/task_spec.h"
#include "daemon/eval/verifier/profile_run.h"

namespace htam::evaltool {
namespace {

namespace fs = std::filesystem;

// The evaluator's plugin search (base/paths.h); the bare file name when none is found, for
// dlopen's own search.
std::string FindPlugin(const Config& c, const std::string& backend) {
  const auto found = FindPlugins(config::Eval::From(c).plugin_dir);
  auto it = found.find(backend);
  return it != found.end() ? it->second : "libhtam_backend_" + backend + ".so";
}

// eval.<backend>_<key> as "key=value", as the evaluator hands them to its workers.
std::vector<std::string> PluginOptions(const Config& c, const std::string& backend) {
  std::vector<std::string> out;
  const std::string prefix = "eval." + backend + "_";
  for (const auto& spec : OptionTable())
    if (spec.name.rfind(prefix, 0) == 0)
      out.push_back(spec.name.substr(prefix.size()) + "=" + c.GetString(spec.name));
  return out;
}

GateOptions GateOptionsFrom(const config::Eval& e, int device_index, BaselineCache* baselines) {
  GateOptions g;
  static_cast<fb::GateSpecT&>(g) = eval::GateSpecFromConfig(e);
  g.device_index = device_index;  // takes turns with other evaluations on this device
  g.baselines = baselines;
  return g;
}

// This binary with --in-process --single-call under the plugin's profiler, for one Ok job.
void Profile(BackendInstance& b, const Config& c, const std::string& backend,
             const std::string& plugin, const InProcessJob& job, const std::string& work,
             eval::EvalResult* r) {
  const config::Eval e = config::Eval::From(c);
  ProfileRequest pr;
  pr.tool = e.ncu;
  pr.timeout_s = double(e.cuda_profile_timeout_s);
  pr.memory_pct = e.cuda_profile_memory_pct;
  pr.compute_pct = e.cuda_profile_compute_pct;
  pr.launch_us = e.cuda_profile_launch_us;
  auto command = GetProfileCommand(b, pr);
  if (!command.ok()) {
    r->profile_note = command.status().message();
    return;
  }
  std::vector<std::string> argv = {
      ExecutableDir() + "/htam-eval",          "--in-process", "--single-call", "--task",
      fs::absolute(job.task_dir).string(),     "--backend",    backend,         "--eval.plugin_dir",
      fs::path(plugin).parent_path().string(), "--cache",      e.cache_dir};
  if (!job.language.empty()) argv.insert(argv.end(), {"--language", job.language});
  // This run's settings (those away from the table's defaults) travel on the command line.
  const Config defaults = Config::Defaults();
  for (const auto& spec : OptionTable())
    if (spec.name != "eval.plugin_dir" && spec.name != "eval.cache_dir" &&
        c.GetString(spec.name) != defaults.GetString(spec.name))
      argv.insert(argv.end(), {"--" + spec.name, c.GetString(spec.name)});
  // The plugin's options for the profiled process come last: they win.
  for (const auto& o : command->child_options) argv.insert(argv.end(), {"--option", o});
  if (job.reference) {
    argv.push_back("--reference");
  } else {
    const std::string file = work + "/profiled-candidate";
    std::ofstream(file, std::ios::trunc) << job.source;
    argv.push_back(file);
  }
  ProfileOutcome p = RunProfile(b, *command, argv, fs::current_path().string(), pr);
  auto frac = [](double pct) { return pct < 0 ? -1.0f : float(pct / 100.0); };
  r->profile_note = p.note;
  r->profiled_kernels = p.kernels;
  r->profiled_us = p.total_us;
  fb::ProfileT& profile = fb::MutableProfile(r);
  profile.dram_throughput = frac(p.dram_pct);
  profile.sm_throughput = frac(p.sm_pct);
  profile.occupancy = frac(p.occupancy_pct);
  r->bottleneck = p.available ? p.bottleneck : fb::Bottleneck::Unknown;
}

}  // namespace

bool PluginFound(const Config& config, const std::string& backend) {
  return fs::path(FindPlugin(config, backend)).is_absolute();
}

Status RunInProcess(const Config& config, const std::string& backend,
                    const std::vector<InProcessJob>& jobs, bool profile, bool single_call,
                    const std::function<void(size_t, eval::EvalResult)>& done) {
  const config::Eval ev = config::Eval::From(config);
  const std::string plugin = FindPlugin(config, backend);
  auto lib = PluginLibrary::Open(plugin);
  if (!lib.ok()) return Status::Unavailable(lib.status().ToString());
  const std::string work = fs::temp_directory_path() / ("htam-eval-" + std::to_string(getpid()));
  std::error_code ec;
  fs::create_directories(work, ec);
  HostOptions host;
  host.sdk_include_dir = ShippedPath(ev.sdk_include_dir, "include");
  host.cache_dir = ev.cache_dir;
  if (host.cache_dir.empty()) host.cache_dir = work + "/cache";
  fs::create_directories(host.cache_dir, ec);
  if (ec) return Status::InvalidArgument("cannot create the compile cache " + host.cache_dir);
  host.work_dir = work;
  host.options = PluginOptions(config, backend);
  auto b = BackendInstance::Create((*lib)->api(), host);
  if (!b.ok()) return Status::Unavailable(b.status().ToString());
  const htam_backend_description& desc = (*b)->description();
  if (!desc.can_run || desc.num_devices < 1)
    return Status::Unavailable("backend '" + backend +
                               "' cannot run here: " + (desc.notes ? desc.notes : ""));
  const PluginApi& api = (*b)->api();
  htam_device* device = nullptr;
  Status st =
      ConsumeError(api.device_open((*b)->handle(), desc.devices[0].index, &device), "device_open");
  if (!st.ok()) return Status::Unavailable(st.ToString());
  BaselineCache baselines;  // one reference timing serves this run's candidates
  GateOptions go = GateOptionsFrom(ev, desc.devices[0].index, &baselines);
  go.single_call = single_call;
  // The host's lock folder, shared with htamd's and other runs' workers (evaluator.cc does the
  // same): made here as it is there, else it would be this user's alone.
  if (!go.device_lock_dir.empty()) {
    if (Status made = MakeSharedDir(go.device_lock_dir); !made.ok())
      return Status::Unavailable(made.WithContext("eval.device_lock_dir").ToString());
  }
  const uint64_t max_case = uint64_t(ev.max_case_mb) << 20;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const InProcessJob& job = jobs[i];
    const auto t0 = std::chrono::steady_clock::now();
    auto task = ParseTaskFile(job.task_dir, HostCaseLimit(job.language, max_case));
    eval::EvalResult r;
    if (!task.ok()) {
      r.status = fb::OutcomeStatus::InfraError;
      r.diagnostics = task.status().message();
    } else {
      go.language = job.language;
      Gate gate(b->get(), device, *task, go);
      r = job.reference ? gate.EvaluateReference({}) : gate.Evaluate(job.source, {});
    }
    r.device = desc.devices[0].name;
    r.arch = desc.devices[0].arch;
    r.wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (profile && !single_call && r.status == fb::OutcomeStatus::Ok)
      Profile(**b, config, backend, plugin, job, work, &r);
    done(i, std::move(r));
  }
  api.device_close(device);
  b->reset();
  fs::remove_all(work, ec);
  return Status::OK();
}

}  // namespace htam::evaltool
