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

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::string cache, list, arch = "sm_90a", nvcc = "nvcc", flags = "-O3", sdk = "sdk/include";
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--cache") cache = v;
    else if (k == "--list") list = v;
    else if (k == "--arch") arch = v;
    else if (k == "--nvcc") nvcc = v;
    else if (k == "--flags") flags = v;
    else if (k == "--sdk-include") sdk = v;
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else {
      std::cerr << "htam-world-compile: unknown argument " << k << "\n";
      return 2;
    }
  }
  if (cache.empty() || list.empty() || threads < 1) {
    std::cerr << "usage: htam-world-compile --cache DIR --list FILE [--arch sm_90a] [--threads N]"
                 " [--nvcc nvcc] [--flags -O3] [--sdk-include DIR]\n";
    return 2;
  }
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
