// The CUDA plugin through its C ABI, as the host loads it: exported symbols, version check,
// describe, compile (real nvcc), compile errors. Runs without a GPU (compile-only checks); the
// runtime checks live in tests/gpu.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "htam/backend.h"

namespace {

struct Plugin {
  void* h = nullptr;
  template <typename F>
  F Get(const char* name) {
    return reinterpret_cast<F>(dlsym(h, name));
  }
};

class CudaPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    p_.h = dlopen(HTAM_CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(p_.h, nullptr) << dlerror();
    dir_ =
        std::filesystem::temp_directory_path() / ("htam-cuda-plugin-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / "cache");
    std::filesystem::create_directories(dir_ / "work");
  }
  void TearDown() override {
    if (backend_) p_.Get<htam_backend_finalize_fn>("htam_backend_finalize")(backend_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    if (p_.h) dlclose(p_.h);
  }
  htam_backend_error* Init(uint32_t major, uint32_t minor) {
    cache_ = (dir_ / "cache").string();
    work_ = (dir_ / "work").string();
    htam_backend_host host{};
    host.struct_size = sizeof host;
    host.api_major = major;
    host.api_minor = minor;
    host.sdk_include_dir = "sdk/include";
    host.cache_dir = cache_.c_str();
    host.work_dir = work_.c_str();
    static const char* opts[] = {"cuda_nvcc_flags=-O3", nullptr};
    host.options = opts;
    return p_.Get<htam_backend_initialize_fn>("htam_backend_initialize")(&host, &backend_);
  }
  htam_backend_error* Compile(const std::string& src, htam_artifact** out) {
    htam_compile_request req{};
    req.struct_size = sizeof req;
    req.source = src.data();
    req.source_len = src.size();
    req.language = "cuda";
    req.arch = "sm_90a";
    req.name = "test";
    return p_.Get<htam_backend_compile_fn>("htam_backend_compile")(backend_, &req, out);
  }
  Plugin p_;
  std::filesystem::path dir_;
  std::string cache_, work_;
  htam_backend* backend_ = nullptr;
};

const char* kRelu = R"(#include <htam/kernel_abi.h>
__global__ void relu(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  relu<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                          (float*)out[0].data, n);
  return 0;
}
)";

TEST_F(CudaPluginTest, ExportsOnlyTheAbi) {
  for (const char* name : {HTAM_BACKEND_REQUIRED_SYMBOLS, HTAM_BACKEND_OPTIONAL_SYMBOLS}) {
    EXPECT_NE(dlsym(p_.h, name), nullptr) << name;
  }
  EXPECT_NE(dlsym(p_.h, "htam_backend_device_roofline"), nullptr);
  // Internal C++ symbols stay hidden (version script).
  EXPECT_EQ(dlsym(p_.h, "_ZN4htam4cuda17ClassifyCudaErrorE9cudaError"), nullptr);
}

// The profiler entry points (API 1.3) through the loaded plugin, on ncu output captured in
// ncu's CSV layout (backends/cuda/testdata): no GPU and no ncu needed.
TEST_F(CudaPluginTest, ProfileParseReadsCapturedNcuOutput) {
  ASSERT_EQ(Init(HTAM_BACKEND_API_VERSION_MAJOR, HTAM_BACKEND_API_VERSION_MINOR), nullptr);
  auto parse = p_.Get<htam_backend_profile_parse_fn>("htam_backend_profile_parse");
  auto command = p_.Get<htam_backend_profile_command_fn>("htam_backend_profile_command");
  ASSERT_NE(parse, nullptr);
  ASSERT_NE(command, nullptr);
  std::ifstream f("backends/cuda/testdata/ncu_two_kernels.csv");
  ASSERT_TRUE(bool(f));
  std::string csv((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  htam_profile_output in{};
  in.struct_size = sizeof in;
  in.text = csv.data();
  in.text_len = csv.size();
  in.memory_pct = in.compute_pct = in.launch_us = -1;
  htam_profile_summary out{};
  out.struct_size = sizeof out;
  ASSERT_EQ(parse(backend_, &in, &out), nullptr);
  EXPECT_EQ(out.kernels, 2);
  EXPECT_NEAR(out.total_us, 1230.0, 1e-9);
  EXPECT_NEAR(out.sm_pct, (1200 * 84.1 + 30 * 20.0) / 1230, 1e-9);
  EXPECT_EQ(out.bottleneck, HTAM_BOTTLENECK_COMPUTE);
  EXPECT_STREQ(out.note, "ncu: Compute-bound");
  // A configured ncu that does not exist: unavailable, the message names it.
  htam_profile_command_request req{};
  req.struct_size = sizeof req;
  req.tool = "/nonexistent/ncu";
  htam_profile_command cmd{};
  cmd.struct_size = sizeof cmd;
  htam_backend_error* e = command(backend_, &req, &cmd);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_UNAVAILABLE);
  EXPECT_NE(std::string(e->message).find("/nonexistent/ncu is not an executable file"),
            std::string::npos)
      << e->message;
  htam_backend_error_free(e);
}

TEST_F(CudaPluginTest, RefusesAnotherMajorOrOlderMinor) {
  htam_backend_error* e = Init(HTAM_BACKEND_API_VERSION_MAJOR + 1, 0);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_VERSION);
  EXPECT_NE(std::string(e->message).find("cuda backend built for API"), std::string::npos);
  EXPECT_NE(std::string(e->message).find("host offers"), std::string::npos);
  htam_backend_error_free(e);
  EXPECT_EQ(backend_, nullptr);
}

TEST_F(CudaPluginTest, DescribesItself) {
  ASSERT_EQ(Init(HTAM_BACKEND_API_VERSION_MAJOR, HTAM_BACKEND_API_VERSION_MINOR), nullptr);
  htam_backend_description d{};
  d.struct_size = sizeof d;
  ASSERT_EQ(p_.Get<htam_backend_describe_fn>("htam_backend_describe")(backend_, &d), nullptr);
  EXPECT_STREQ(d.name, "cuda");
  EXPECT_STREQ(d.language, "cuda");
  EXPECT_STREQ(d.source_suffix, ".cu");
  EXPECT_NE(std::string(d.version).find("nvcc"), std::string::npos) << d.version;
  EXPECT_EQ(d.can_run != 0, d.num_devices > 0);
  if (d.num_devices == 0) {
    htam_device* dev = nullptr;
    htam_backend_error* e =
        p_.Get<htam_backend_device_open_fn>("htam_backend_device_open")(backend_, 0, &dev);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->code, HTAM_ERR_UNAVAILABLE);
    htam_backend_error_free(e);
  }
}

TEST_F(CudaPluginTest, CompilesAndCaches) {
  ASSERT_EQ(Init(HTAM_BACKEND_API_VERSION_MAJOR, HTAM_BACKEND_API_VERSION_MINOR), nullptr);
  auto info = p_.Get<htam_backend_artifact_info_fn>("htam_backend_artifact_info");
  auto release = p_.Get<htam_backend_artifact_release_fn>("htam_backend_artifact_release");
  htam_artifact* a = nullptr;
  htam_backend_error* e = Compile(kRelu, &a);
  ASSERT_EQ(e, nullptr) << e->message;
  htam_artifact_info ai{};
  ai.struct_size = sizeof ai;
  ASSERT_EQ(info(a, &ai), nullptr);
  EXPECT_TRUE(std::filesystem::exists(ai.path)) << ai.path;
  EXPECT_EQ(std::string(ai.content_hash).size(), 64u);
  EXPECT_EQ(ai.from_cache, 0);
  EXPECT_GT(ai.compile_ms, 0);
  std::string first_hash = ai.content_hash;
  release(a);

  ASSERT_EQ(Compile(kRelu, &a), nullptr);
  ASSERT_EQ(info(a, &ai), nullptr);
  EXPECT_EQ(ai.from_cache, 1);
  EXPECT_EQ(first_hash, ai.content_hash);
  release(a);
}

TEST_F(CudaPluginTest, CompileErrorCarriesDiagnostics) {
  ASSERT_EQ(Init(HTAM_BACKEND_API_VERSION_MAJOR, HTAM_BACKEND_API_VERSION_MINOR), nullptr);
  htam_artifact* a = nullptr;
  htam_backend_error* e =
      Compile(std::string(kRelu) + "\nint broken( { return undeclared_name; }\n", &a);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_COMPILE);
  std::string msg = e->message;
  EXPECT_NE(msg.find("error"), std::string::npos) << msg;
  EXPECT_NE(msg.find("candidate.cu"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(work_), std::string::npos) << "temp paths leak into diagnostics: " << msg;
  htam_backend_error_free(e);
}

TEST_F(CudaPluginTest, RejectsOtherLanguages) {
  ASSERT_EQ(Init(HTAM_BACKEND_API_VERSION_MAJOR, HTAM_BACKEND_API_VERSION_MINOR), nullptr);
  htam_compile_request req{};
  req.struct_size = sizeof req;
  req.source = "int x;";
  req.source_len = 6;
  req.language = "hip";
  htam_artifact* a = nullptr;
  htam_backend_error* e =
      p_.Get<htam_backend_compile_fn>("htam_backend_compile")(backend_, &req, &a);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_INVALID_ARGUMENT);
  htam_backend_error_free(e);
}

}  // namespace
