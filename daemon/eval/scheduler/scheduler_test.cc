// The scheduler's durable queue (real LMDB in a temp dir; old JSON entries and JobSpec buffers)
// and the worker link's job and result messages (schema/job.fbs).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/hash.h"
#include "daemon/eval/job_codec.h"
#include "daemon/eval/scheduler/journal.h"
#include "daemon/eval/scheduler/wire.h"

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
  fs::copy_file("daemon/eval/scheduler/testdata/journal_v1/data.mdb", queue + "/data.mdb");
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

// Entries of both formats decode: the JSON of htamd before schema/job.fbs and the JobSpec buffer
// written now; a damaged entry is a Corruption that says what is wrong, never a crash.
TEST(JournalTest, EntriesOfBothFormatsDecodeAndDamagedOnesAreRefused) {
  const eval::EvalJob want = Job(77, "/tasks/relu");
  const std::string entry = JobToJournal(want);
  EXPECT_NE(entry[0], '{');
  EXPECT_EQ(entry.substr(4, 4), "HTJB");
  auto json_entry =
      nlohmann::json{{"job_id", 77},      {"backend", "cpu"},          {"arch", "x86_64"},
                     {"language", "cpp"}, {"source", want.source},     {"session_id", 7},
                     {"profile", true},   {"task_dir", "/tasks/relu"}, {"context", want.context}}
          .dump();
  for (const std::string& value : {entry, json_entry}) {
    auto job = JobFromJournal(value);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(job->job_id, 77u);
    EXPECT_EQ(job->task_dir, "/tasks/relu");
    EXPECT_EQ(job->backend, "cpu");
    EXPECT_EQ(job->arch, "x86_64");
    EXPECT_EQ(job->language, "cpp");
    EXPECT_EQ(job->source, want.source);
    EXPECT_EQ(job->session_id, 7u);
    EXPECT_EQ(job->context, want.context);
  }
  EXPECT_TRUE(JobFromJournal(json_entry)->profile);
  EXPECT_EQ(JobFromJournal(entry.substr(0, entry.size() / 2)).status().code(),
            Status::Code::kCorruption);
  EXPECT_EQ(JobFromJournal("{\"job_id\":1}").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(JobFromJournal("{not json").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(JobFromJournal("").status().code(), Status::Code::kCorruption);
  // A result is not a job.
  auto r = JobFromJournal(eval::PackResult(eval::EvalResult()));
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r.status().message().find("queued job"), std::string::npos) << r.status().message();
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
  auto spec = eval::UnpackJob(*wire, "test");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->attempt, 2u);
  EXPECT_EQ(spec->task_files.size(), 2u);
  EXPECT_EQ(spec->task_name, "cpu_relu");
  EXPECT_TRUE(spec->task_dir.empty());  // the daemon's path stays home
  EXPECT_TRUE(spec->context.empty());
  uint64_t id = 0;
  uint32_t attempt = 0;
  auto job = JobFromWire(*wire, dir.path + "/unpacked", &id, &attempt);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(id, 9u);
  EXPECT_EQ(attempt, 2u);
  EXPECT_EQ(job->job_id, 9u);
  EXPECT_EQ(job->backend, "cpu");
  EXPECT_EQ(job->arch, "x86_64");
  EXPECT_EQ(job->language, "cpp");
  EXPECT_EQ(job->source, sent.source);
  EXPECT_EQ(job->session_id, 7u);
  EXPECT_TRUE(job->profile);  // the remote worker profiles too
  std::ifstream ref(job->task_dir + "/reference.cpp");
  std::string text((std::istreambuf_iterator<char>(ref)), {});
  EXPECT_EQ(text, "// reference");
  auto again = JobFromWire(*wire, dir.path + "/unpacked", &id, &attempt);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->task_dir, job->task_dir);
}

// A job message with its fields set by hand (as a hostile or broken daemon could send it).
std::string HandJob(const std::function<void(fb::JobSpecT*)>& edit) {
  fb::JobSpecT s;
  s.job_id = 1;
  s.backend = "cpu";
  s.source = "x";
  s.task_name = "t";
  auto f = std::make_unique<fb::TaskFileT>();
  f->name = "task.json";
  f->content = {'{', '}'};
  s.task_files.push_back(std::move(f));
  edit(&s);
  return eval::PackJob(s);
}

TEST(WireTest, HostileJobsAreRefused) {
  TempDir dir;
  uint64_t id = 0;
  uint32_t attempt = 0;
  auto from = [&](const std::string& m) { return JobFromWire(m, dir.path, &id, &attempt); };
  EXPECT_TRUE(from(HandJob([](fb::JobSpecT*) {})).ok());
  auto escape = HandJob([](fb::JobSpecT* s) {
    auto f = std::make_unique<fb::TaskFileT>();
    f->name = "../../etc/passwd";
    s->task_files.push_back(std::move(f));
  });
  EXPECT_EQ(from(escape).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(id, 1u);  // verified: a refusal can name the job
  EXPECT_FALSE(from(HandJob([](fb::JobSpecT* s) { s->task_name = ".."; })).ok());
  EXPECT_FALSE(
      from(HandJob([](fb::JobSpecT* s) { s->task_files[0]->name = "reference.cpp"; })).ok());
  EXPECT_FALSE(from(HandJob([](fb::JobSpecT* s) { s->backend.clear(); })).ok());
  EXPECT_FALSE(from(HandJob([](fb::JobSpecT* s) { s->candidate_hash = "../x"; })).ok());
  auto keyed = from(HandJob([](fb::JobSpecT* s) { s->candidate_hash = CandidateKey("cpp", "k"); }));
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_EQ(keyed->candidate_hash, CandidateKey("cpp", "k"));  // the daemon's key travels
  EXPECT_FALSE(from(HandJob([](fb::JobSpecT* s) {
                 auto f = std::make_unique<fb::TaskFileT>(*s->task_files[0]);
                 s->task_files.push_back(std::move(f));
               })).ok());
  // Not a job buffer at all: the JSON of the old protocol, a result, a truncated job.
  const std::string good = HandJob([](fb::JobSpecT*) {});
  id = 0;
  for (const std::string& m :
       {std::string(R"({"type":"job","job_id":1})"), ResultToWire(eval::EvalResult(), 1),
        good.substr(0, good.size() - 9), std::string()}) {
    auto r = from(m);
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_FALSE(r.status().message().empty());
  }
  EXPECT_EQ(id, 0u);  // nothing was read from them
}

TEST(WireTest, ResultsRoundTrip) {
  eval::EvalResult r;
  r.job_id = 42;
  r.status = fb::OutcomeStatus::Incorrect;
  r.diagnostics = "mismatch";
  r.speedup = 0;
  r.median_us = 12.5;
  fb::MutableProfile(&r).registers = 32;
  fb::MutableProfile(&r).dram_throughput = 0.85f;
  fb::MutableProfile(&r).mem_clock_mhz = 2619;
  r.bottleneck = fb::Bottleneck::Memory;
  r.stage_ms = {fb::MakeStageTime("compile candidate", 3.5)};
  r.compile_cached = true;
  uint32_t attempt = 0;
  auto back = ResultFromWire(ResultToWire(r, 5), &attempt);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(attempt, 5u);
  EXPECT_EQ(back->job_id, 42u);
  EXPECT_EQ(back->status, fb::OutcomeStatus::Incorrect);
  EXPECT_EQ(back->diagnostics, "mismatch");
  EXPECT_DOUBLE_EQ(back->median_us, 12.5);
  EXPECT_TRUE(fb::ProfileOf(*back) == fb::ProfileOf(r));
  EXPECT_EQ(back->bottleneck, fb::Bottleneck::Memory);
  EXPECT_EQ(back->stage_ms, r.stage_ms);  // the remote path now carries stage times too
  EXPECT_TRUE(back->compile_cached);
  // Garbage, an old-protocol JSON result, a job: refused, not misread.
  for (const std::string& m : {std::string("\x01\x02\x03"), std::string(R"({"type":"result"})"),
                               eval::PackJob(Job(1, "/t"))})
    EXPECT_EQ(ResultFromWire(m, &attempt).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace htam::scheduler
