// The compile side of the CUDA backend without a GPU: hashing, ptxas report parsing, diagnostics
// trimming, real nvcc compiles (success, error, cache, timeout).
#include "backends/cuda/nvcc_compiler.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/hash.h"

namespace htam::cuda {
namespace {

const char* kRelu = R"(#include <htam/kernel_abi.h>
__global__ void relu(const float* x, float* y, long n) {
  __shared__ float tile[256];
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) y[i] = tile[threadIdx.x] > 0.f ? tile[threadIdx.x] : 0.f;
}
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  long n = htam_numel(&in[0]);
  relu<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>((const float*)in[0].data,
                                                          (float*)out[0].data, n);
  return 0;
}
)";

// A lean-ABI sgemm through cuBLAS (row-major C = A B as column-major C^T = B^T A^T).
const char* kSgemmBody = R"(#include <htam/kernel_abi.h>
#include <cublas_v2.h>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  static cublasHandle_t h = nullptr;
  if (!h && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(h, (cudaStream_t)stream);
  cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
  int m = (int)in[0].shape[0], k = (int)in[0].shape[1], n = (int)in[1].shape[1];
  const float one = 1.f, zero = 0.f;
  return cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const float*)in[1].data, n,
                     (const float*)in[0].data, k, &zero, (float*)out[0].data, n) != 0;
}
)";

TEST(LinkDirectives, ParsesLibraryNames) {
  auto d = ParseLinkDirectives(
      "#include <x.h>\n// htam: link cublas cublasLt\n  //htam: link cudnn, cublas\nint x;\n");
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.libraries, (std::vector<std::string>{"cublas", "cublasLt", "cudnn"}));
  EXPECT_TRUE(ParseLinkDirectives("// link cublas (not a directive)\n").libraries.empty());
  d = ParseLinkDirectives("\n// htam: link cublas mkl\n");
  EXPECT_NE(d.error.find("line 2: unknown library 'mkl' (known: cublas cublasLt cudnn"),
            std::string::npos)
      << d.error;
  EXPECT_NE(ParseLinkDirectives("// htam: link\n").error.find("names no library"),
            std::string::npos);
  EXPECT_NE(ParseLinkDirectives("// htam: linkk cublas\n").error.find("unknown directive"),
            std::string::npos);
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(NvccFlags, GencodeForArchSpecificTargets) {
  EXPECT_EQ(*GencodeFlag("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_EQ(*GencodeFlag("sm_80"), "-gencode=arch=compute_80,code=sm_80");
  EXPECT_FALSE(GencodeFlag("sm_90; rm -rf /").ok());
  EXPECT_FALSE(GencodeFlag("gfx90a").ok());
}

TEST(PtxasInfo, ParsesResourcesPerKernel) {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1av' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1av\n"
      "    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z1bv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1bv\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 0 barriers, 356 bytes cmem[0]\n";
  auto k = ParsePtxasInfo(log);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name, "_Z1av");
  EXPECT_EQ(k[0].registers, 40);
  EXPECT_EQ(k[0].shared_bytes, 2048);
  EXPECT_EQ(k[0].spill_bytes, 20);
  EXPECT_EQ(k[0].stack_bytes, 16);
  EXPECT_EQ(k[1].registers, 10);
  EXPECT_EQ(k[1].shared_bytes, 0);
  std::string trimmed =
      TrimDiagnostics(std::string(log) + "/tmp/x/candidate.cu(3): error: oops\n", "/tmp/x", 4096);
  EXPECT_EQ(trimmed, "candidate.cu(3): error: oops\n");
  std::string big(100000, 'e');
  EXPECT_LE(TrimDiagnostics(big, "", 1000).size(), 1100u);
}

class NvccTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("htam-nvcc-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / "work");
    CompilerOptions o;
    o.sdk_include_dir = "sdk/include";
    o.cache_dir = (dir_ / "cache").string();
    o.work_dir = (dir_ / "work").string();
    auto c = NvccCompiler::Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    compiler_.emplace(std::move(c).value());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path dir_;
  std::optional<NvccCompiler> compiler_;
};

TEST_F(NvccTest, CompilesLoadableObjectWithResourcesAndCaches) {
  auto r = compiler_->Compile(kRelu, "sm_90a", "", "relu", 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->ok) << r->diagnostics;
  EXPECT_FALSE(r->from_cache);
  ASSERT_EQ(r->kernels.size(), 1u);
  EXPECT_GT(r->MaxRegisters(), 0);
  EXPECT_EQ(r->MaxSharedBytes(), 1024);
  EXPECT_EQ(r->TotalSpillBytes(), 0);
  // The artifact is a shared object exporting htam_kernel (loads without a GPU).
  void* h = dlopen(r->so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_NE(dlsym(h, "htam_kernel"), nullptr);
  EXPECT_EQ(dlsym(h, "_Z4reluPKfPfl"), nullptr) << "host stubs should be hidden";
  dlclose(h);
  // Same source, flags and arch: served from the cache with the same resources.
  auto again = compiler_->Compile(kRelu, "sm_90a", "", "relu", 0);
  ASSERT_TRUE(again.ok() && again->ok);
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->hash, r->hash);
  EXPECT_EQ(again->MaxRegisters(), r->MaxRegisters());
  // Different flags: a different key.
  auto other = compiler_->Compile(kRelu, "sm_90a", "-DX=1", "relu", 0);
  ASSERT_TRUE(other.ok() && other->ok);
  EXPECT_NE(other->hash, r->hash);
  EXPECT_FALSE(other->from_cache);
}

TEST_F(NvccTest, CublasCandidateLinksWhatItDeclares) {
  std::string src = std::string("// htam: link cublas\n") + kSgemmBody;
  auto r = compiler_->Compile(src, "sm_90a", "", "sgemm", 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  if (!r->ok && r->diagnostics.find("not installed on this host") != std::string::npos) {
    GTEST_SKIP() << r->diagnostics;  // a toolkit without cuBLAS
  }
  ASSERT_TRUE(r->ok) << r->diagnostics;
  // Without the directive the object builds but does not load: the reported failure.
  auto bare = compiler_->Compile(kSgemmBody, "sm_90a", "", "sgemm", 0);
  ASSERT_TRUE(bare.ok() && bare->ok) << (bare.ok() ? bare->diagnostics : "");
  void* h = dlopen(bare->so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_EQ(h, nullptr);
  EXPECT_NE(std::string(dlerror()).find("undefined symbol: cublas"), std::string::npos);
  // Declared: linked against the toolkit's cuBLAS, with a runpath, so it loads as is.
  h = dlopen(r->so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_NE(dlsym(h, "htam_kernel"), nullptr);
  EXPECT_NE(dlsym(h, "cublasSgemm_v2"), nullptr) << "cublasSgemm resolves through the candidate";
  dlclose(h);
  // A task that allows cuBLAS compiles it too (the same artifact: the policy word is not a flag).
  auto allowed = compiler_->Compile(src, "sm_90a", "--htam-libraries=cublas,cublasLt", "s", 0);
  ASSERT_TRUE(allowed.ok() && allowed->ok);
  EXPECT_TRUE(allowed->from_cache);
}

TEST_F(NvccTest, TaskThatForbidsLibrariesRefusesTheCandidate) {
  std::string src = std::string("// htam: link cublas\n") + kSgemmBody;
  auto built = compiler_->Compile(src, "sm_90a", "", "sgemm", 0);  // now in the cache, if any
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto r = compiler_->Compile(src, "sm_90a", "--htam-libraries=", "sgemm", 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ok) << "a cached build must not bypass the task's policy";
  EXPECT_EQ(r->diagnostics,
            "candidate.cu: links cublas ('// htam: link cublas'), which this task does not allow "
            "(libraries allowed: none)");
  r = compiler_->Compile(src, "sm_90a", "--htam-libraries=cudnn -DX=1", "sgemm", 0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_NE(r->diagnostics.find("(libraries allowed: cudnn)"), std::string::npos);
  // Two policy words (host-wide and per task): only what both allow.
  r = compiler_->Compile(src, "sm_90a", "--htam-libraries=cublas,cudnn --htam-libraries=cudnn",
                         "sgemm", 0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  r = compiler_->Compile("// htam: link mkl\n" + std::string(kRelu), "sm_90a", "", "r", 0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  EXPECT_NE(r->diagnostics.find("unknown library 'mkl'"), std::string::npos) << r->diagnostics;
}

TEST_F(NvccTest, CudnnAndCutlassWhereInstalled) {
  const char* cudnn = R"(// htam: link cudnn
#include <htam/kernel_abi.h>
#include <cudnn.h>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  return cudnnGetVersion() > 0 ? 0 : 1;
}
)";
  auto r = compiler_->Compile(cudnn, "sm_90a", "", "cudnn", 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  if (!r->ok && r->diagnostics.find("not installed on this host") != std::string::npos) {
    GTEST_SKIP() << r->diagnostics;
  }
  ASSERT_TRUE(r->ok) << r->diagnostics;
  void* h = dlopen(r->so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_NE(dlsym(h, "cudnnGetVersion"), nullptr);
  dlclose(h);
  // CUTLASS is header-only: an include path where the toolkit or a package has it, else a clear
  // refusal.
  r = compiler_->Compile(
      "// htam: link cutlass\n#include <cutlass/cutlass.h>\n" + std::string(kRelu), "sm_90a", "",
      "cutlass", 0);
  ASSERT_TRUE(r.ok());
  if (!r->ok) {
    EXPECT_NE(r->diagnostics.find("links cutlass, which is not installed on this host"),
              std::string::npos)
        << r->diagnostics;
  }
}

TEST_F(NvccTest, CompileErrorIsAnOutcomeWithDiagnostics) {
  auto r = compiler_->Compile("#include <htam/kernel_abi.h>\n__global__ void k() { int x = ; }\n",
                              "sm_90a", "", "bad", 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ok);
  EXPECT_NE(r->diagnostics.find("candidate.cu(2): error"), std::string::npos) << r->diagnostics;
}

TEST_F(NvccTest, TimeoutKillsTheToolchain) {
  auto r = compiler_->Compile(kRelu, "sm_90a", "-DTIMEOUT_CASE", "slow", 0.05);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kTimeout);
  // Nothing left behind in the work dir.
  EXPECT_TRUE(std::filesystem::is_empty(dir_ / "work"));
}

}  // namespace
}  // namespace htam::cuda
