// Compile-only tests of the HIP backend, on a machine without any GPU: hipcc builds code objects
// for several AMD targets (checked in the offload bundle, also with clang-offload-bundler where it
// is installed), a broken kernel returns diagnostics naming its line, the cache keys on targets,
// the plugin describes itself as compile-only, and HIP on NVIDIA compiles through
// htam/hip_on_cuda.h.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backends/common/plugin_host.h"
#include "backends/hip/amd_runtime.h"
#include "backends/hip/code_object.h"
#include "backends/hip/hipcc_compiler.h"

namespace htam::hip {
namespace {

namespace fs = std::filesystem;

// A wavefront-size-aware row sum: warpSize is read, never written as 32 or 64.
const char* kGoodKernel = R"(#include <hip/hip_runtime.h>
#include <htam/kernel_abi.h>
__global__ void rowsum(const float* x, float* y, long n) {
  extern __shared__ float partial[];
  float s = 0.f;
  for (long j = threadIdx.x; j < n; j += blockDim.x) s += x[blockIdx.x * n + j];
  for (int o = warpSize / 2; o > 0; o >>= 1) s += __shfl_xor(s, o);
  if (threadIdx.x % warpSize == 0) partial[threadIdx.x / warpSize] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < (int)(blockDim.x / warpSize); ++w) t += partial[w];
    y[blockIdx.x] = t;
  }
}
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long m = in[0].shape[0], n = in[0].shape[1];
  int ws = 0;
  if (hipDeviceGetAttribute(&ws, hipDeviceAttributeWarpSize, 0) != hipSuccess) return 3;
  hipLaunchKernelGGL(rowsum, dim3(m), dim3(256), (256 / ws) * sizeof(float), (hipStream_t)stream,
                     (const float*)in[0].data, (float*)out[0].data, n);
  return hipGetLastError() == hipSuccess ? 0 : 2;
}
)";

// Line 5 uses an undeclared name.
const char* kBrokenKernel = R"(#include <hip/hip_runtime.h>
#include <htam/kernel_abi.h>
__global__ void k(float* y) {
  int i = threadIdx.x;
  y[i] = undeclared_value_xyz * 2.f;
}
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor*, int, htam_tensor* out, int, htam_stream s) {
  hipLaunchKernelGGL(k, dim3(1), dim3(64), 0, (hipStream_t)s, (float*)out[0].data);
  return 0;
}
)";

std::string Which(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates)
    if (access(c.c_str(), X_OK) == 0) return c;
  return "";
}

std::string Shell(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

class HipCompile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("htam-hip-compile-" + std::to_string(getpid())));
    fs::create_directories(*dir_ / "work");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  static HipccOptions Options(std::vector<std::string> targets) {
    HipccOptions o;
    o.sdk_include_dir = "sdk/include";
    o.cache_dir = (*dir_ / "cache").string();
    o.work_dir = (*dir_ / "work").string();
    o.targets = std::move(targets);
    return o;
  }
  // The MI300 target of this toolchain: gfx942 where it can be built, else gfx940 (LLVM 15).
  static std::string Mi300Target() {
    static std::string t;
    if (t.empty()) {
      auto c = HipccCompiler::Create(Options({"gfx942"}));
      t = c.ok() && c->EnsureProbed().ok() && !c->supported_targets().empty() ? "gfx942" : "gfx940";
    }
    return t;
  }
  static fs::path* dir_;
};
fs::path* HipCompile::dir_ = nullptr;

TEST(HipTargets, ParsesListsAndRejectsNonAmdNames) {
  auto t = ParseTargets("gfx90a, gfx942 gfx90a:xnack-");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, (std::vector<std::string>{"gfx90a", "gfx942", "gfx90a:xnack-"}));
  EXPECT_TRUE(ParseTargets("gfx1100 gfx908").ok());
  EXPECT_FALSE(ParseTargets("sm_90a").ok());
  EXPECT_FALSE(ParseTargets("gfx90a;rm -rf /").ok());
}

TEST(HipTargets, BundleIdsNameTheirProcessor) {
  EXPECT_EQ(BundleTarget("hipv4-amdgcn-amd-amdhsa--gfx90a"), "gfx90a");
  EXPECT_EQ(BundleTarget("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"), "gfx942");
  EXPECT_EQ(BundleTarget("host-x86_64-unknown-linux"), "");
  EXPECT_FALSE(ParseOffloadBundles("not a bundle").ok());
}

// A bundle as clang-offload-bundler writes it: magic, entry count, (offset, size, id length, id)*.
std::string Bundle(const std::vector<std::string>& ids) {
  std::string b = "__CLANG_OFFLOAD_BUNDLE__";
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  u64(ids.size());
  for (const auto& id : ids) {
    u64(0);
    u64(0);
    u64(id.size());
    b += id;
  }
  return b;
}

TEST(HipTargets, MalformedBundlesAreRejectedNotMisread) {
  auto ok = ParseOffloadBundles(
      "padding" + Bundle({"host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx90a"}));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 2u);
  std::string b = Bundle({"hipv4-amdgcn-amd-amdhsa--gfx942"});
  EXPECT_FALSE(ParseOffloadBundles(b.substr(0, b.size() - 3)).ok());  // id cut short
  EXPECT_FALSE(ParseOffloadBundles(b.substr(0, 30)).ok());            // count cut short
  std::string huge = "__CLANG_OFFLOAD_BUNDLE__";
  uint64_t n = 1ull << 40;
  huge.append(reinterpret_cast<const char*>(&n), 8);
  EXPECT_FALSE(ParseOffloadBundles(huge).ok());
  EXPECT_FALSE(ReadElfSection("configs/htamd.conf", ".hip_fatbin").ok());  // not an ELF file
}

TEST(HipRuntimeHelpers, ClocksAndTensorSpans) {
  EXPECT_EQ(ParseDpmClock("0: 500Mhz\n1: 800Mhz\n2: 1700Mhz *\n"), 1700);
  EXPECT_EQ(ParseDpmClock("0: 500Mhz\n"), -1);
  htam_tensor t{};
  t.dtype = HTAM_F32;
  t.ndim = 2;
  t.shape[0] = 3;
  t.shape[1] = 5;
  t.strides[0] = 8;  // padded rows
  t.strides[1] = 1;
  EXPECT_EQ(TensorSpanBytes(t), (2 * 8 + 4 + 1) * 4u);
  t.shape[0] = 0;
  EXPECT_EQ(TensorSpanBytes(t), 0u);
}

TEST_F(HipCompile, ToolchainReportsTargetsItCannotBuild) {
  auto c = HipccCompiler::Create(Options({"gfx90a", "gfx942"}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // Create runs no process (a describing worker starts at once); the probe comes when asked.
  EXPECT_FALSE(c->probed());
  ASSERT_TRUE(c->EnsureProbed().ok());
  const auto sup = c->supported_targets();
  const auto uns = c->unsupported_targets();
  EXPECT_NE(c->version().find("HIP version"), std::string::npos) << c->version();
  // Remembered in the cache: the next process with the same hipcc and targets knows at once.
  auto again = HipccCompiler::Create(Options({"gfx90a", "gfx942"}));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->probed());
  EXPECT_EQ(again->unsupported_targets(), uns);
  EXPECT_EQ(again->version(), c->version());
  EXPECT_NE(std::find(sup.begin(), sup.end(), "gfx90a"), sup.end());
  // Every configured target is classified one way or the other.
  EXPECT_EQ(sup.size() + uns.size(), 2u);
  if (!uns.empty()) {
    EXPECT_EQ(uns, std::vector<std::string>{"gfx942"});
    auto out = c->Compile(kGoodKernel, {"gfx942"}, "", "only942", 0);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("cannot generate code for gfx942"), std::string::npos);
  }
}

TEST_F(HipCompile, GoodKernelHoldsCodeForEveryTarget) {
  const std::string mi300 = Mi300Target();
  auto c = HipccCompiler::Create(Options({"gfx90a", mi300}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto out = c->Compile(kGoodKernel, {}, "", "good", 0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(out->ok) << out->diagnostics;
  EXPECT_FALSE(out->from_cache);
  EXPECT_EQ(out->targets, (std::vector<std::string>{"gfx90a", mi300}));

  // Our reader agrees with clang-offload-bundler on the code object.
  auto found = CodeObjectTargets(out->so_path);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, out->targets);
  std::string bundler = Which({"/usr/lib/llvm-15/bin/clang-offload-bundler",
                               "/usr/lib/llvm-14/bin/clang-offload-bundler",
                               "/opt/rocm/llvm/bin/clang-offload-bundler"});
  if (!bundler.empty()) {
    std::string fat = (*dir_ / "work" / "fatbin.bin").string();
    int rc = -1;
    std::string o =
        Shell("objcopy -O binary --only-section=.hip_fatbin " + out->so_path + " " + fat, &rc);
    ASSERT_EQ(rc, 0) << o;
    o = Shell(bundler + " --list --type=o --input=" + fat, &rc);
    ASSERT_EQ(rc, 0) << o;
    EXPECT_NE(o.find("amdgcn-amd-amdhsa--gfx90a"), std::string::npos) << o;
    EXPECT_NE(o.find("amdgcn-amd-amdhsa--" + mi300), std::string::npos) << o;
  }
  // The entry point is exported (the loader resolves it by name).
  int rc = -1;
  std::string syms = Shell("nm -D --defined-only " + out->so_path, &rc);
  EXPECT_NE(syms.find(" T htam_kernel"), std::string::npos) << syms;

  // Same source, flags and targets: served from the cache. Other targets: another entry.
  auto again = c->Compile(kGoodKernel, {}, "", "good", 0);
  ASSERT_TRUE(again.ok() && again->ok);
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->hash, out->hash);
  EXPECT_EQ(again->targets, out->targets);
  auto one = c->Compile(kGoodKernel, {"gfx90a"}, "", "good", 0);
  ASSERT_TRUE(one.ok() && one->ok) << (one.ok() ? one->diagnostics : one.status().ToString());
  EXPECT_NE(one->hash, out->hash);
  EXPECT_EQ(one->targets, std::vector<std::string>{"gfx90a"});
}

TEST_F(HipCompile, BrokenKernelDiagnosticsNameTheLine) {
  auto c = HipccCompiler::Create(Options({"gfx90a"}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto out = c->Compile(kBrokenKernel, {}, "", "broken", 0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->ok);
  EXPECT_NE(out->diagnostics.find("candidate.hip:5:"), std::string::npos) << out->diagnostics;
  EXPECT_NE(out->diagnostics.find("undeclared_value_xyz"), std::string::npos) << out->diagnostics;
  // Temp-dir paths are trimmed: the agent sees only the file name.
  EXPECT_EQ(out->diagnostics.find((*dir_ / "work").string()), std::string::npos)
      << out->diagnostics;
}

TEST(HipAmdRuntime, LoadsWithoutGpuAndSaysWhyItCannotRun) {
  auto rt = AmdRuntime::Load("libamdhip64.so.5");
  if (!rt.ok()) GTEST_SKIP() << "no HIP runtime library here: " << rt.status().ToString();
  std::string why;
  auto devices = (*rt)->Probe(&why);
  if (!devices.empty()) GTEST_SKIP() << "an AMD GPU is present";
  EXPECT_NE(why.find("hipGetDeviceCount"), std::string::npos) << why;
  EXPECT_FALSE(AmdRuntime::Load("libhtam-no-such-runtime.so").ok());
}

// ---- the plugin through the host-side loader ---------------------------------------------------

class HipPlugin : public HipCompile {
 protected:
  std::unique_ptr<BackendInstance> Make(std::vector<std::string> options, Status* st) {
    if (!lib_) {
      auto lib = PluginLibrary::Open(HTAM_HIP_PLUGIN_PATH);
      EXPECT_TRUE(lib.ok()) << lib.status().ToString();
      if (!lib.ok()) return nullptr;
      lib_ = std::move(lib).value();
    }
    HostOptions h;
    h.sdk_include_dir = fs::absolute("sdk/include").string();
    h.cache_dir = (*dir_ / "cache").string();
    h.work_dir = (*dir_ / "work").string();
    h.options = std::move(options);
    auto b = BackendInstance::Create(lib_->api(), h);
    *st = b.ok() ? Status::OK() : b.status();
    return b.ok() ? std::move(b).value() : nullptr;
  }
  Status Compile(BackendInstance* b, const std::string& src, const char* arch, int32_t* code,
                 htam_artifact** out) {
    htam_compile_request req{};
    req.struct_size = sizeof req;
    req.source = src.data();
    req.source_len = src.size();
    req.language = "hip";
    req.arch = arch;
    req.name = "t";
    return ConsumeError(b->api().compile(b->handle(), &req, out), "compile", code);
  }
  std::unique_ptr<PluginLibrary> lib_;
};

TEST_F(HipPlugin, DescribesItselfAsCompileOnlyWithoutAnAmdGpu) {
  Status st;
  auto b = Make({"platform=amd", "offload_archs=gfx90a " + Mi300Target()}, &st);
  ASSERT_TRUE(b) << st.ToString();
  const htam_backend_description& d = b->description();
  EXPECT_STREQ(d.name, "hip");
  EXPECT_STREQ(d.language, "hip");
  EXPECT_STREQ(d.source_suffix, ".hip");
  auto rt = AmdRuntime::Load("libamdhip64.so.5");
  std::string why;
  if (rt.ok() && !(*rt)->Probe(&why).empty()) GTEST_SKIP() << "an AMD GPU is present";
  EXPECT_EQ(d.can_run, 0);
  std::string notes = d.notes;
  EXPECT_NE(notes.find("cannot run here"), std::string::npos) << notes;
  EXPECT_NE(notes.find("never run on an AMD GPU"), std::string::npos) << notes;
  htam_device* dev = nullptr;
  int32_t code = 0;
  st = ConsumeError(b->api().device_open(b->handle(), 0, &dev), "open", &code);
  EXPECT_EQ(code, HTAM_ERR_UNAVAILABLE) << st.ToString();
}

TEST_F(HipPlugin, CompilesForAmdAndReturnsDiagnosticsVerbatim) {
  Status st;
  auto b = Make({"platform=amd", "offload_archs=gfx90a"}, &st);
  ASSERT_TRUE(b) << st.ToString();
  htam_artifact* a = nullptr;
  int32_t code = 0;
  st = Compile(b.get(), kGoodKernel, nullptr, &code, &a);
  ASSERT_TRUE(st.ok()) << st.ToString();
  htam_artifact_info info{};
  info.struct_size = sizeof info;
  ASSERT_TRUE(ConsumeError(b->api().artifact_info(a, &info), "info").ok());
  EXPECT_EQ(std::string(info.content_hash).size(), 64u);
  auto targets = CodeObjectTargets(info.path);
  ASSERT_TRUE(targets.ok()) << targets.status().ToString();
  EXPECT_EQ(*targets, std::vector<std::string>{"gfx90a"});
  b->api().artifact_release(a);

  a = nullptr;
  st = Compile(b.get(), kBrokenKernel, nullptr, &code, &a);
  EXPECT_EQ(code, HTAM_ERR_COMPILE);
  EXPECT_NE(st.message().find("candidate.hip:5:"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("error:"), std::string::npos) << st.ToString();

  st = Compile(b.get(), kGoodKernel, "sm_90a", &code, &a);
  EXPECT_EQ(code, HTAM_ERR_INVALID_ARGUMENT) << st.ToString();
}

TEST_F(HipPlugin, OnNvidiaHipCompilesWithNvccThroughTheCompatLayer) {
  if (!HTAM_HIP_HAVE_CUDA_PLUGIN) GTEST_SKIP() << "CUDA backend not built";
  Status st;
  auto b = Make({"platform=nvidia"}, &st);
  ASSERT_TRUE(b) << st.ToString();
  EXPECT_NE(std::string(b->description().notes).find("hip_on_cuda.h"), std::string::npos);
  htam_artifact* a = nullptr;
  int32_t code = 0;
  st = Compile(b.get(), kGoodKernel, "sm_90a", &code, &a);
  ASSERT_TRUE(st.ok()) << st.ToString();
  b->api().artifact_release(a);
  // nvcc's diagnostics name the line too (the shim include does not shift lines).
  st = Compile(b.get(), kBrokenKernel, "sm_90a", &code, &a);
  EXPECT_EQ(code, HTAM_ERR_COMPILE) << st.ToString();
  EXPECT_NE(st.message().find("(5)"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("undeclared_value_xyz"), std::string::npos) << st.ToString();
  st = Compile(b.get(), kGoodKernel, "gfx90a", &code, &a);
  EXPECT_EQ(code, HTAM_ERR_INVALID_ARGUMENT) << st.ToString();
}

}  // namespace
}  // namespace htam::hip
