// htamd end to end through the C++ SDK: a real daemon (LMDB store, FAISS, the CPU backend's
// sandboxed workers) in a temp dir. Sessions, evaluation with waiting, polling and progress,
// errors, kill -9 and resume, the PID lock, and the refusal of insecure binds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <thread>

#include "base/hash.h"
#include "daemon/memory/memory.h"
#include "daemon/server/codec.h"
#include "tests/integration/daemon_harness.h"

namespace htam {
namespace {

using htam::testing::DaemonProcess;
using htam::testing::MakeTempDir;
using htam::testing::StatusValue;
using namespace std::chrono_literals;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("htamd-it"); }
  void TearDown() override {
    if (HasFailure()) {
      std::ifstream f(dir_ + "/htamd.log");
      std::stringstream ss;
      ss << f.rdbuf();
      std::cerr << "---- htamd log ----\n" << ss.str() << "\n";
    }
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

const std::string kRelu = "cpu_relu";

TEST_F(DaemonTest, HelloStatusAndErrors) {
  DaemonProcess d(dir_);
  ASSERT_TRUE(d.Start());
  auto c = d.Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->server().protocol_version, 1);
  EXPECT_FALSE(c->server().server_version.empty());
  EXPECT_NE(std::find(c->server().backends.begin(), c->server().backends.end(), "cpu"),
            c->server().backends.end());
  EXPECT_EQ(c->server().embedder_model, "builtin-hash-v1");

  auto status = c->ServerStatus();
  ASSERT_TRUE(status.ok());
  for (const char* section : {"# server", "# clients", "# memory", "# evaluation"})
    EXPECT_NE(status->find(section), std::string::npos) << section;
  auto only = c->ServerStatus("server");
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->find("# memory"), std::string::npos);

  // Errors are answers, not crashes, and name the problem.
  EXPECT_TRUE(c->NextStep(987654).status().IsNotFound());
  OpenSessionArgs bad;
  bad.task = "no_such_task";
  EXPECT_TRUE(c->OpenSession(bad).status().IsNotFound());
  bad.task = "../../etc";
  EXPECT_EQ(c->OpenSession(bad).status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(c->Poll(12345).status().IsNotFound());
  RecordArgs rec;
  rec.session_id = 424242;
  rec.summary = "nothing";
  EXPECT_FALSE(c->Record(rec).ok());
  fb::QueryT q;
  q.kind = fb::QueryKind::Directions;
  auto dirs = c->Query(q);
  ASSERT_TRUE(dirs.ok());
  EXPECT_GE(dirs->directions.size(), 13u);
  // The daemon still serves after every refusal.
  EXPECT_TRUE(c->Hello().ok());
  EXPECT_EQ(d.Terminate(), 0);
  EXPECT_NE(d.Log().find("exiting with code 0"), std::string::npos);
}

TEST_F(DaemonTest, AsyncCallsArePipelinedAndCorrelatedByRequestId) {
  DaemonProcess d(dir_);
  ASSERT_TRUE(d.Start());
  auto c = d.Connect();
  ASSERT_NE(c, nullptr);
  std::vector<uint64_t> sids;
  for (int i = 0; i < 4; ++i) {
    OpenSessionArgs open;
    open.task = kRelu;
    auto info = c->OpenSession(open);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    sids.push_back(info->session->id);
  }
  // 200 requests in flight at once over one connection, answered in any order.
  std::vector<std::future<Result<fb::StepT>>> futures;
  for (int i = 0; i < 200; ++i) futures.push_back(c->NextStepAsync(sids[i % sids.size()]));
  for (int i = 0; i < 200; ++i) {
    auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->session_id, sids[i % sids.size()]);
  }
  EXPECT_EQ(c->in_flight(), 0u);
  auto missing = c->PollAsync(777, 10ms).get();
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST_F(DaemonTest, ManyThreadsShareOneClientAndEachGetsItsOwnReplies) {
  DaemonProcess d(dir_);
  ASSERT_TRUE(d.Start());
  auto c = d.Connect();
  ASSERT_NE(c, nullptr);
  constexpr int kThreads = 12, kCalls = 40;
  std::vector<uint64_t> sids;
  for (int i = 0; i < kThreads; ++i) {
    OpenSessionArgs open;
    open.task = kRelu;
    auto info = c->OpenSession(open);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    sids.push_back(info->session->id);
  }
  // Synchronous calls of many threads at once (each on a connection of its own while it waits),
  // with asynchronous ones through the client's I/O thread in between: every reply is the
  // answer to the caller's own request (its session, its step count), and a write sent
  // asynchronously and not waited for still comes before the same thread's next call.
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint64_t sid = sids[t];
      uint32_t recorded = 0;
      std::vector<std::future<bool>> async_records;
      for (int i = 0; i < kCalls; ++i) {
        auto s = i % 5 == 4 ? c->NextStepAsync(sid).get() : c->NextStep(sid);
        if (!s.ok() || s->direction == nullptr) {
          failed++;
          continue;
        }
        if (s->session_id != sid || s->step != recorded) wrong++;
        if (t % 3 == 0 && i % 2) {
          fb::RecordT m;
          m.session_id = sid;
          m.direction_id = s->direction->id;
          m.summary = "async step " + std::to_string(i);
          m.speedup_after = 1.5f;
          fb::BodyUnion body;
          body.Set(std::move(m));
          auto done = std::make_shared<std::promise<bool>>();
          async_records.push_back(done->get_future());
          c->CallAsync(std::move(body), [done](Result<std::unique_ptr<fb::EnvelopeT>> r) {
            done->set_value(r.ok() && (*r)->body.type == fb::Body::RecordAck);
          });
        } else {
          RecordArgs r;
          r.session_id = sid;
          r.direction_id = s->direction->id;
          r.summary = "step " + std::to_string(i);
          r.speedup_after = 1.0f + 0.01f * static_cast<float>(i);
          if (!c->Record(r).ok()) {
            failed++;
            continue;
          }
        }
        recorded++;
        if (i % 7 == 6 && !c->NextStep(sid + 1000000).status().IsNotFound()) wrong++;
      }
      for (auto& f : async_records)
        if (!f.get()) failed++;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(c->in_flight(), 0u);
  for (uint64_t sid : sids) {
    fb::QueryT q;
    q.kind = fb::QueryKind::Transitions;
    q.session_id = sid;
    auto tr = c->Query(q);
    ASSERT_TRUE(tr.ok()) << tr.status().ToString();
    EXPECT_EQ(tr->transitions.size(), static_cast<size_t>(kCalls)) << "session " << sid;
  }
  // Every connection the client opened introduced itself: the daemon names them all.
  auto clients = c->ServerStatus("clients");
  ASSERT_TRUE(clients.ok());
  EXPECT_GE(std::stoi(StatusValue(*clients, "known")), 2);
  EXPECT_EQ(clients->find("name=-"), std::string::npos) << *clients;
}

TEST_F(DaemonTest, SynchronousCallAfterATimeoutGetsItsOwnReply) {
  DaemonProcess d(dir_);
  ASSERT_TRUE(d.Start());
  ClientOptions o;
  o.endpoint = d.endpoint();
  o.timeout = 400ms;
  o.retries = 0;
  o.identity_secret = "one client, two Client objects";  // both drive the session below
  auto connected = Client::Connect(o);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  Client& c = **connected;
  OpenSessionArgs open;
  open.task = kRelu;
  auto info = c.OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint64_t sid = info->session->id;

  // A stopped daemon answers nothing: the call times out by its deadline.
  ASSERT_EQ(::kill(d.pid(), SIGSTOP), 0);
  auto t0 = std::chrono::steady_clock::now();
  auto stalled = c.ServerStatus();
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(stalled.status().code(), Status::Code::kTimeout) << stalled.status().ToString();
  EXPECT_GE(waited, 350ms);
  EXPECT_LT(waited, 5s);
  // Resumed, it answers the stalled request too, late; that reply must not be taken for the
  // answer to the next call (a status text where a step is expected).
  ASSERT_EQ(::kill(d.pid(), SIGCONT), 0);
  std::this_thread::sleep_for(100ms);
  for (int i = 0; i < 5; ++i) {
    auto step = c.NextStep(sid);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    EXPECT_EQ(step->session_id, sid);
    ASSERT_NE(step->direction, nullptr);
  }
  EXPECT_TRUE(c.ServerStatus("server").ok());

  // With retries, an idempotent call rides out a stall shorter than its tries.
  ClientOptions patient = o;
  patient.retries = 4;
  auto p = Client::Connect(patient);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(::kill(d.pid(), SIGSTOP), 0);
  std::thread resume([&] {
    std::this_thread::sleep_for(600ms);
    ::kill(d.pid(), SIGCONT);
  });
  auto step = (*p)->NextStep(sid);
  resume.join();
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(step->session_id, sid);
  // A write is never repeated: stalled past its deadline, Record fails with Timeout.
  ASSERT_EQ(::kill(d.pid(), SIGSTOP), 0);
  RecordArgs rec;
  rec.session_id = sid;
  rec.direction_id = step->direction->id;
  rec.summary = "stalled write";
  auto t = (*p)->Record(rec);
  ASSERT_EQ(::kill(d.pid(), SIGCONT), 0);
  EXPECT_EQ(t.status().code(), Status::Code::kTimeout) << t.status().ToString();
  EXPECT_EQ((*p)->in_flight(), 0u);
  EXPECT_EQ(d.Terminate(), 0);
}

TEST_F(DaemonTest, ClientsComeAndGoAndAForkedChildConnectsOnItsOwn) {
  DaemonProcess d(dir_);
  ASSERT_TRUE(d.Start());
  // The Clients of a process share ZeroMQ's I/O thread: destroying one, with calls of another
  // running, leaves the others working, and a Client made after them works too.
  auto a = d.Connect(), b = d.Connect();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> b_failed{0}, b_calls{0};
  std::thread busy([&] {
    while (!stop) {
      if (!b->Hello().ok()) b_failed++;
      b_calls++;
    }
  });
  EXPECT_TRUE(a->ServerStatus("server").ok());
  a.reset();
  auto c = d.Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->Hello().ok());
  std::this_thread::sleep_for(100ms);
  stop = true;
  busy.join();
  EXPECT_EQ(b_failed.load(), 0);
  EXPECT_GT(b_calls.load(), 0);
  // A child process (fork without exec) cannot use its parent's Clients, but one of its own
  // works (it does not inherit the parent's I/O thread).
  pid_t child = fork();
  if (child == 0) {
    ClientOptions o;
    o.endpoint = d.endpoint();
    o.timeout = 5s;
    auto own = Client::Connect(o);
    _exit(own.ok() && (*own)->Hello().ok() ? 0 : 3);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(b->Hello().ok());
  EXPECT_TRUE(c->Hello().ok());
}

TEST(ClientTest, NoDaemonFailsFastWithUnavailable) {
  std::string dir = MakeTempDir("htam-client");
  ClientOptions o;
  o.endpoint = "ipc://" + dir + "/nobody.sock";
  o.connect_timeout = 300ms;
  o.retries = 1;
  auto t0 = std::chrono::steady_clock::now();
  auto c = Client::Connect(o);
  EXPECT_EQ(c.status().code(), Status::Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  o.server_public_key = "only-one-key";
  EXPECT_EQ(Client::Connect(o).status().code(), Status::Code::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST_F(DaemonTest, EvaluationNeverBlocksNextStepAndReportsProgress) {
  DaemonProcess d(dir_);
  ASSERT_TRUE(d.Start());
  std::mutex mu;
  std::vector<std::string> stages;
  ClientOptions o;
  o.endpoint = d.endpoint();
  o.timeout = 30s;
  o.on_progress = [&](const fb::ProgressT& p) {
    std::lock_guard<std::mutex> lock(mu);
    stages.push_back(p.stage);
  };
  auto agent = Client::Connect(o);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  OpenSessionArgs open;
  open.task = kRelu;
  open.backend = "cpu";
  open.budget = 8;
  auto info = (*agent)->OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_FALSE(info->baseline_source.empty());
  ASSERT_NE(info->task, nullptr);
  EXPECT_EQ(info->task->name, kRelu);
  const uint64_t sid = info->session->id;
  auto step = (*agent)->NextStep(sid);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  ASSERT_NE(step->direction, nullptr);
  EXPECT_FALSE(step->why.empty());
  EXPECT_FALSE(step->scores.empty());

  SubmitArgs submit;
  submit.session_id = sid;
  submit.source = info->baseline_source;
  submit.direction_id = step->direction->id;
  submit.summary = "the reference, resubmitted";
  submit.progress = true;
  auto ack = (*agent)->Submit(submit);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_NE(ack->job_id, 0u);
  EXPECT_FALSE(ack->candidate_hash.empty());

  // While the evaluation runs (seconds), another client gets next-step answers at once.
  auto other = d.Connect();
  ASSERT_NE(other, nullptr);
  OpenSessionArgs open2 = open;
  auto info2 = other->OpenSession(open2);
  ASSERT_TRUE(info2.ok());
  int answered_while_running = 0;
  double worst_ms = 0;
  while (true) {
    auto poll = (*agent)->Poll(ack->job_id);
    ASSERT_TRUE(poll.ok()) << poll.status().ToString();
    if (poll->done) break;
    auto t0 = std::chrono::steady_clock::now();
    auto s = other->NextStep(info2->session->id);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    worst_ms = std::max(
        worst_ms,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    answered_while_running++;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(answered_while_running, 0);
  EXPECT_LT(worst_ms, 500.0) << "a next-step answer waited for the evaluation";

  auto result = (*agent)->Poll(ack->job_id, 1000ms);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->done);
  EXPECT_EQ(result->status, fb::OutcomeStatus::Ok) << result->diagnostics;
  EXPECT_GT(result->speedup, 0.0);
  EXPECT_NE(result->transition_id, 0u);
  {
    std::lock_guard<std::mutex> lock(mu);
    // The client sees the evaluation move through its stages, in order: queued, running on a
    // device, the worker's compile, verification and timing, done.
    std::string seen;
    for (const auto& s : stages) seen += "[" + s + "]";
    auto at = [&](const std::string& prefix) {
      for (size_t i = 0; i < stages.size(); ++i)
        if (stages[i].rfind(prefix, 0) == 0) return int(i);
      return -1;
    };
    EXPECT_EQ(at("queued"), 0) << seen;
    EXPECT_GT(at("running"), at("queued")) << seen;
    EXPECT_GT(at("compile candidate"), at("running")) << seen;
    EXPECT_GT(at("verify"), at("compile candidate")) << seen;
    EXPECT_GT(at("time candidate"), at("verify")) << seen;
    EXPECT_EQ(at("done"), int(stages.size()) - 1) << seen;
  }
  // Submit-and-wait of a candidate that does not compile: the reply comes when it is done.
  submit.source = "this is not C++";
  submit.progress = false;
  auto bad = (*agent)->SubmitAndWait(submit, 300s);
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_TRUE(bad->done);
  EXPECT_EQ(bad->status, fb::OutcomeStatus::CompileError);
  EXPECT_FALSE(bad->diagnostics.empty());

  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = sid;
  auto tr = (*agent)->Query(q);
  ASSERT_TRUE(tr.ok());
  ASSERT_EQ(tr->transitions.size(), 2u);
  EXPECT_TRUE(tr->transitions[0]->verified);
  // The key the client was given is the key the step was recorded and its candidate stored under
  // (one hash for the whole system; it was an unrelated FNV hash before).
  int named = 0;
  for (const auto& t : tr->transitions) named += t->candidate_hash == ack->candidate_hash;
  EXPECT_EQ(named, 1) << "SubmitAck.candidate_hash names no recorded step";
  EXPECT_EQ(ack->candidate_hash, CandidateKey("cpp", info->baseline_source));
  auto closed = (*agent)->CloseSession(sid);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->steps, 2u);
  EXPECT_EQ(closed->state, fb::SessionState::Closed);
  submit.source = info->baseline_source;
  EXPECT_FALSE((*agent)->Submit(submit).ok()) << "a closed session accepted a submission";
}

// A stand-in for Nsight Compute: runs the program it is given (the worker's one-call mode, so the
// candidate's call really happens), checks that the call ran, then prints ncu's CSV for one
// memory-bound kernel (dram 85 %, sm 20 %, warps active 70 %). It leaves a marker in the eval
// cache (writable by the sandboxed worker) and fails (exit 1, no CSV) while `fail` exists.
std::string WriteFakeNcu(const std::string& dir, const std::string& marker,
                         const std::string& fail_flag, const std::string& slow_flag) {
  std::string path = dir + "/ncu";
  std::ofstream f(path);
  f << "#!/bin/sh\n"
    << "touch '" << marker << "'\n"
    << "if [ -e '" << fail_flag << "' ]; then echo '==ERROR== ERR_NVGPUCTRPERM'; exit 1; fi\n"
    << "if [ -e '" << slow_flag << "' ]; then sleep 120; fi\n"
    << "case \"$*\" in *--csv*) ;; *) echo 'no --csv'; exit 9;; esac\n"
    << "# ncu --metrics LIST --csv --target-processes all PROGRAM ARGS...\n"
    << "while [ $# -gt 0 ] && [ \"$1\" != all ]; do shift; done\n"
    << "shift\n"
    << "out=$(\"$@\" 2>&1); rc=$?\n"
    << "echo \"$out\"\n"
    << "if [ $rc -ne 0 ]; then echo \"program failed ($rc)\"; exit 4; fi\n"
    << "case \"$out\" in *'\"status\":\"Ok\"'*) ;; *) echo 'the call did not run'; exit 5;; esac\n"
    << "K='\"0\",\"4242\",\"htam-eval-worker\",\"127.0.0.1\",\"relu(const float *, float *, long)\""
       ",\"1\",\"7\",\"(256, 1, 1)\",\"(4096, 1, 1)\",\"0\",\"9.0\",\"Command line profiler "
       "metrics\"'\n"
    << "echo '\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\","
       "\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\","
       "\"Metric Unit\",\"Metric Value\"'\n"
    << "echo \"$K\",'\"dram__throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"85.00\"'\n"
    << "echo \"$K\",'\"gpu__time_duration.sum\",\"usecond\",\"24.06\"'\n"
    << "echo \"$K\",'\"sm__throughput.avg.pct_of_peak_sustained_elapsed\",\"%\",\"20.00\"'\n"
    << "echo \"$K\",'\"sm__warps_active.avg.pct_of_peak_sustained_active\",\"%\",\"70.00\"'\n";
  f.close();
  chmod(path.c_str(), 0755);
  return path;
}

TEST_F(DaemonTest, ProfileOnRequestFillsTheProfileAndTheStatesBottleneck) {
  const std::string marker = dir_ + "/eval-cache/fake-ncu-ran";
  const std::string fail_flag = dir_ + "/ncu-fails";
  const std::string slow_flag = dir_ + "/ncu-hangs";
  const std::string ncu = WriteFakeNcu(dir_, marker, fail_flag, slow_flag);
  // The CPU plugin offers no profiler; this build of it carries the CUDA plugin's (Nsight Compute)
  // entry points, so the whole path runs here (tests/integration/cpu_plugin_with_ncu.cc).
  DaemonProcess d(dir_, {{"eval.ncu", ncu},
                         {"eval.cuda_profile_timeout_s", "10"},
                         {"eval.plugin_dir", HTAM_NCU_TEST_PLUGIN_DIR}});
  ASSERT_TRUE(d.Start());
  auto c = d.Connect(600s);
  ASSERT_NE(c, nullptr);
  OpenSessionArgs open;
  open.task = kRelu;
  open.backend = "cpu";
  auto info = c->OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint64_t sid = info->session->id;
  auto submit = [&](bool profile, const std::string& summary) {
    auto step = c->NextStep(sid);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    SubmitArgs a;
    a.session_id = sid;
    a.source = info->baseline_source;
    a.direction_id = step.ok() ? step->direction->id : 0;
    a.summary = summary;
    a.profile = profile;
    return c->SubmitAndWait(a, 600s);
  };

  // Profiled: the fractions of ncu's percentages, the class in the diagnostics.
  auto r = submit(true, "profiled");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  ASSERT_NE(r->profile, nullptr);
  EXPECT_NEAR(r->profile->dram_throughput, 0.85, 1e-4) << r->diagnostics;
  EXPECT_NEAR(r->profile->sm_throughput, 0.20, 1e-4);
  EXPECT_NEAR(r->profile->occupancy, 0.70, 1e-4);
  EXPECT_NE(r->diagnostics.find("ncu: Memory-bound"), std::string::npos) << r->diagnostics;
  EXPECT_TRUE(std::filesystem::exists(marker));

  // Not asked: no profile, ncu never runs.
  std::filesystem::remove(marker);
  auto plain = submit(false, "not profiled");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_EQ(plain->status, fb::OutcomeStatus::Ok) << plain->diagnostics;
  ASSERT_NE(plain->profile, nullptr);
  EXPECT_EQ(plain->profile->dram_throughput, -1);
  EXPECT_EQ(plain->profile->sm_throughput, -1);
  EXPECT_EQ(plain->profile->occupancy, -1);
  EXPECT_EQ(plain->diagnostics.find("ncu"), std::string::npos) << plain->diagnostics;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "ncu ran for a submission without profile";

  // ncu fails (exit 1, no CSV): still Ok, the profile is unknown and the diagnostics say why.
  std::ofstream(fail_flag) << "1";
  auto failed = submit(true, "ncu fails");
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(failed->status, fb::OutcomeStatus::Ok) << failed->diagnostics;
  EXPECT_GT(failed->speedup, 0.0);
  ASSERT_NE(failed->profile, nullptr);
  EXPECT_EQ(failed->profile->dram_throughput, -1);
  EXPECT_EQ(failed->profile->occupancy, -1);
  EXPECT_NE(failed->diagnostics.find("profile unavailable: "), std::string::npos)
      << failed->diagnostics;
  EXPECT_NE(failed->diagnostics.find("exited with code 1"), std::string::npos)
      << failed->diagnostics;
  EXPECT_TRUE(std::filesystem::exists(marker));

  // ncu hangs: killed at eval.cuda_profile_timeout_s, the result is still Ok.
  std::filesystem::remove(fail_flag);
  std::ofstream(slow_flag) << "1";
  auto t0 = std::chrono::steady_clock::now();
  auto slow = submit(true, "ncu hangs");
  double slow_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow->status, fb::OutcomeStatus::Ok) << slow->diagnostics;
  ASSERT_NE(slow->profile, nullptr);
  EXPECT_EQ(slow->profile->dram_throughput, -1);
  EXPECT_NE(slow->diagnostics.find("profile unavailable: ncu ran past 10 s"), std::string::npos)
      << slow->diagnostics;
  EXPECT_LT(slow_s, 100.0) << "the hanging ncu was not stopped at its wall limit";
  std::filesystem::remove(slow_flag);

  // No ncu at the configured path: the same, and the note names the path.
  std::filesystem::remove(ncu);
  auto missing = submit(true, "ncu missing");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_EQ(missing->status, fb::OutcomeStatus::Ok) << missing->diagnostics;
  ASSERT_NE(missing->profile, nullptr);
  EXPECT_EQ(missing->profile->sm_throughput, -1);
  EXPECT_NE(missing->diagnostics.find("profile unavailable: Nsight Compute (ncu) at " + ncu),
            std::string::npos)
      << missing->diagnostics;

  // The memory: the profiled step started from an unknown state; every later step of the session
  // is in the measured class (failed profiles do not erase it), and the profile is kept.
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = sid;
  auto tr = c->Query(q);
  ASSERT_TRUE(tr.ok()) << tr.status().ToString();
  ASSERT_EQ(tr->transitions.size(), 5u);
  std::sort(tr->transitions.begin(), tr->transitions.end(),
            [](const auto& a, const auto& b) { return a->step < b->step; });
  ASSERT_NE(tr->transitions[0]->state, nullptr);
  EXPECT_EQ(tr->transitions[0]->state->bottleneck, fb::Bottleneck::Unknown);
  ASSERT_NE(tr->transitions[0]->profile, nullptr);
  EXPECT_NEAR(tr->transitions[0]->profile->dram_throughput, 0.85, 1e-4);
  for (size_t i = 1; i < tr->transitions.size(); ++i) {
    ASSERT_NE(tr->transitions[i]->state, nullptr);
    EXPECT_EQ(tr->transitions[i]->state->bottleneck, fb::Bottleneck::Memory) << "step " << i;
  }
}

// A backend whose plugin has no profile entry points (the CPU plugin): a profile request leaves
// the result Ok, with a note that says so, no fractions and no class; a configured ncu never runs.
TEST_F(DaemonTest, ProfileOnABackendWithoutAProfilerIsANoteAndTheResultStaysOk) {
  const std::string marker = dir_ + "/eval-cache/fake-ncu-ran";
  const std::string ncu = WriteFakeNcu(dir_, marker, dir_ + "/ncu-fails", dir_ + "/ncu-hangs");
  DaemonProcess d(dir_, {{"eval.ncu", ncu}});
  ASSERT_TRUE(d.Start());
  auto c = d.Connect(600s);
  ASSERT_NE(c, nullptr);
  OpenSessionArgs open;
  open.task = kRelu;
  open.backend = "cpu";
  auto info = c->OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto step = c->NextStep(info->session->id);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  SubmitArgs a;
  a.session_id = info->session->id;
  a.source = info->baseline_source;
  a.direction_id = step->direction->id;
  a.summary = "profiled without a profiler";
  a.profile = true;
  auto r = c->SubmitAndWait(a, 600s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, fb::OutcomeStatus::Ok) << r->diagnostics;
  EXPECT_GT(r->speedup, 0.0);
  ASSERT_NE(r->profile, nullptr);
  EXPECT_EQ(r->profile->dram_throughput, -1);
  EXPECT_EQ(r->profile->sm_throughput, -1);
  EXPECT_EQ(r->profile->occupancy, -1);
  EXPECT_NE(r->diagnostics.find("profile unavailable: the cpu backend offers no profiler"),
            std::string::npos)
      << r->diagnostics;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a profiler ran for a backend that has none";
}

TEST_F(DaemonTest, KillNineAndRestartResumesTheSessionWithEveryAcknowledgedStep) {
  auto d = std::make_unique<DaemonProcess>(dir_);
  ASSERT_TRUE(d->Start());
  ClientOptions o;
  o.endpoint = d->endpoint();
  o.timeout = 3s;
  o.retries = 5;
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok());
  OpenSessionArgs open;
  open.task = kRelu;
  open.budget = 10;
  auto info = (*c)->OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint64_t sid = info->session->id;
  std::vector<uint64_t> acked;
  for (int i = 0; i < 4; ++i) {
    auto step = (*c)->NextStep(sid);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    RecordArgs r;
    r.session_id = sid;
    r.direction_id = step->direction->id;
    r.summary = "external step " + std::to_string(i);
    // The client's outcome class is kept (odd steps report a wrong result), never verified.
    r.status = i % 2 ? fb::OutcomeStatus::Incorrect : fb::OutcomeStatus::Ok;
    r.speedup_after = 1.0f + 0.1f * static_cast<float>(i);
    r.median_us = 100.0 - i;
    auto t = (*c)->Record(r);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    acked.push_back(*t);
  }
  d->Kill();  // kill -9: no clean shutdown
  // The PID lock is released with the process; a new daemon takes the same store.
  d = std::make_unique<DaemonProcess>(dir_);
  ASSERT_TRUE(d->Start()) << d->Log();
  // The same client object reconnects by itself (retries of idempotent requests).
  OpenSessionArgs resume;
  resume.session_id = sid;
  auto again = (*c)->OpenSession(resume);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->session->steps, acked.size());
  EXPECT_EQ(again->session->state, fb::SessionState::Open);
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = sid;
  auto tr = (*c)->Query(q);
  ASSERT_TRUE(tr.ok());
  ASSERT_EQ(tr->transitions.size(), acked.size());
  for (auto& t : tr->transitions) {
    auto pos = std::find(acked.begin(), acked.end(), t->id);
    ASSERT_NE(pos, acked.end());
    EXPECT_FALSE(t->verified);
    EXPECT_EQ(t->status,
              (pos - acked.begin()) % 2 ? fb::OutcomeStatus::Incorrect : fb::OutcomeStatus::Ok);
  }
  // And the loop goes on where it stopped.
  auto next = (*c)->NextStep(sid);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->step, acked.size());
}

TEST_F(DaemonTest, TwoDaemonsNeverOpenTheSameStore) {
  DaemonProcess first(dir_);
  ASSERT_TRUE(first.Start());
  DaemonProcess second(dir_, {{"server.bind", "ipc://" + dir_ + "/second.sock"}});
  ASSERT_TRUE(second.Start(false));
  EXPECT_EQ(second.WaitExit(), 1);
  EXPECT_NE(second.Log().find("another htamd (pid " + std::to_string(first.pid())),
            std::string::npos);
  EXPECT_NE(first.Connect(), nullptr) << "the first daemon must go on serving";
}

TEST_F(DaemonTest, NonLoopbackBindWithoutCurveIsRefused) {
  DaemonProcess d(dir_, {{"server.bind", "tcp://0.0.0.0:0"}});
  ASSERT_TRUE(d.Start(false));
  EXPECT_EQ(d.WaitExit(), 1);
  EXPECT_NE(d.Log().find("refusing to bind tcp://0.0.0.0:0 without CURVE"), std::string::npos);
}

// An answer sized for an agent: on a store with hundreds of learned strategies, each with a
// verified example of a real kernel's size, the default NextStep stays within 8 KB as htamd
// encodes it besides the examples it carries, and those within memory.answer_example_bytes
// (memory.listed_strategies, the detailed head's text once); NextStep.full carries every
// strategy of top_k_strategies with its text and example, and more evidence.
TEST_F(DaemonTest, NextStepAnswerIsCompactByDefaultAndCompleteOnRequest) {
  {  // the store, filled through the memory library before htamd starts
    memory::MemoryOptions o;
    o.dir = dir_ + "/store";
    auto m = memory::Memory::Open(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    fb::TaskT task;
    task.name = "fill_relu";
    task.category = "elementwise";
    task.description = "a task whose sessions taught the store";
    task.flops = 1 << 20;
    task.bytes = 8 << 20;
    auto tid = (*m)->PutTask(task);
    ASSERT_TRUE(tid.ok());
    auto dirs = (*m)->ListDirections();
    ASSERT_TRUE(dirs.ok());
    std::string body;
    for (int line = 0; line < 24; ++line)
      body += "  for (long long i = 0; i < n; ++i) { y[i] = x[i] > 0 ? x[i] : 0; /* " +
              std::to_string(line) + " */ }\n";
    for (int s = 0; s < 40; ++s) {
      auto session = (*m)->OpenSession(*tid, "cpu", "", "fill", "model", 0);
      ASSERT_TRUE(session.ok());
      std::vector<memory::StepInput> batch;
      double speedup = 1;
      for (int k = 0; k < 10; ++k) {
        memory::StepInput in;
        in.session_id = session->id;
        in.direction_id = (*dirs)[(s * 10 + k) % dirs->size()].id;
        in.status = fb::OutcomeStatus::Ok;
        speedup *= 1.2;
        in.speedup_after = speedup;
        in.verified = true;
        const int n = s * 10 + k;
        in.summary = "learned step " + std::to_string(n) + ": split the loop in " +
                     std::to_string(2 + n % 7) + " parts and unroll by " + std::to_string(n);
        in.language = "cpp";
        in.source = "// example " + std::to_string(n) + "\nextern \"C\" void k(const float* x, " +
                    "float* y, long long n) {\n" + body + "}\n";
        batch.push_back(std::move(in));
      }
      ASSERT_TRUE((*m)->RecordSteps(batch).ok());
    }
    auto strategies = (*m)->ListStrategies(memory::StrategyFilter());
    ASSERT_TRUE(strategies.ok());
    ASSERT_GE(strategies->size(), 300u);  // the seed's and about 400 learned
  }
  DaemonProcess d(dir_);
  ASSERT_TRUE(d.Start());
  auto c = d.Connect();
  ASSERT_NE(c, nullptr);
  OpenSessionArgs open;
  open.task = kRelu;
  auto info = c->OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint64_t sid = info->session->id;
  auto compact = c->NextStep(sid);
  auto full = c->NextStep(sid, {}, /*full=*/true);
  ASSERT_TRUE(compact.ok()) << compact.status().ToString();
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const memory::MemoryOptions defaults;
  EXPECT_EQ(compact->strategies.size(), static_cast<size_t>(defaults.listed_strategies));
  EXPECT_EQ(full->strategies.size(), static_cast<size_t>(defaults.top_k_strategies));
  size_t compact_examples = 0, full_examples = 0, example_bytes = 0;
  for (size_t i = 0; i < compact->strategies.size(); ++i) {
    const auto& h = *compact->strategies[i];
    // The same ranking: the compact list is the head of the full one.
    EXPECT_EQ(h.strategy->id, full->strategies[i]->strategy->id) << i;
    // The prompt names the detailed head and repeats none of the strategies' text.
    if (i < static_cast<size_t>(defaults.detailed_strategies))
      EXPECT_NE(compact->prompt_context.find(std::to_string(i + 1) + ". " + h.strategy->name),
                std::string::npos)
          << h.strategy->name;
    if (!h.strategy->description.empty())
      EXPECT_EQ(compact->prompt_context.find(h.strategy->description), std::string::npos)
          << h.strategy->name << "\n" << compact->prompt_context;
    if (i < static_cast<size_t>(defaults.detailed_strategies))
      EXPECT_FALSE(h.strategy->description.empty()) << h.strategy->name;
    else
      EXPECT_TRUE(h.strategy->description.empty()) << h.strategy->name;
    if (!h.example_source.empty()) {
      ++compact_examples;
      example_bytes += h.example_source.size();
      EXPECT_EQ(h.example_source, full->strategies[i]->example_source);
    }
  }
  for (const auto& h : full->strategies) {
    EXPECT_FALSE(h->strategy->description.empty()) << h->strategy->name;
    EXPECT_NE(full->prompt_context.find(h->strategy->description), std::string::npos)
        << h->strategy->name;
    // Every strategy with a verified example carries it in full.
    EXPECT_EQ(h->strategy->example_candidate.empty(), h->example_source.empty())
        << h->strategy->name;
    if (!h->example_source.empty()) ++full_examples;
  }
  EXPECT_GE(compact_examples, 1u);
  EXPECT_GT(full_examples, compact_examples);
  EXPECT_GE(full->evidence.size(), compact->evidence.size());
  const std::string prompt = compact->prompt_context;
  const size_t compact_bytes = server::EncodeReply(1, fb::StepT(std::move(*compact))).size();
  const size_t full_bytes = server::EncodeReply(1, fb::StepT(std::move(*full))).size();
  // 8 KB besides the examples, which are held to memory.answer_example_bytes.
  EXPECT_LE(example_bytes, static_cast<size_t>(defaults.answer_example_bytes));
  EXPECT_LE(compact_bytes - example_bytes, 8192u)
      << "full: " << full_bytes << "\n" << prompt;
  EXPECT_GT(full_bytes, 4 * compact_bytes) << compact_bytes;
}

// A NextStep answered on the poll loop (server.inline_next_step, the default, when no read is
// queued or running) says the same as one handed to a reader thread, and a flood of pipelined
// NextSteps and Queries from several threads, which exercises both routes, gets every reply.
TEST_F(DaemonTest, NextStepOnTheLoopAnswersAsOnAReaderThread) {
  std::vector<std::string> answers;
  uint64_t sid = 0;
  for (const char* inline_on : {"false", "true"}) {
    DaemonProcess d(dir_, {{"server.inline_next_step", inline_on}});
    ASSERT_TRUE(d.Start()) << inline_on;
    auto c = d.Connect();
    ASSERT_NE(c, nullptr);
    if (sid == 0) {
      OpenSessionArgs open;
      open.task = kRelu;
      auto info = c->OpenSession(open);
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      sid = info->session->id;
    }
    auto step = c->NextStep(sid);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    ASSERT_NE(step->direction, nullptr);
    std::string a = step->direction->name + "|" + step->prompt_context;
    for (const auto& h : step->strategies) a += "|" + h->strategy->name;
    answers.push_back(a);
    if (std::string(inline_on) == "true") {
      std::vector<std::future<Result<fb::StepT>>> steps;
      for (int i = 0; i < 200; ++i) steps.push_back(c->NextStepAsync(sid));  // < client_max_in_flight
      std::vector<std::thread> readers;
      std::atomic<int> failures{0};
      for (int t = 0; t < 3; ++t)
        readers.emplace_back([&] {
          for (int i = 0; i < 30; ++i)
            if (!c->NextStep(sid).ok()) failures++;
        });
      for (auto& th : readers) th.join();
      EXPECT_EQ(failures.load(), 0);
      for (auto& f : steps) {
        auto r = f.get();
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ASSERT_NE(r->direction, nullptr);
        EXPECT_EQ(r->direction->name, step->direction->name);
      }
    }
    d.Kill();
  }
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0], answers[1]);
}

}  // namespace
}  // namespace htam
