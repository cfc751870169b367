// The scheduler's durable queue (real LMDB in a temp dir) and the worker link's job encoding.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "daemon/scheduler/journal.h"
#include "daemon/scheduler/wire.h"

namespace htam::scheduler {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    char t[] = "/tmp/htam-sched-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

eval::EvalJob Job(uint64_t id, const std::string& task_dir) {
  eval::EvalJob j;
  j.job_id = id;
  j.task_dir = task_dir;
  j.backend = "cpu";
  j.arch = "x86_64";
  j.language = "cpp";
  j.source = "int f() { return " + std::to_string(id) + "; }";
  j.session_id = 7;
  j.context = R"({"summary":"s"})";
  return j;
}

TEST(JournalTest, QueuedJobsSurviveReopenInJobOrderUntilErased) {
  TempDir dir;
  {
    auto j = Journal::Open(dir.path + "/queue");
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    for (uint64_t id : {300u, 5u, 70000u}) {
      eval::EvalJob job = Job(id, "/t");
      job.profile = id == 5;  // a profile request survives the restart
      ASSERT_TRUE((*j)->Put(job).ok());
    }
    ASSERT_TRUE((*j)->Erase(300).ok());
    EXPECT_TRUE((*j)->Erase(12345).ok());  // not found is fine
  }
  auto j = Journal::Open(dir.path + "/queue");
  ASSERT_TRUE(j.ok());
  size_t bad = 0;
  auto jobs = (*j)->List(&bad);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(bad, 0u);
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job_id, 5u);
  EXPECT_EQ((*jobs)[1].job_id, 70000u);
  EXPECT_EQ((*jobs)[1].source, Job(70000, "/t").source);
  EXPECT_EQ((*jobs)[1].context, R"({"summary":"s"})");
  EXPECT_EQ((*jobs)[1].session_id, 7u);
  EXPECT_TRUE((*jobs)[0].profile);
  EXPECT_FALSE((*jobs)[1].profile);
}

// A queue an earlier htamd left behind (testdata/journal_v1, see its README) opens, lists its jobs
// in job order, and takes new ones.
TEST(JournalTest, AQueueWrittenBeforeOpens) {
  TempDir dir;
  const std::string queue = dir.path + "/queue";
  fs::create_directories(queue);
  fs::copy_file("daemon/scheduler/testdata/journal_v1/data.mdb", queue + "/data.mdb");
  {
    auto j = Journal::Open(queue);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    size_t bad = 0;
    auto jobs = (*j)->List(&bad);
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    EXPECT_EQ(bad, 0u);
    ASSERT_EQ(jobs->size(), 2u);
    EXPECT_EQ((*jobs)[0].job_id, 5u);
    EXPECT_TRUE((*jobs)[0].profile);
    EXPECT_EQ((*jobs)[1].job_id, 70000u);
    EXPECT_FALSE((*jobs)[1].profile);
    for (const auto& job : *jobs) {
      const eval::EvalJob want = Job(job.job_id, "/t");
      EXPECT_EQ(job.task_dir, want.task_dir);
      EXPECT_EQ(job.backend, want.backend);
      EXPECT_EQ(job.arch, want.arch);
      EXPECT_EQ(job.language, want.language);
      EXPECT_EQ(job.source, want.source);
      EXPECT_EQ(job.session_id, want.session_id);
      EXPECT_EQ(job.context, want.context);
    }
    ASSERT_TRUE((*j)->Put(Job(6, "/t")).ok());
    ASSERT_TRUE((*j)->Erase(5).ok());
  }
  auto j = Journal::Open(queue);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  size_t bad = 0;
  auto jobs = (*j)->List(&bad);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job_id, 6u);
  EXPECT_EQ((*jobs)[1].job_id, 70000u);
}

TEST(WireTest, AJobCarriesItsTaskFilesAndUnpacksOnce) {
  TempDir dir;
  std::string task = dir.path + "/cpu_relu";
  fs::create_directories(task + "/variants");
  std::ofstream(task + "/task.json") << R"({"name":"cpu_relu"})";
  std::ofstream(task + "/reference.cpp") << "// reference";
  std::ofstream(task + "/variants/skip.cpp") << "// not shipped";
  eval::EvalJob sent = Job(9, task);
  sent.profile = true;
  auto wire = JobToWire(sent, 2);
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  EXPECT_EQ((*wire)["attempt"], 2);
  EXPECT_EQ((*wire)["task"]["files"].size(), 2u);
  auto job = JobFromWire(*wire, dir.path + "/unpacked");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->job_id, 9u);
  EXPECT_EQ(job->backend, "cpu");
  EXPECT_TRUE(job->profile);  // the remote worker profiles too
  std::ifstream ref(job->task_dir + "/reference.cpp");
  std::string text((std::istreambuf_iterator<char>(ref)), {});
  EXPECT_EQ(text, "// reference");
  auto again = JobFromWire(*wire, dir.path + "/unpacked");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->task_dir, job->task_dir);
}

TEST(WireTest, HostileJobsAreRefused) {
  TempDir dir;
  nlohmann::json m = {{"type", "job"},
                      {"job_id", 1},
                      {"backend", "cpu"},
                      {"source", "x"},
                      {"task", {{"name", "t"}, {"files", {{"task.json", "{}"}}}}}};
  EXPECT_TRUE(JobFromWire(m, dir.path).ok());
  auto bad = m;
  bad["task"]["files"]["../../etc/passwd"] = "x";
  EXPECT_EQ(JobFromWire(bad, dir.path).status().code(), Status::Code::kInvalidArgument);
  bad = m;
  bad["task"]["name"] = "..";
  EXPECT_FALSE(JobFromWire(bad, dir.path).ok());
  bad = m;
  bad["task"]["files"] = {{"reference.cpp", "x"}};
  EXPECT_FALSE(JobFromWire(bad, dir.path).ok());
  bad = m;
  bad.erase("source");
  EXPECT_FALSE(JobFromWire(bad, dir.path).ok());
  EXPECT_FALSE(JobFromWire(nlohmann::json::array(), dir.path).ok());
}

TEST(WireTest, ResultsRoundTrip) {
  eval::EvalResult r;
  r.job_id = 42;
  r.status = fb::OutcomeStatus::Incorrect;
  r.diagnostics = "mismatch";
  r.speedup = 0;
  r.median_us = 12.5;
  r.profile.registers = 32;
  r.profile.shared_bytes = 4096;
  r.profile.spill_bytes = 8;
  r.profile.dram_throughput = 0.85f;
  r.profile.sm_throughput = 0.4f;
  r.profile.occupancy = 0.5f;
  r.profile.sol_fraction = 0.7f;
  r.profile.sm_clock_mhz = 1980;
  r.profile.mem_clock_mhz = 2619;
  r.bottleneck = fb::Bottleneck::Memory;
  auto back = ResultFromWire(ResultToWire(r));
  EXPECT_EQ(back.job_id, 42u);
  EXPECT_EQ(back.status, fb::OutcomeStatus::Incorrect);
  EXPECT_EQ(back.diagnostics, "mismatch");
  EXPECT_DOUBLE_EQ(back.median_us, 12.5);
  EXPECT_EQ(back.profile.registers, 32);
  EXPECT_EQ(back.profile.shared_bytes, 4096);
  EXPECT_EQ(back.profile.spill_bytes, 8);
  EXPECT_FLOAT_EQ(back.profile.dram_throughput, 0.85f);
  EXPECT_FLOAT_EQ(back.profile.sm_throughput, 0.4f);
  EXPECT_FLOAT_EQ(back.profile.occupancy, 0.5f);
  EXPECT_FLOAT_EQ(back.profile.sol_fraction, 0.7f);
  EXPECT_EQ(back.profile.sm_clock_mhz, 1980);
  EXPECT_EQ(back.profile.mem_clock_mhz, 2619);
  EXPECT_EQ(back.bottleneck, fb::Bottleneck::Memory);
  auto odd = ResultToWire(r);
  odd["status"] = 999;
  odd["bottleneck"] = 99;
  EXPECT_EQ(ResultFromWire(odd).status, fb::OutcomeStatus::InfraError);
  EXPECT_EQ(ResultFromWire(odd).bottleneck, fb::Bottleneck::Unknown);
}

}  // namespace
}  // namespace htam::scheduler
