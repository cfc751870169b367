// Nsight Compute CSV parsing and bottleneck classes, on CSV text in ncu's format (no GPU here:
// the files under testdata/ follow ncu's --csv layout, both the newer one and the older one with
// "Kernel Time"), and the run path with a stand-in ncu script that prints such text.
#include "backends/cuda/ncu_profile.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace htam::cuda {
namespace {

std::string Data(const std::string& name) {
  std::ifstream in("backends/cuda/testdata/" + name);
  EXPECT_TRUE(bool(in)) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NcuProfileTest, MemoryBoundKernelAmongProfilerAndProgramOutput) {
  auto m = ParseNcuCsv(Data("ncu_memory_bound.csv"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kernels, 1);
  EXPECT_DOUBLE_EQ(m->dram_pct, 91.37);
  EXPECT_DOUBLE_EQ(m->sm_pct, 18.52);
  EXPECT_DOUBLE_EQ(m->occupancy_pct, 81.90);
  EXPECT_DOUBLE_EQ(m->total_us, 24.06);
  ASSERT_EQ(m->kernel_names.size(), 1u);
  EXPECT_EQ(m->kernel_names[0], "relu_vec4(const float4 *, float4 *, long)");  // commas in quotes
  EXPECT_EQ(ClassifyBottleneck(*m, {}), fb::Bottleneck::Memory);
}

TEST(NcuProfileTest, KernelsAreWeightedByTheirDurationInAnyUnit) {
  auto m = ParseNcuCsv(Data("ncu_two_kernels.csv"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kernels, 2);
  EXPECT_NEAR(m->total_us, 1230.0, 1e-9);  // 1.20 ms + "30,000" ns
  EXPECT_NEAR(m->dram_pct, (1200 * 12.4 + 30 * 88.0) / 1230, 1e-9);
  EXPECT_NEAR(m->sm_pct, (1200 * 84.1 + 30 * 20.0) / 1230, 1e-9);
  EXPECT_EQ(ClassifyBottleneck(*m, {}), fb::Bottleneck::Compute);
}

// The backend's own kernels (roofline probes at device open, the cache flush) are left out: a
// streaming candidate behind a long compute probe is still memory-bound; only htam_* is an error.
TEST(NcuProfileTest, TheBackendsOwnKernelsAreNotTheCandidates) {
  auto row = [](const char* id, const char* kernel, const char* metric, const char* unit,
                const char* value) {
    return std::string("\"") + id + "\",\"1\",\"htam-eval-cli\",\"" + kernel + "\",\"" + metric +
           "\",\"" + unit + "\",\"" + value + "\"\n";
  };
  std::string csv = "\"ID\",\"Process ID\",\"Process Name\",\"Kernel Name\",\"Metric Name\","
                    "\"Metric Unit\",\"Metric Value\"\n";
  std::string probe;
  for (const char* k : {"htam_fma_probe", "htam_flush_read"}) {
    const char* id = k[5] == 'f' && k[6] == 'm' ? "0" : "1";
    probe += row(id, k, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "0.01");
    probe += row(id, k, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "97.5");
    probe += row(id, k, "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "99");
    probe += row(id, k, "gpu__time_duration.sum", "msecond", "20");
  }
  std::string cand = row("2", "relu_vec4(const float4 *, float4 *, long)",
                         "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "90.5") +
                     row("2", "relu_vec4(const float4 *, float4 *, long)",
                         "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "15") +
                     row("2", "relu_vec4(const float4 *, float4 *, long)",
                         "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "80") +
                     row("2", "relu_vec4(const float4 *, float4 *, long)", "gpu__time_duration.sum",
                         "usecond", "40.3");
  auto m = ParseNcuCsv(csv + probe + cand);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kernels, 1);
  EXPECT_DOUBLE_EQ(m->dram_pct, 90.5);
  EXPECT_DOUBLE_EQ(m->total_us, 40.3);
  EXPECT_EQ(ClassifyBottleneck(*m, {}), fb::Bottleneck::Memory);
  auto only = ParseNcuCsv(csv + probe);
  ASSERT_FALSE(only.ok());
  EXPECT_NE(only.status().message().find("none of the candidate's kernels"), std::string::npos);
}

TEST(NcuProfileTest, OlderLayoutAndLatencyBound) {
  auto m = ParseNcuCsv(Data("ncu_latency_bound.csv"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->occupancy_pct, 6.25);
  EXPECT_EQ(ClassifyBottleneck(*m, {}), fb::Bottleneck::Latency);
  // The same kernel, but short: launch-bound.
  m->total_us = 2.0;
  EXPECT_EQ(ClassifyBottleneck(*m, {}), fb::Bottleneck::Launch);
}

TEST(NcuProfileTest, ThresholdsDecide) {
  NcuMetrics m;
  m.dram_pct = 55;
  m.sm_pct = 30;
  m.kernels = 1;
  m.total_us = 100;
  EXPECT_EQ(ClassifyBottleneck(m, {}), fb::Bottleneck::Latency);
  BottleneckThresholds t;
  t.memory_pct = 50;
  EXPECT_EQ(ClassifyBottleneck(m, t), fb::Bottleneck::Memory);
  m.sm_pct = 65;  // both over their thresholds: the busier unit
  EXPECT_EQ(ClassifyBottleneck(m, t), fb::Bottleneck::Compute);
  m.sm_pct = -1;
  EXPECT_EQ(ClassifyBottleneck(m, t), fb::Bottleneck::Unknown);
}

TEST(NcuProfileTest, NoCsvIsAnError) {
  auto m = ParseNcuCsv(Data("ncu_permission_error.txt"));
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("no CSV header"), std::string::npos);
  auto empty =
      ParseNcuCsv("\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n");
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no kernel"), std::string::npos);
}

class NcuRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/htam-ncutest-XXXXXX";
    dir_ = mkdtemp(t);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A stand-in ncu that prints a recorded output (and checks it was asked for CSV).
  std::string FakeNcu(const std::string& data) {
    std::string path = dir_ + "/ncu";
    std::ofstream(path) << "#!/bin/sh\ncase \"$*\" in *--csv*) ;; *) exit 9;; esac\ncat "
                        << std::filesystem::absolute("backends/cuda/testdata/" + data).string()
                        << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string dir_;
};

TEST_F(NcuRunTest, ClassifiesWhatNcuPrints) {
  NcuProfile p = RunNcuProfile(FakeNcu("ncu_memory_bound.csv"), {"/bin/true"}, dir_, 30, {});
  ASSERT_TRUE(p.available) << p.note;
  EXPECT_EQ(p.bottleneck, fb::Bottleneck::Memory);
  EXPECT_EQ(p.note, "ncu: Memory-bound");
}

TEST_F(NcuRunTest, AbsentOrFailingNcuIsANoteNotAnError) {
  NcuProfile none = RunNcuProfile("", {"/bin/true"}, dir_, 30, {});
  EXPECT_FALSE(none.available);
  EXPECT_NE(none.note.find("profile unavailable: Nsight Compute (ncu) not found"),
            std::string::npos);
  NcuProfile perm = RunNcuProfile(FakeNcu("ncu_permission_error.txt"), {"/bin/true"}, dir_, 30, {});
  EXPECT_FALSE(perm.available);
  EXPECT_NE(perm.note.find("ERR_NVGPUCTRPERM"), std::string::npos) << perm.note;
  NcuProfile gone = RunNcuProfile(dir_ + "/no-such-ncu", {"/bin/true"}, dir_, 30, {});
  EXPECT_FALSE(gone.available);
  EXPECT_EQ(gone.note, "profile unavailable: Nsight Compute (ncu) at " + dir_ +
                           "/no-such-ncu is not an executable file");
  // A failing ncu: its exit code is in the note.
  std::string failing = dir_ + "/ncu-fails";
  std::ofstream(failing) << "#!/bin/sh\necho '==ERROR== the profiler failed'\nexit 1\n";
  chmod(failing.c_str(), 0755);
  NcuProfile failed = RunNcuProfile(failing, {"/bin/true"}, dir_, 30, {});
  EXPECT_FALSE(failed.available);
  EXPECT_NE(failed.note.find("ncu exited with code 1"), std::string::npos) << failed.note;
  EXPECT_NE(failed.note.find("the profiler failed"), std::string::npos) << failed.note;
}

// The plugin ABI's entry points (backend.h, API 1.3) on the same captured ncu output: what a host
// gets through htam_backend_profile_command / _parse.
TEST(NcuEntryTest, ParseFillsTheSummaryAndSaysWhyWhenThereIsNone) {
  NcuEntryState state;
  const std::string csv = Data("ncu_memory_bound.csv");
  htam_profile_output in{};
  in.struct_size = sizeof in;
  in.text = csv.data();
  in.text_len = csv.size();
  in.memory_pct = in.compute_pct = in.launch_us = -1;  // the defaults
  htam_profile_summary out{};
  out.struct_size = sizeof out;
  ASSERT_EQ(NcuProfileParseEntry(&in, &state, &out), nullptr);
  EXPECT_DOUBLE_EQ(out.dram_pct, 91.37);
  EXPECT_DOUBLE_EQ(out.sm_pct, 18.52);
  EXPECT_DOUBLE_EQ(out.occupancy_pct, 81.90);
  EXPECT_EQ(out.kernels, 1);
  EXPECT_DOUBLE_EQ(out.total_us, 24.06);
  EXPECT_EQ(out.bottleneck, HTAM_BOTTLENECK_MEMORY);
  EXPECT_STREQ(out.note, "ncu: Memory-bound");
  // The thresholds of the request decide: DRAM 91 % is under a memory threshold of 95 %.
  in.memory_pct = 95;
  ASSERT_EQ(NcuProfileParseEntry(&in, &state, &out), nullptr);
  EXPECT_EQ(out.bottleneck, HTAM_BOTTLENECK_LATENCY);
  // A host with an older, shorter struct: only the fields inside its struct_size are written.
  htam_profile_summary small{};
  small.struct_size = offsetof(htam_profile_summary, occupancy_pct);
  small.occupancy_pct = -7;
  ASSERT_EQ(NcuProfileParseEntry(&in, &state, &small), nullptr);
  EXPECT_DOUBLE_EQ(small.sm_pct, 18.52);
  EXPECT_EQ(small.occupancy_pct, -7);
  // ncu's own error: no profile, the reason with its exit code.
  const std::string perm = Data("ncu_permission_error.txt");
  in.text = perm.data();
  in.text_len = perm.size();
  in.exit_code = 1;
  htam_backend_error* e = NcuProfileParseEntry(&in, &state, &out);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_UNAVAILABLE);
  EXPECT_NE(std::string(e->message).find("ERR_NVGPUCTRPERM"), std::string::npos) << e->message;
  EXPECT_NE(std::string(e->message).find("ncu exited with code 1"), std::string::npos);
  htam_backend_error_free(e);
}

TEST_F(NcuRunTest, CommandEntryNamesTheToolOrSaysWhyThereIsNone) {
  NcuEntryState state;
  htam_profile_command out{};
  out.struct_size = sizeof out;
  htam_profile_command_request req{};
  req.struct_size = sizeof req;
  const std::string ncu = FakeNcu("ncu_memory_bound.csv");
  req.tool = ncu.c_str();
  ASSERT_EQ(NcuProfileCommandEntry(&req, &state, &out), nullptr);
  ASSERT_NE(out.argv, nullptr);
  EXPECT_EQ(std::string(out.argv[0]), ncu);
  std::vector<std::string> argv;
  for (const char* const* a = out.argv; *a; ++a) argv.emplace_back(*a);
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--csv"), argv.end());
  ASSERT_NE(out.child_options, nullptr);
  EXPECT_STREQ(out.child_options[0], "cuda_roofline=false");
  EXPECT_STREQ(out.tool_name, "ncu");
  // No tool configured: ncu is looked for on the request's search path.
  req.tool = nullptr;
  req.search_path = dir_.c_str();
  ASSERT_EQ(NcuProfileCommandEntry(&req, &state, &out), nullptr);
  EXPECT_EQ(std::string(out.argv[0]), dir_ + "/ncu");
  // A configured path that is not a program: unavailable, and why.
  const std::string gone = dir_ + "/no-such-ncu";
  req.tool = gone.c_str();
  htam_backend_error* e = NcuProfileCommandEntry(&req, &state, &out);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_UNAVAILABLE);
  EXPECT_EQ(std::string(e->message),
            "Nsight Compute (ncu) at " + gone + " is not an executable file");
  htam_backend_error_free(e);
}

}  // namespace
}  // namespace htam::cuda
