// Every HIP source of the task suite (configs/tasks/*/reference.hip, variants/hip/*.hip) compiles
// for AMD (hipcc, gfx90a) and for NVIDIA (nvcc through htam/hip_on_cuda.h), through the plugin,
// on a machine without any GPU. Label slow: one compiler run per file and platform.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/common/plugin_host.h"

namespace htam {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> TaskSources() {
  std::vector<fs::path> out;
  for (const auto& task : fs::directory_iterator("configs/tasks")) {
    if (fs::exists(task.path() / "reference.hip")) out.push_back(task.path() / "reference.hip");
    fs::path v = task.path() / "variants" / "hip";
    if (!fs::is_directory(v)) continue;
    for (const auto& f : fs::directory_iterator(v))
      if (f.path().extension() == ".hip") out.push_back(f.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void CompileAll(const std::vector<std::string>& options, const char* arch) {
  auto lib = PluginLibrary::Open(HTAM_HIP_PLUGIN_PATH);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  fs::path dir = fs::temp_directory_path() / ("htam-hip-sources-" + std::to_string(getpid()));
  fs::create_directories(dir / "work");
  HostOptions h;
  h.sdk_include_dir = fs::absolute("sdk/include").string();
  h.cache_dir = (dir / "cache").string();
  h.work_dir = (dir / "work").string();
  h.options = options;
  auto b = BackendInstance::Create((*lib)->api(), h);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto sources = TaskSources();
  EXPECT_GE(sources.size(), 8u);
  for (const auto& p : sources) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string src = ss.str();
    htam_compile_request req{};
    req.struct_size = sizeof req;
    req.source = src.data();
    req.source_len = src.size();
    req.language = "hip";
    req.arch = arch;
    req.name = "task_source";
    htam_artifact* a = nullptr;
    Status st = ConsumeError((*b)->api().compile((*b)->handle(), &req, &a), "compile");
    EXPECT_TRUE(st.ok()) << p << ": " << st.ToString();
    if (a) (*b)->api().artifact_release(a);
  }
  b->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(HipTaskSources, CompileForAmd) {
  CompileAll({"hip_platform=amd", "hip_offload_archs=gfx90a"}, nullptr);
}

TEST(HipTaskSources, CompileForNvidiaThroughTheCompatLayer) {
  if (!HTAM_HIP_HAVE_CUDA_PLUGIN) GTEST_SKIP() << "CUDA backend not built";
  CompileAll({"hip_platform=nvidia"}, "sm_90a");
}

}  // namespace
}  // namespace htam
