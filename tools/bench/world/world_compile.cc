// htam-world-compile: compiles many CUDA candidate sources ahead of evaluation, on every core,
// into the compile cache that the CUDA plugin reads under htam-eval (same compiler options as
// the plugin's compile pool), so that the gate's compiles are cache hits. Prints one JSON
// object per source: {"source", "ok", "cached", "compile_ms", "registers", "shared_bytes",
// "spill_bytes", "diagnostics"}.
//   htam-world-compile --cache DIR --list FILE [--arch sm_90a] [--threads N] [--nvcc nvcc]
//                      [--flags -O3] [--sdk-include DIR]
// FILE holds one source path per line. Used by `htam-bench world build`.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/compile_pool.h"
#include "base/file.h"
#include "tools/bench/args.h"

namespace fs = std::filesystem;

namespace {

const char kUsage[] =
    "usage: htam-world-compile --cache DIR --list FILE [options]\n"
    "Compiles every source FILE lists (one path a line) into the CUDA plugin's compile cache,\n"
    "on every core, and prints one JSON object per source.";

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string cache, list, arch = "sm_90a", nvcc = "nvcc", flags = "-O3", sdk = "sdk/include";
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  htam::bench::Count threads_n{cores};
  po::options_description d;
  auto add = d.add_options();
  add("cache", po::value(&cache)->required()->value_name("DIR"),
      "the compile cache (the CUDA plugin's eval.cache_dir)");
  add("list", po::value(&list)->required()->value_name("FILE"), "one source path per line");
  add("arch", po::value(&arch)->default_value(arch)->value_name("SM"), "the target architecture");
  add("threads",
      po::value(&threads_n)
          ->default_value(threads_n, std::to_string(cores) + ": the cores")
          ->value_name("N"),
      "compiles at once");
  add("nvcc", po::value(&nvcc)->default_value(nvcc)->value_name("PATH"), "the compiler");
  add("flags", po::value(&flags)->default_value(flags)->value_name("F"),
      "compiler options (as the plugin's; a value starting with - is taken as is)");
  add("sdk-include", po::value(&sdk)->default_value(sdk)->value_name("DIR"),
      "the SDK's include folder (htam/kernel.h)");
  po::variables_map vm;
  const int exit_now = htam::bench::ParseArgs("htam-world-compile", kUsage,
                                              std::vector<std::string>(argv + 1, argv + argc), d,
                                              po::options_description(), &vm);
  if (exit_now >= 0) return exit_now;
  if (cache.empty() || list.empty()) {
    std::cerr << "htam-world-compile: --cache and --list need a value\n";
    return 2;
  }
  if (threads_n.n < 1 || threads_n.n > 4096) {
    std::cerr << "htam-world-compile: --threads needs 1 to 4096, not " << threads_n.n << "\n";
    return 2;
  }
  const int threads = static_cast<int>(threads_n.n);
  std::vector<std::string> paths;
  {
    std::ifstream in(list);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) paths.push_back(line);
  }
  htam::cuda::CompilerOptions co;
  co.nvcc = nvcc;
  co.flags = flags;
  co.sdk_include_dir = fs::absolute(sdk).string();
  co.cache_dir = fs::absolute(cache).string();
  co.work_dir = fs::temp_directory_path() / ("htam-world-compile-" + std::to_string(getpid()));
  fs::create_directories(co.work_dir);
  auto compiler = htam::cuda::NvccCompiler::Create(co);
  if (!compiler.ok()) {
    std::cerr << "htam-world-compile: " << compiler.status().ToString() << "\n";
    return 3;
  }
  htam::cuda::CompilePool pool(*compiler, threads);
  std::vector<std::shared_future<htam::Result<htam::cuda::CompileOutput>>> pending;
  for (const auto& p : paths) {
    std::string src;
    if (!htam::ReadWholeFile(p, &src)) src.clear();
    pending.push_back(pool.Submit(src, arch, ""));  // extra flags "" as the gate's default
  }
  int failed = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    const auto& r = pending[i].get();
    nlohmann::json j = {{"source", paths[i]}};
    if (!r.ok()) {
      j["ok"] = false;
      j["diagnostics"] = r.status().ToString();
      ++failed;
    } else {
      j["ok"] = r->ok;
      j["cached"] = r->from_cache;
      j["compile_ms"] = r->compile_ms;
      j["registers"] = r->MaxRegisters();
      j["shared_bytes"] = r->MaxSharedBytes();
      j["spill_bytes"] = r->TotalSpillBytes();
      j["diagnostics"] = r->ok ? "" : r->diagnostics;
      failed += r->ok ? 0 : 1;
    }
    std::cout << j.dump() << std::endl;
  }
  std::error_code ec;
  fs::remove_all(co.work_dir, ec);
  std::cerr << "htam-world-compile: " << paths.size() << " sources, " << failed
            << " did not compile\n";
  return 0;
}
