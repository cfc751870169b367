// htam-eval-cli: evaluates candidate files against one task directory on one backend, through the
// same plugin ABI and verification gate as the daemon's workers, and prints one JSON object per
// candidate (JSON lines). For lineage measurements, benchmarks and the GPU tests.
//
//   htam-eval-cli --task configs/tasks/relu --source a.cu [--source b.cu ...] [--reference]
//                 [--backend cuda] [--plugin PATH] [--cache DIR] [--seeds 3] [--reps 30]
//                 [--option key=value ...] [--compile-threads N] [--profile]
//
// --profile: after a candidate is Ok, runs its one call again under the plugin's profiler (this
// binary with --single-call under the command the plugin gives: Nsight Compute for CUDA;
// backends/common/profile_run.h) and adds dram/sm throughput, occupancy and the bottleneck class;
// without a profiler the line says "profile unavailable". KernelBench tasks (task.json
// "kernelbench") take their golden data and PyTorch baseline from backends/common/kernelbench.h.
//
// With several sources and the CUDA backend, a compile pool compiles the next candidates while the
// GPU verifies and times the current one (the gate's compile is then a cache hit).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backends/common/gate.h"
#include "backends/common/plugin_host.h"
#include "backends/common/profile_run.h"
#include "backends/common/task_spec.h"
#include "backends/cuda/compile_pool.h"
#include "base/file.h"
#include "base/paths.h"
#include "daemon/config/config.h"

namespace fs = std::filesystem;
using nlohmann::json;

json StagesJson(const htam::GateResult& r) {
  json s = json::object();
  for (const auto& [name, ms] : r.stage_ms) s[name] = std::round(ms * 10) / 10;
  return s;
}

namespace {

struct Args {
  std::string task, backend = "cuda", plugin, cache, work;
  std::vector<std::string> sources, options;
  bool reference = false;
  bool profile = false;      // --profile: Nsight Compute metrics for every Ok candidate
  bool single_call = false;  // --single-call: the run ncu watches (internal)
  int seeds = 3, reps = 30, compile_threads = 2, input_sets = 4;
  bool help = false;
};

const char* kUsage =
    "usage: htam-eval-cli --task DIR (--source FILE ... | --reference) [--backend cuda]\n"
    "                     [--plugin PATH] [--cache DIR] [--seeds N] [--reps N] [--sets N]\n"
    "                     [--option key=value ...] [--compile-threads N] [--profile]\n"
    "Prints one JSON object per candidate: status, median_us, spread_us, baseline_us, speedup,\n"
    "sol_fraction, clocks, resources, diagnostics; with --profile also dram_pct, sm_pct,\n"
    "occupancy_pct and bottleneck from Nsight Compute (profile_note says when unavailable).\n";

bool ParseArgs(int argc, char** argv, Args* a, std::string* err) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&](std::string* v) {
      if (i + 1 >= argc) {
        *err = "missing value for " + k;
        return false;
      }
      *v = argv[++i];
      return true;
    };
    std::string v;
    if (k == "--help" || k == "-h")
      a->help = true;
    else if (k == "--reference")
      a->reference = true;
    else if (k == "--profile")
      a->profile = true;
    else if (k == "--single-call")
      a->single_call = true;
    else if (k == "--task") {
      if (!next(&a->task)) return false;
    } else if (k == "--backend") {
      if (!next(&a->backend)) return false;
    } else if (k == "--plugin") {
      if (!next(&a->plugin)) return false;
    } else if (k == "--cache") {
      if (!next(&a->cache)) return false;
    } else if (k == "--source") {
      if (!next(&v)) return false;
      a->sources.push_back(v);
    } else if (k == "--option") {
      if (!next(&v)) return false;
      a->options.push_back(v);
    } else if (k == "--seeds" || k == "--reps" || k == "--compile-threads" || k == "--sets") {
      if (!next(&v)) return false;
      int n = std::atoi(v.c_str());
      if (n <= 0) {
        *err = k + " needs a positive integer";
        return false;
      }
      (k == "--seeds"  ? a->seeds
       : k == "--reps" ? a->reps
       : k == "--sets" ? a->input_sets
                       : a->compile_threads) = n;
    } else {
      *err = "unknown argument " + k;
      return false;
    }
  }
  if (a->help) return true;
  if (a->task.empty()) {
    *err = "--task is required";
    return false;
  }
  if (a->sources.empty() && !a->reference) {
    *err = "give --source FILE or --reference";
    return false;
  }
  return true;
}

std::string FindPlugin(const std::string& backend) {
  std::string name = "libhtam_backend_" + backend + ".so";
  std::string self = htam::ExecutableDir();
  for (const std::string& c : {self + "/" + name, self + "/../" + backend + "/" + name,
                               self + "/../backends/" + backend + "/" + name,
                               self + "/../../backends/" + backend + "/" + name}) {
    if (fs::exists(c)) return fs::canonical(c).string();
  }
  return name;  // let dlopen search
}

std::string OptionValue(const std::vector<std::string>& opts, const std::string& key,
                        const std::string& def) {
  std::string v = def;
  for (const auto& o : opts) {
    for (const std::string& k : {key, "cuda_" + key}) {
      if (o.rfind(k + "=", 0) == 0) v = o.substr(k.size() + 1);
    }
  }
  return v;
}

// The configuration table's defaults with the --option KEY=VALUE overrides that name one of its
// eval.* options (KEY is the name after "eval." or after "eval.cuda_"), each checked by the
// table's type; other keys are the plugin's own and are left to it.
htam::Result<htam::Config> EvalSettings(const std::vector<std::string>& options) {
  htam::Config c = htam::Config::Defaults();
  auto known = [](const std::string& name) {
    for (const auto& spec : htam::OptionTable())
      if (spec.name == name) return true;
    return false;
  };
  for (const auto& o : options) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = o.substr(0, eq), value = o.substr(eq + 1);
    for (const std::string& name : {"eval." + key, "eval.cuda_" + key}) {
      if (!known(name)) continue;
      if (htam::Status st = c.Set(name, value); !st.ok())
        return htam::Status::InvalidArgument("--option " + o + ": " + st.message());
    }
  }
  return c;
}

const char* StatusName(htam::fb::OutcomeStatus s) {
  return htam::fb::EnumNameOutcomeStatus(s);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  std::string err;
  if (!ParseArgs(argc, argv, &args, &err)) {
    std::cerr << "htam-eval-cli: " << err << "\n" << kUsage;
    return 2;
  }
  if (args.help) {
    std::cout << kUsage;
    return 0;
  }
  auto task = htam::ParseTaskFile(args.task);
  if (!task.ok()) {
    std::cerr << "htam-eval-cli: " << task.status().ToString() << "\n";
    return 2;
  }
  std::string plugin_path = args.plugin.empty() ? FindPlugin(args.backend) : args.plugin;
  auto lib = htam::PluginLibrary::Open(plugin_path);
  if (!lib.ok()) {
    std::cerr << "htam-eval-cli: " << lib.status().ToString() << "\n";
    return 3;
  }
  std::string work = fs::temp_directory_path() / ("htam-eval-cli-" + std::to_string(getpid()));
  fs::create_directories(work);
  htam::HostOptions host;
  // The kernel ABI headers: the ones htam ships beside this binary (an install or a build tree),
  // else sdk/include of the current directory (a source checkout).
  host.sdk_include_dir = htam::FindSharedFile("include");
  if (host.sdk_include_dir.empty() || !fs::exists(host.sdk_include_dir + "/htam/kernel_abi.h"))
    host.sdk_include_dir = fs::absolute("sdk/include").string();
  host.cache_dir = args.cache.empty() ? work + "/cache" : fs::absolute(args.cache).string();
  {
    std::error_code ec;
    fs::create_directories(host.cache_dir, ec);
    if (ec) {
      std::cerr << "htam-eval-cli: cannot create the compile cache " << host.cache_dir << ": "
                << ec.message() << "\n";
      return 2;
    }
  }
  host.work_dir = work;
  host.options = args.options;
  auto backend = htam::BackendInstance::Create((*lib)->api(), host);
  if (!backend.ok()) {
    std::cerr << "htam-eval-cli: " << backend.status().ToString() << "\n";
    return 3;
  }
  const htam_backend_description& desc = (*backend)->description();
  if (!desc.can_run || desc.num_devices < 1) {
    std::cerr << "htam-eval-cli: backend '" << args.backend
              << "' cannot run here: " << (desc.notes ? desc.notes : "") << "\n";
    return 4;
  }
  const htam::PluginApi& api = (*backend)->api();
  htam_device* device = nullptr;
  htam::Status st = htam::ConsumeError(
      api.device_open((*backend)->handle(), desc.devices[0].index, &device), "device_open");
  if (!st.ok()) {
    std::cerr << "htam-eval-cli: " << st.ToString() << "\n";
    return 4;
  }
  // Roofline ceilings (CUDA extension entry point; absent on other backends).
  json roof = nullptr;
  double copy_bw = 0, peak_flops = 0;
  if (void* h = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    auto fn =
        reinterpret_cast<htam_backend_device_roofline_fn>(dlsym(h, "htam_backend_device_roofline"));
    htam_roofline_report r{};
    r.struct_size = sizeof r;
    if (fn) {
      if (htam_backend_error* e = fn(device, &r)) {
        htam_backend_error_free(e);
      } else {
        copy_bw = r.copy_bytes_per_s;
        peak_flops = std::max(r.fp32_flops, r.tensor16_flops);
        roof = {{"copy_gb_per_s", r.copy_bytes_per_s / 1e9},
                {"fp32_tflops", r.fp32_flops / 1e12},
                {"bf16_mma_tflops", r.tensor16_flops / 1e12}};
        bool is16 = false;
        for (const auto& t : task->inputs) is16 |= (t.dtype == HTAM_F16 || t.dtype == HTAM_BF16);
        peak_flops = is16 ? r.tensor16_flops : r.fp32_flops;
      }
    }
    dlclose(h);
  }

  htam::BaselineCache baselines;  // one reference timing serves this run's candidates
  htam::GateOptions go;
  go.device_index = desc.devices[0].index;  // takes turns with other evaluations on this device
  go.seeds = args.seeds;
  go.repetitions = args.reps;
  go.input_sets = args.input_sets;
  go.seed_base = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  go.single_call = args.single_call;
  {  // The table's eval.* settings of the gate, with --option overrides checked by their type.
    auto eval = EvalSettings(args.options);
    if (!eval.ok()) {
      std::cerr << "htam-eval-cli: " << eval.status().message() << "\n";
      return 2;
    }
    const htam::Config& c = *eval;
    go.golden_python = c.GetString("eval.kernelbench_python");
    go.golden_helper = c.GetString("eval.kernelbench_helper");
    go.device_data = c.GetBool("eval.device_data");
    go.baseline_reuse_s = double(c.GetInt("eval.baseline_reuse_s"));
    go.baselines = &baselines;
    go.buffer_pool_bytes = uint64_t(std::max<int64_t>(0, c.GetInt("eval.buffer_pool_mb"))) << 20;
    go.golden_timeout_s = double(c.GetInt("eval.kernelbench_timeout_s"));
    go.timing_lock_wait_s = double(c.GetInt("eval.timing_lock_wait_s"));
  }

  // Profile on request: thresholds from the configuration table, overridden by --option.
  const htam::Config defaults = htam::Config::Defaults();
  auto threshold = [&](const std::string& key) {
    std::string v = OptionValue(args.options, key, "");
    return v.empty() ? defaults.GetDouble("eval.cuda_" + key) : std::atof(v.c_str());
  };
  htam::ProfileRequest profile_request;
  profile_request.memory_pct = threshold("profile_memory_pct");
  profile_request.compute_pct = threshold("profile_compute_pct");
  profile_request.launch_us = threshold("profile_launch_us");
  profile_request.timeout_s = threshold("profile_timeout_s");

  // Compile pool: warms the cache for every source, ahead of the gate, in a detached process (a
  // grandchild re-parented to init): the gate fails a candidate when the worker has child
  // processes during a call, so compiles must not be our children.
  if (args.backend == "cuda" && args.sources.size() > 1 && !args.single_call) {
    std::vector<std::string> sources;
    for (const auto& s : args.sources) {
      std::string src;
      if (htam::ReadWholeFile(s, &src)) sources.push_back(std::move(src));
    }
    std::string arch = desc.devices[0].arch;
    std::cout.flush();
    pid_t child = fork();
    if (child == 0) {
      setsid();
      if (fork() != 0) _exit(0);
      htam::cuda::CompilerOptions co;
      co.nvcc = OptionValue(args.options, "nvcc", "nvcc");
      co.flags = OptionValue(args.options, "nvcc_flags", "-O3");
      co.sdk_include_dir = host.sdk_include_dir;
      co.cache_dir = host.cache_dir;
      co.work_dir = work + "/pool";
      fs::create_directories(co.work_dir);
      auto c = htam::cuda::NvccCompiler::Create(co);
      if (c.ok()) {
        htam::cuda::CompilePool pool(*c, args.compile_threads);
        std::vector<std::shared_future<htam::Result<htam::cuda::CompileOutput>>> pending;
        for (const auto& src : sources)
          pending.push_back(pool.Submit(src, arch, go.compile_options));
        for (auto& p : pending) p.wait();
      }
      _exit(0);
    }
    if (child > 0) waitpid(child, nullptr, 0);
  }

  int worst = 0;
  std::vector<std::string> jobs = args.sources;
  if (args.reference) jobs.insert(jobs.begin(), "");
  for (const std::string& path : jobs) {
    auto t0 = std::chrono::steady_clock::now();
    htam::Gate gate(backend->get(), device, *task, go);
    htam::GateResult r;
    if (path.empty()) {
      r = gate.EvaluateReference({});
    } else {
      std::string src;
      if (!htam::ReadWholeFile(path, &src)) {
        std::cerr << "htam-eval-cli: cannot read " << path << "\n";
        worst = std::max(worst, 2);
        continue;
      }
      r = gate.Evaluate(src, {});
    }
    double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double sol_us = 0;
    if (copy_bw > 0) sol_us = std::max(sol_us, r.bytes / copy_bw * 1e6);
    if (peak_flops > 0) sol_us = std::max(sol_us, r.flops / peak_flops * 1e6);
    // The floor no honest result can beat. Inputs come from DRAM (the cache is flushed before
    // every repetition), but up to a last-level cache's worth of output may be written back
    // only after the window closes, so those bytes bound the roofline (sol_us) and not the
    // floor: an honest vectorized relu over 16 MiB on an H100 ran at 1.18x sol_us this way, and
    // one over 64 MiB (larger than the 50 MiB L2) at 40.3 us against 46.2 us of all its bytes
    // at the measured copy rate.
    double out_bytes = 0;
    for (const auto& t : task->outputs) {
      double n = htam_dtype_size(t.dtype);
      for (int64_t d : task->Shape(t, task->seen_shapes.front())) n *= double(d);
      out_bytes += n;
    }
    double cache = double(desc.devices[0].cache_bytes);
    double floor_bytes = std::max(0.0, r.bytes - std::min(out_bytes, std::max(cache, 0.0)));
    double floor_us = 0;
    if (copy_bw > 0) floor_us = std::max(floor_us, floor_bytes / copy_bw * 1e6);
    if (peak_flops > 0) floor_us = std::max(floor_us, r.flops / peak_flops * 1e6);
    json j = {{"source", path.empty() ? "reference" : path},
              {"task", task->name},
              {"backend", args.backend},
              {"device", desc.devices[0].name},
              {"arch", desc.devices[0].arch},
              {"status", StatusName(r.status)},
              {"diagnostics", r.diagnostics},
              {"median_us", r.median_us},
              {"spread_us", r.spread_us},
              {"repetitions", r.repetitions},
              {"baseline_us", r.baseline_us},
              {"speedup", r.speedup},
              {"cases", r.cases},
              {"compile_ms", r.compile_ms},
              {"compile_cached", r.compile_cached},
              {"stage_ms", StagesJson(r)},
              {"flops", r.flops},
              {"bytes", r.bytes},
              {"sol_us", sol_us},
              {"sol_fraction", (sol_us > 0 && r.median_us > 0) ? sol_us / r.median_us : -1.0},
              {"floor_us", floor_us},
              {"faster_than_sol", floor_us > 0 && r.median_us > 0 && r.median_us < 0.9 * floor_us},
              {"sm_clock_mhz", r.profile.sm_clock_mhz},
              {"mem_clock_mhz", r.profile.mem_clock_mhz},
              {"registers", r.profile.registers},
              {"shared_bytes", r.profile.shared_bytes},
              {"spill_bytes", r.profile.spill_bytes},
              {"candidate_hash", r.candidate_hash},
              {"golden_computed", r.golden_computed},
              {"baseline_compile_us", r.baseline_compile_us},
              {"baseline_note", r.baseline_note},
              {"wall_ms", wall_ms},
              {"roofline", roof}};
    if (args.profile && r.status == htam::fb::OutcomeStatus::Ok) {
      std::vector<std::string> child = {htam::ExecutableDir() + "/htam-eval-cli",
                                        "--task",
                                        fs::absolute(args.task).string(),
                                        "--backend",
                                        args.backend,
                                        "--plugin",
                                        plugin_path,
                                        "--cache",
                                        host.cache_dir,
                                        "--single-call"};
      if (path.empty()) {
        child.push_back("--reference");
      } else {
        child.push_back("--source");
        child.push_back(fs::absolute(path).string());
      }
      // The plugin's options for the profiled process (e.g. no roofline probes, no CUPTI beside
      // the profiler) replace the user's options of the same key (with or without the
      // "<backend>_" prefix).
      htam::ProfileOutcome p;
      auto command = htam::GetProfileCommand(**backend, profile_request);
      if (!command.ok()) {
        p.note = command.status().message();
      } else {
        auto key_of = [&](const std::string& o) {
          std::string key = o.substr(0, o.find('='));
          const std::string prefix = args.backend + "_";
          return key.rfind(prefix, 0) == 0 ? key.substr(prefix.size()) : key;
        };
        for (const auto& o : args.options) {
          bool replaced = false;
          for (const auto& c : command->child_options) replaced |= key_of(o) == key_of(c);
          if (replaced) continue;
          child.push_back("--option");
          child.push_back(o);
        }
        for (const auto& o : command->child_options) {
          child.push_back("--option");
          child.push_back(o);
        }
        // From this process's directory: the child finds sdk/include the way this one did.
        p = htam::RunProfile(**backend, *command, child, fs::current_path().string(),
                             profile_request);
      }
      j["profile_note"] = p.note;
      j["bottleneck"] = p.available ? htam::fb::EnumNameBottleneck(p.bottleneck) : "Unknown";
      j["dram_pct"] = p.dram_pct;
      j["sm_pct"] = p.sm_pct;
      j["occupancy_pct"] = p.occupancy_pct;
      j["profiled_kernels"] = p.kernels;
      j["profiled_us"] = p.total_us;
    }
    std::cout << j.dump() << std::endl;
  }
  api.device_close(device);
  backend->reset();
  std::error_code ec;
  fs::remove_all(work, ec);
  // Leave without atexit handlers: after a fault or a timeout the CUDA context is dead (or still
  // busy), and teardown code in the runtime or a candidate could block. A worker does the same.
  std::cout.flush();
  std::fflush(nullptr);
  _exit(worst);
}
