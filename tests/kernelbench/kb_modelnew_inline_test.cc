// A ModelNew with a custom C++ CPU kernel through torch.utils.cpp_extension.load_inline, evaluated
// twice through the daemon's evaluator: the first evaluation compiles (PyTorch's headers: minutes
// on a small machine), the second loads the build from the content-keyed build cache
// (eval.kernelbench_build_cache), which the runner can add to but not list, and whose entries
// are sealed after the job. Skips without torch or without a C++ compiler and ninja.
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <future>

#include "tests/integration/eval_test_util.h"

namespace htam::eval::testing {
namespace {

TEST(kb_modelnew_inline, LoadInlineBuildIsCachedByContent) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3: install python3-torch";
  if (std::system("command -v c++ >/dev/null && command -v ninja >/dev/null") != 0)
    GTEST_SKIP() << "load_inline needs c++ and ninja on PATH";
  TempDir dir;
  auto ev = StartEvaluator(TestConfig(dir.path(), {{"eval.job_timeout_s", "900"}}));
  ASSERT_NE(ev, nullptr);
  const std::string src = ReadSource("tests/kernelbench/modelnew/inline_cpp.py");
  auto eval = [&](uint64_t id) {
    EvalJob j = Job(id, "tests/kernelbench/tasks/kb_linear_relu_open", src);
    j.language = "kernelbench";
    return ev->Evaluate(j);
  };
  auto miss = eval(1);
  ASSERT_TRUE(miss.ok()) << miss.status().ToString();
  EXPECT_EQ(Name(miss->status), std::string("Ok")) << miss->diagnostics;
  EXPECT_NE(miss->diagnostics.find("htam_test_linear_relu (built,"), std::string::npos)
      << miss->diagnostics;
  auto hit = eval(2);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(Name(hit->status), std::string("Ok")) << hit->diagnostics;
  EXPECT_NE(hit->diagnostics.find("htam_test_linear_relu (build cache hit,"), std::string::npos)
      << hit->diagnostics;
  // The build's own seconds, as the evaluation reports them: the whole evaluation's wall time
  // also holds PyTorch's import and the timing, which a loaded machine stretches by more than
  // the build saves (once 28.3 s for the hit against 23.9 s for the miss under the whole suite).
  auto build_s = [](const std::string& d, const std::string& label) {
    size_t at = d.find("htam_test_linear_relu (" + label + ", ");
    if (at == std::string::npos) return -1.0;
    return std::atof(d.c_str() + d.find(", ", at) + 2);
  };
  const double built = build_s(miss->diagnostics, "built");
  const double cached = build_s(hit->diagnostics, "build cache hit");
  EXPECT_GT(built, 0) << miss->diagnostics;
  EXPECT_GE(cached, 0) << hit->diagnostics;
  EXPECT_LT(cached * 10, built) << "a cache hit takes a small part of a build";
  auto part = [](const std::string& d) {
    size_t at = d.find("load_inline: ");
    return at == std::string::npos ? d : d.substr(at, d.find(';', at) - at);
  };
  std::printf("load_inline: miss %.1f s, hit %.1f s (whole evaluation, wall)\n  miss: %s\n"
              "  hit: %s\n",
              miss->wall_ms / 1e3, hit->wall_ms / 1e3, part(miss->diagnostics).c_str(),
              part(hit->diagnostics).c_str());
  // As root with a sandbox user: the runner may add entries but not list the directory, and
  // the entry it added is sealed (root-owned, read-only) once the job is over.
  const std::string cache = dir.path() + "/eval-cache/kernelbench-build";
  struct stat st;
  ASSERT_EQ(stat(cache.c_str(), &st), 0) << cache;
  if (geteuid() == 0) {
    EXPECT_EQ(st.st_mode & 07777, 01733u);
    int sos = 0, sealed = 0;
    std::string cmd = "find " + cache + " -maxdepth 1 -name '*.so' -user root -perm 0444 | wc -l";
    FILE* p = popen(cmd.c_str(), "r");
    if (p && fscanf(p, "%d", &sealed) == 1) sos = sealed;
    if (p) pclose(p);
    EXPECT_EQ(sos, 1) << "one sealed build in " << cache;
  }
}

}  // namespace
}  // namespace htam::eval::testing
