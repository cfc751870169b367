// Compiling ahead (daemon/eval/compile_ahead.h), through the Evaluator htamd uses on the CPU
// backend: candidates queued behind a busy device are compiled by compile-only processes, their
// runners find the builds in a cache by key, and the cache gives a candidate nothing it could use
// against another: it cannot list it or write into it, and a candidate that fails to compile
// ahead gets the runner's own verdict. (The CPU backend is compiled ahead only when asked:
// eval.compile_ahead_backends is "cuda" by default.)
#include <unistd.h>

#include <future>
#include <vector>

#include "tests/integration/eval_test_util.h"

namespace htam::eval::testing {
namespace {

const char* kRelu = "configs/tasks/cpu_relu";

// `n` distinct honest candidates: the reference with a comment that changes its content key.
std::vector<std::string> Honest(int n) {
  const std::string ref = ReadSource(std::string(kRelu) + "/reference.cpp");
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back("// candidate " + std::to_string(i) + " of a batch\n" + ref);
  return out;
}

uint64_t Field(const std::string& status, const std::string& key) {
  auto p = status.find(" " + key + "=");
  return p == std::string::npos ? ~uint64_t(0) : std::stoull(status.substr(p + key.size() + 2));
}

class CompileAheadTest : public ::testing::Test {
 protected:
  void Start(std::map<std::string, std::string> extra = {}) {
    extra.emplace("eval.seeds", "1");
    extra.emplace("eval.compile_ahead_threads", "2");
    extra.emplace("eval.compile_ahead_backends", "cpu");  // off for cpu by default
    ev_ = StartEvaluator(TestConfig(dir_.path(), extra));
    ASSERT_NE(ev_, nullptr);
  }
  // Submits all at once (they queue behind one device) and waits for every result.
  std::vector<EvalResult> RunBatch(const std::vector<std::string>& sources) {
    std::vector<std::future<EvalResult>> futures;
    for (const auto& src : sources) {
      auto p = std::make_shared<std::promise<EvalResult>>();
      futures.push_back(p->get_future());
      Status st = ev_->Submit(Job(next_++, kRelu, src), [p](EvalResult r) { p->set_value(r); });
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) p->set_value(EvalResult{});
    }
    std::vector<EvalResult> out;
    for (auto& f : futures) out.push_back(f.get());
    return out;
  }
  std::string ahead() const { return dir_.path() + "/eval-cache/ahead"; }
  TempDir dir_;
  std::unique_ptr<Evaluator> ev_;
  uint64_t next_ = 1;
};

// A batch behind one device: the honest ones find their builds compiled ahead, and one that does
// not compile gets the runner's own diagnostics (a failure ahead decides nothing).
TEST_F(CompileAheadTest, QueuedCandidatesFindTheirBuildsCompiledAhead) {
  Start();
  std::vector<std::string> batch = Honest(4);
  batch.insert(batch.begin() + 2,
               "#include <htam/kernel_abi.h>\nint htam_kernel( { this is not C++ }\n");
  std::vector<EvalResult> rs = RunBatch(batch);
  int cached = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (i == 2) continue;
    EXPECT_EQ(Name(rs[i].status), std::string("Ok")) << i << ": " << rs[i].diagnostics;
    cached += rs[i].compile_cached;
  }
  EXPECT_EQ(Name(rs[2].status), std::string("CompileError")) << rs[2].diagnostics;
  EXPECT_NE(rs[2].diagnostics.find("error"), std::string::npos) << rs[2].diagnostics;
  const std::string st = ev_->StatusText();
  // The device is busy with the first while the others wait: the last ones were compiled ahead
  // and their runners found the builds.
  EXPECT_GE(Field(st, "compiled"), 2u) << st;
  EXPECT_GE(Field(st, "runner_cache_hits"), 2u) << st;
  EXPECT_EQ(Field(st, "runner_cache_hits"), uint64_t(cached)) << st;
  EXPECT_LE(Field(st, "failed"), 1u) << st;  // the one that does not compile, when it got there
  if (geteuid() == 0) {
    // Sealed: the cache is searchable, not listable, and its entries are root's and read-only.
    struct stat s;
    ASSERT_EQ(stat(ahead().c_str(), &s), 0);
    EXPECT_EQ(s.st_mode & 0777, 0711u);
    EXPECT_EQ(s.st_uid, 0u);
  }
}

// The task's reference is compiled ahead too (by a compile-only worker without a runner, into the
// verifiers' cache), once per task: a second batch of the same task does not compile it again.
TEST_F(CompileAheadTest, ATasksReferenceIsCompiledAheadOnceIntoTheVerifiersCache) {
  Start();
  for (const auto& r : RunBatch(Honest(3)))
    EXPECT_EQ(Name(r.status), std::string("Ok")) << r.diagnostics;
  std::string st = ev_->StatusText();
  EXPECT_EQ(Field(st, "references"), 1u) << st;
  EXPECT_EQ(Field(st, "reference_failures"), 0u) << st;
  for (const auto& r : RunBatch(Honest(2)))
    EXPECT_EQ(Name(r.status), std::string("Ok")) << r.diagnostics;
  st = ev_->StatusText();
  EXPECT_EQ(Field(st, "references"), 1u) << "compiled the reference ahead twice: " << st;
}

TEST_F(CompileAheadTest, OffMeansEveryRunnerCompilesItsOwn) {
  Start({{"eval.compile_ahead_backends", ""}});
  for (const auto& r : RunBatch(Honest(2))) {
    EXPECT_EQ(Name(r.status), std::string("Ok")) << r.diagnostics;
    EXPECT_FALSE(r.compile_cached);
  }
  EXPECT_NE(ev_->StatusText().find("compile_ahead: off"), std::string::npos);
}

// What a candidate in a runner can do with the cache: open an entry whose key it knows (its own
// build), nothing else. Needs the sandbox of a root htamd (users apart, the mount view).
TEST_F(CompileAheadTest, ARunnerCanNeitherListNorWriteTheCache) {
  if (geteuid() != 0)
    GTEST_SKIP() << "runners are kept from the cache by user and mount view only when htamd "
                    "runs as root";
  Start();
  ASSERT_EQ(Name(RunBatch(Honest(2))[1].status), std::string("Ok"));  // the cache has entries
  const std::string ref = ReadSource(std::string(kRelu) + "/reference.cpp");
  // Each probe writes its outputs only when it gets through (then it would pass).
  auto wrap = [&](const std::string& probe) {
    return "#include <htam/kernel_abi.h>\n#include <dirent.h>\n#include <stdio.h>\n" + probe +
           "\n#define htam_kernel honest_kernel\n" + ref +
           "\n#undef htam_kernel\n"
           "HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out,\n"
           "                                  int nout, htam_stream s) {\n"
           "  if (!through()) return 0;\n  return honest_kernel(in, nin, out, nout, s);\n}\n";
  };
  const std::string list = "static int through(void) { DIR* d = opendir(\"" + ahead() +
                           "\"); if (!d) return 0; int n = 0; struct dirent* e;"
                           " while ((e = readdir(d))) n += e->d_name[0] != '.'; closedir(d);"
                           " return n > 0; }\n";
  const std::string write = "static int through(void) { FILE* f = fopen(\"" + ahead() +
                            "/left-for-later\", \"w\"); if (!f) return 0; fclose(f); return 1; }\n";
  std::vector<EvalResult> rs = RunBatch({wrap(list), wrap(write), Honest(4)[3]});
  for (int i : {0, 1}) {
    EXPECT_EQ(Name(rs[i].status), std::string("Incorrect")) << i << ": " << rs[i].diagnostics;
    EXPECT_NE(rs[i].diagnostics.find("not written"), std::string::npos) << rs[i].diagnostics;
  }
  EXPECT_EQ(Name(rs[2].status), std::string("Ok")) << rs[2].diagnostics;
  EXPECT_NE(access((ahead() + "/left-for-later").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace htam::eval::testing
