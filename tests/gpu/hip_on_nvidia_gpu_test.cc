// The HIP backend on an NVIDIA GPU (platform nvidia): HIP candidates compiled by nvcc through
// htam/hip_on_cuda.h, run and timed on the CUDA backend's runtime path. In process through the
// host-side loader (describe, buffers, a wavefront-aware shuffle reduction checked against the
// host, the timing protocol, a device fault), then the real gate through htam-eval over every
// task's reference.hip and the HIP variants of rowsum. Skipped where no CUDA device is present.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/common/plugin_host.h"
#include "base/file.h"
#include "daemon/eval/gate/stats.h"
#include "tests/gpu/gpu_test_util.h"

namespace htam {
namespace {

namespace fs = std::filesystem;

std::string HipPluginPath() {
  return gputest::PathFromEnv("HTAM_HIP_PLUGIN_PATH", HTAM_HIP_PLUGIN_PATH);
}

class HipOnNvidia : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto lib = PluginLibrary::Open(HipPluginPath());
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib_ = std::move(lib).value().release();
    dir_ = fs::temp_directory_path() / ("htam-hip-gpu-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "work");
    HostOptions h;
    h.sdk_include_dir = fs::absolute("sdk/include").string();
    h.cache_dir = (dir_ / "cache").string();
    h.work_dir = (dir_ / "work").string();
    h.options = {"hip_platform=nvidia", "hip_call_timeout_ms=10000"};
    auto b = BackendInstance::Create(lib_->api(), h);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value().release();
    if (!backend_->description().can_run) return;
    Status st = ConsumeError(lib_->api().device_open(backend_->handle(), 0, &device_), "open");
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() {
    if (device_) lib_->api().device_close(device_);
    delete backend_;
    delete lib_;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (!device_) GTEST_SKIP() << "no CUDA device here: " << backend_->description().notes;
    // A sticky fault (illegal address, ...) kills the CUDA context of the whole process: every
    // later call would fail with a confusing message. Say where it happened instead; the GPU
    // session runs each of these tests in its own process (tools/gpu/one_run.sh).
    if (!lost_in_.empty())
      FAIL() << "the CUDA context of this process was lost in " << lost_in_
             << " (sticky device fault); run this test alone: --gtest_filter="
             << ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() << "."
             << ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  // Records a sticky device fault for the tests that follow.
  static void NoteFault(int32_t code) {
    if (code == HTAM_ERR_DEVICE_FAULT && lost_in_.empty())
      lost_in_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  const PluginApi& api() { return lib_->api(); }

  htam_module* Load(const std::string& source) {
    htam_compile_request req{};
    req.struct_size = sizeof req;
    req.source = source.data();
    req.source_len = source.size();
    req.language = "hip";
    req.name = "t";
    htam_artifact* a = nullptr;
    Status st = ConsumeError(api().compile(backend_->handle(), &req, &a), "compile");
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return nullptr;
    htam_module* m = nullptr;
    st = ConsumeError(api().load(device_, a, &m), "load");
    api().artifact_release(a);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return m;
  }

  struct Matrix {
    htam_buffer* buf = nullptr;
    htam_tensor t{};
  };
  Matrix Make(int64_t rows, int64_t cols, const std::vector<float>* init) {
    Matrix v;
    int64_t n = rows * (cols > 0 ? cols : 1);  // cols 0 = a vector of `rows` elements
    EXPECT_EQ(api().buffer_alloc(device_, n * 4, &v.buf), nullptr);
    v.t.data = api().buffer_address(v.buf);
    v.t.dtype = HTAM_F32;
    v.t.ndim = cols > 0 ? 2 : 1;
    v.t.shape[0] = rows;
    v.t.strides[0] = cols > 0 ? cols : 1;
    if (cols > 0) {
      v.t.shape[1] = cols;
      v.t.strides[1] = 1;
    }
    if (init) {
      EXPECT_EQ(api().copy_to_device(v.buf, 0, init->data(), n * 4), nullptr);
    }
    return v;
  }

  static PluginLibrary* lib_;
  static BackendInstance* backend_;
  static htam_device* device_;
  static fs::path dir_;
  static std::string lost_in_;
};
std::string HipOnNvidia::lost_in_;
PluginLibrary* HipOnNvidia::lib_ = nullptr;
BackendInstance* HipOnNvidia::backend_ = nullptr;
htam_device* HipOnNvidia::device_ = nullptr;
fs::path HipOnNvidia::dir_;

TEST_F(HipOnNvidia, DescribesTheNvidiaPlatform) {
  const auto& d = backend_->description();
  EXPECT_STREQ(d.name, "hip");
  EXPECT_STREQ(d.language, "hip");
  ASSERT_GE(d.num_devices, 1);
  printf("hip on nvidia: %s arch %s; %s\n", d.devices[0].name, d.devices[0].arch, d.version);
  EXPECT_EQ(std::string(d.devices[0].arch).rfind("sm_", 0), 0u);
  EXPECT_NE(std::string(d.notes).find("hip_on_cuda.h"), std::string::npos) << d.notes;
}

// The rowsum HIP variant (warpSize-sized wavefront shuffles) gives the host's sums.
TEST_F(HipOnNvidia, WavefrontAwareReductionIsCorrectAndTimed) {
  htam_module* m =
      Load(htam::ReadFileOrEmpty("configs/tasks/rowsum/variants/hip/v1_wave_shuffle.hip"));
  ASSERT_NE(m, nullptr);
  const int64_t rows = 300, cols = 1001;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(rows * cols);
  for (auto& v : x) v = nd(rng);
  Matrix in = Make(rows, cols, &x), out = Make(rows, 0, nullptr);
  int32_t rc = -1, code = 0;
  Status st = ConsumeError(api().run(m, &in.t, 1, &out.t, 1, &rc), "run", &code);
  NoteFault(code);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rc, 0);
  std::vector<float> y(rows);
  ASSERT_EQ(api().copy_to_host(y.data(), out.buf, 0, rows * 4), nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
    ASSERT_NEAR(y[r], s, 1e-3 + 1e-4 * std::fabs(s)) << "row " << r;
  }
  // The timing protocol of the CUDA path, through the HIP plugin.
  htam_timing_request req{};
  req.struct_size = sizeof req;
  req.num_sets = 1;
  req.inputs = &in.t;
  req.num_inputs = 1;
  req.outputs = &out.t;
  req.num_outputs = 1;
  req.warmup_reps = 3;
  req.warmup_ms = 5;
  req.repetitions = 20;
  req.poison = 1;
  req.poison_byte = 0xff;
  std::vector<double> us(20, -1);
  htam_timing_result tr{};
  tr.struct_size = sizeof tr;
  tr.rep_us = us.data();
  st = ConsumeError(api().time(m, &req, &tr), "time", &code);
  NoteFault(code);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(tr.all_streams, 1);
  for (double u : us) EXPECT_GT(u, 0.0);
  TimingStats ts = Summarize(us);
  printf("rowsum v1_wave_shuffle %lldx%lld: median %.2f us over %d reps, clocks %d/%d MHz\n",
         (long long)rows, (long long)cols, ts.median, (int)us.size(), tr.sm_clock_mhz,
         tr.mem_clock_mhz);
  api().buffer_free(in.buf);
  api().buffer_free(out.buf);
  api().module_release(m);
}

// A candidate's non-zero return is reported as such, through the HIP plugin.
TEST_F(HipOnNvidia, KernelReturnCodeIsReported) {
  htam_module* m = Load(R"(#include <hip/hip_runtime.h>
#include <htam/kernel_abi.h>
HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor*, int, htam_tensor*, int, htam_stream) {
  return 7;
})");
  ASSERT_NE(m, nullptr);
  int32_t rc = 0, code = 0;
  Status st = ConsumeError(api().run(m, nullptr, 0, nullptr, 0, &rc), "run", &code);
  NoteFault(code);
  EXPECT_EQ(code, HTAM_ERR_KERNEL_FAILED) << st.ToString();
  EXPECT_EQ(rc, 7);
  api().module_release(m);
}

// ---- the real gate, in htam-eval processes -----------------------------------------------------

std::string CliPrefix() {
  return std::string("--backend hip --plugin ") + HipPluginPath() +
         " --option hip_platform=nvidia --seeds 2 --reps 30";
}

TEST(HipOnNvidiaGate, EveryTaskReferenceHipPassesTheGate) {
  int checked = 0;
  for (const auto& e : fs::directory_iterator("configs/tasks")) {
    if (!fs::exists(e.path() / "reference.hip")) continue;
    auto r = gputest::RunCli(CliPrefix() + " --task " + e.path().string() + " --reference");
    if (r.exit_code == gputest::kCliNoDevice) GTEST_SKIP() << "no CUDA device here: " << r.output;
    ASSERT_EQ(r.results.size(), 1u) << r.output;
    const auto& j = r.results[0];
    EXPECT_EQ(j.value("status", ""), "Ok") << e.path() << "\n" << j.dump(2);
    printf("%-16s reference.hip  %s  median %.2f us\n", e.path().filename().c_str(),
           j.value("status", "?").c_str(), j.value("median_us", 0.0));
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

TEST(HipOnNvidiaGate, RowsumHipVariantsPassAndAreTimed) {
  std::string args = CliPrefix() + " --task configs/tasks/rowsum";
  for (const char* v : {"v1_wave_shuffle", "v2_vec4_wave", "v3_wave_per_row"})
    args += std::string(" --source configs/tasks/rowsum/variants/hip/") + v + ".hip";
  auto r = gputest::RunCli(args);
  if (r.exit_code == gputest::kCliNoDevice) GTEST_SKIP() << "no CUDA device here: " << r.output;
  ASSERT_EQ(r.results.size(), 3u) << r.output;
  for (const auto& j : r.results) {
    EXPECT_EQ(j.value("status", ""), "Ok") << j.dump(2);
    EXPECT_GT(j.value("median_us", 0.0), 0.0);
    EXPECT_GT(j.value("baseline_us", 0.0), 0.0);
    printf("rowsum %-22s %s  median %.2f us  baseline %.2f us  speedup %.3f\n",
           fs::path(j.value("source", "")).filename().c_str(), j.value("status", "?").c_str(),
           j.value("median_us", 0.0), j.value("baseline_us", 0.0), j.value("speedup", 0.0));
  }
}

}  // namespace
}  // namespace htam
