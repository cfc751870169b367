// The answer key out of the candidate's reach (the CPU backend through the Evaluator htamd uses):
// candidates that would pass only by reading what the verifier holds — the task's reference
// source, the golden data cache, the verifier's memory, the reference's compiled object, or what
// an earlier candidate left behind. Each is an honest kernel wrapped so that it writes its outputs
// ONLY when its theft succeeds: reachable, it passes (Ok, a fake "gain"); out of reach, its outputs
// stay unwritten and the gate says so. A control whose "theft" is of something it may read (its
// own temp dir) passes, so the wrapper itself is shown to work.
#include <unistd.h>

#include <future>
#include <regex>
#include <vector>

#include "base/paths.h"
#include "tests/integration/eval_test_util.h"

namespace htam::eval::testing {
namespace {

const char* kRelu = "configs/tasks/cpu_relu";
const char* kLinearRelu = "configs/tasks/kb_linear_relu";

// `probe` defines `static int stolen(void)`: 1 when the secret was reachable.
std::string Wrap(const std::string& probe, const std::string& honest_file) {
  std::string honest = ReadSource(honest_file);
  return "#include <htam/kernel_abi.h>\n#include <dirent.h>\n#include <dlfcn.h>\n"
         "#include <fcntl.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
         "#include <sys/ptrace.h>\n#include <sys/uio.h>\n#include <unistd.h>\n" +
         probe + "\n#define htam_kernel honest_kernel\n" + honest +
         "\n#undef htam_kernel\n"
         "HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out,\n"
         "                                  int nout, htam_stream s) {\n"
         "  if (!stolen()) return 0;  /* nothing to copy: outputs stay unwritten */\n"
         "  return honest_kernel(in, nin, out, nout, s);\n}\n";
}

std::string Abs(const std::string& rel) {
  char cwd[4096];
  return std::string(getcwd(cwd, sizeof cwd) ? cwd : ".") + "/" + rel;
}

// Any regular entry under `dir` (two levels), excluding names containing `skip`.
std::string ListProbe(const std::string& dir, const std::string& suffix) {
  return "static int any_in(const char* d, int depth) {\n"
         "  DIR* h = opendir(d); if (!h) return 0; struct dirent* e; int found = 0;\n"
         "  while (!found && (e = readdir(h))) {\n"
         "    if (e->d_name[0] == '.') continue;\n"
         "    char p[4096]; snprintf(p, sizeof p, \"%s/%s\", d, e->d_name);\n"
         "    size_t n = strlen(p), k = strlen(\"" + suffix + "\");\n"
         "    if (n >= k && strcmp(p + n - k, \"" + suffix + "\") == 0) {\n"
         "      int fd = open(p, O_RDONLY); if (fd >= 0) { char c; found = read(fd, &c, 1) == 1;"
         " close(fd); }\n"
         "    }\n"
         "    if (!found && depth > 0) found = any_in(p, depth - 1);\n"
         "  }\n  closedir(h); return found;\n}\n"
         "static int stolen(void) { return any_in(\"" + dir + "\", 3); }\n";
}

class AnswerKey : public ::testing::Test {
 protected:
  void SetUp() override {
    ev_ = StartEvaluator(TestConfig(dir_.path(), {{"eval.seeds", "2"},
                                                  {"server.tasks_dir", Abs("configs/tasks")}}));
    ASSERT_NE(ev_, nullptr);
  }
  EvalResult Run(const char* task, const std::string& source) {
    auto r = ev_->Evaluate(Job(next_++, task, source));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : EvalResult{};
  }
  void ExpectRejected(const char* what, const char* task, const std::string& source) {
    EvalResult r = Run(task, source);
    EXPECT_EQ(Name(r.status), std::string("Incorrect")) << what << ": " << r.diagnostics;
    EXPECT_NE(r.diagnostics.find("not written"), std::string::npos) << what << ": " << r.diagnostics;
    EXPECT_EQ(r.speedup, 0) << what << ": a rejected candidate claims no gain";
  }
  std::string cache() const { return dir_.path() + "/eval-cache"; }
  TempDir dir_;
  std::unique_ptr<Evaluator> ev_;
  uint64_t next_ = 1;
};

TEST_F(AnswerKey, ControlWrapperPassesWhenItsTheftIsAllowed) {
  EvalResult r = Run(kRelu, Wrap(ListProbe(".", ""), std::string(kRelu) + "/reference.cpp"));
  // An empty suffix matches every file: its own temp dir holds its compiled artifact.
  EXPECT_EQ(Name(r.status), std::string("Ok")) << r.diagnostics;
  EXPECT_NE(ev_->StatusText().find("runner=on"), std::string::npos) << ev_->StatusText();
}

TEST_F(AnswerKey, ReferenceSourceIsOutOfReach) {
  const std::string probe = "static int stolen(void) { FILE* f = fopen(\"" +
                            Abs(std::string(kRelu) + "/reference.cpp") +
                            "\", \"r\"); if (!f) return 0; fclose(f); return 1; }\n";
  ExpectRejected("reads the reference source", kRelu,
                 Wrap(probe, std::string(kRelu) + "/reference.cpp"));
}

TEST_F(AnswerKey, ReferenceObjectIsOutOfReach) {
  // The verifier compiled the reference into the compile cache: dlopen any shared object there
  // and find an htam_kernel in it (the candidate's own build is in its private temp dir).
  const std::string probe =
      "static int try_dir(const char* d, int depth) {\n"
      "  DIR* h = opendir(d); if (!h) return 0; struct dirent* e; int found = 0;\n"
      "  while (!found && (e = readdir(h))) {\n"
      "    if (e->d_name[0] == '.') continue;\n"
      "    char p[4096]; snprintf(p, sizeof p, \"%s/%s\", d, e->d_name);\n"
      "    size_t n = strlen(p);\n"
      "    if (n > 3 && strcmp(p + n - 3, \".so\") == 0) {\n"
      "      void* so = dlopen(p, RTLD_NOW | RTLD_LOCAL);\n"
      "      if (so && dlsym(so, \"htam_kernel\")) found = 1;\n"
      "    }\n"
      "    if (!found && depth > 0) found = try_dir(p, depth - 1);\n"
      "  }\n  closedir(h); return found;\n}\n"
      "static int stolen(void) { return try_dir(\"" + cache() + "\", 2); }\n";
  // First a job that leaves the reference's object in the cache.
  Run(kRelu, ReadSource(std::string(kRelu) + "/reference.cpp"));
  ExpectRejected("calls the reference's compiled object", kRelu,
                 Wrap(probe, std::string(kRelu) + "/reference.cpp"));
}

TEST_F(AnswerKey, VerifierMemoryIsOutOfReach) {
  // /proc/<verifier>/mem, ptrace and process_vm_readv on the process that holds the expected
  // outputs (the runner's parent; in-process it would be its own: /proc/self/mem is readable).
  const std::string probe =
      "static int stolen(void) {\n"
      "  pid_t v = getppid(); char p[64]; int ok = 0;\n"
      "  snprintf(p, sizeof p, \"/proc/%d/maps\", (int)v);\n"
      "  FILE* m = fopen(p, \"r\"); unsigned long lo = 0, hi = 0;\n"
      "  if (m) { ok = fscanf(m, \"%lx-%lx\", &lo, &hi) == 2; fclose(m); }\n"
      "  if (ok) { snprintf(p, sizeof p, \"/proc/%d/mem\", (int)v); int fd = open(p, O_RDONLY);\n"
      "    char b[16]; if (fd >= 0) { if (pread(fd, b, sizeof b, (off_t)lo) == sizeof b) "
      "return 1; close(fd); } }\n"
      "  char b[16]; struct iovec l = {b, sizeof b}, r = {(void*)lo, sizeof b};\n"
      "  if (lo && process_vm_readv(v, &l, 1, &r, 1, 0) == (ssize_t)sizeof b) return 1;\n"
      "  if (ptrace(PTRACE_ATTACH, v, 0, 0) == 0) { ptrace(PTRACE_DETACH, v, 0, 0); return 1; }\n"
      "  return 0;\n}\n";
  ExpectRejected("reads the verifier's memory", kRelu,
                 Wrap(probe, std::string(kRelu) + "/reference.cpp"));
}

TEST_F(AnswerKey, PreviousCandidatesLeaveNothingBehind) {
  // Candidate 1 (honest) leaves a file where a shared directory would keep it; candidate 2 passes
  // only if it finds it.
  const std::string stash = cache() + "/left-behind.txt";
  const std::string writer =
      "static int stolen(void) { FILE* f = fopen(\"" + stash +
      "\", \"w\"); if (f) { fputs(\"outputs\", f); fclose(f); } return 1; }\n";
  EvalResult first = Run(kRelu, Wrap(writer, std::string(kRelu) + "/reference.cpp"));
  EXPECT_EQ(Name(first.status), std::string("Ok")) << first.diagnostics;
  const std::string reader = "static int stolen(void) { FILE* f = fopen(\"" + stash +
                             "\", \"r\"); if (!f) return 0; fclose(f); return 1; }\n";
  ExpectRejected("reads a previous candidate's files", kRelu,
                 Wrap(reader, std::string(kRelu) + "/reference.cpp"));
}

// The verifier and its runner serve many jobs (eval.runner_jobs); a reset between jobs empties the
// runner's working directory, so a file an honest candidate leaves there (where its own compile
// outputs are) is gone for the next candidate, which then has nothing to copy.
TEST_F(AnswerKey, APersistentRunnerKeepsNoFileOfAnEarlierJob) {
  auto restarts = [&] {
    std::string t = ev_->StatusText();
    auto p = t.find("worker_restarts: ");
    return p == std::string::npos ? -1 : std::atoi(t.c_str() + p + 17);
  };
  const std::string writer =
      "static int stolen(void) { FILE* f = fopen(\"left-behind.txt\", \"w\"); if (f) {"
      " fputs(\"outputs\", f); fclose(f); } return 1; }\n";
  EvalResult first = Run(kRelu, Wrap(writer, std::string(kRelu) + "/reference.cpp"));
  ASSERT_EQ(Name(first.status), std::string("Ok")) << first.diagnostics;
  const int after_first = restarts();
  const std::string reader =
      "static int stolen(void) { FILE* f = fopen(\"left-behind.txt\", \"r\"); if (!f) return 0;"
      " fclose(f); return 1; }\n";
  // The control: in the same job, the file it just wrote is there (the probe itself works).
  EvalResult same_job = Run(kRelu, Wrap("static int stolen(void) { FILE* f = fopen(\"mine.txt\", "
                                        "\"w\"); if (!f) return 0; fclose(f); f = fopen(\"mine.txt\", "
                                        "\"r\"); if (!f) return 0; fclose(f); return 1; }\n",
                                        std::string(kRelu) + "/reference.cpp"));
  EXPECT_EQ(Name(same_job.status), std::string("Ok")) << same_job.diagnostics;
  // The same worker and runner served both Ok jobs: no process was replaced between them.
  EXPECT_EQ(after_first, restarts()) << ev_->StatusText();
  ExpectRejected("reads a file an earlier job left in the runner's directory", kRelu,
                 Wrap(reader, std::string(kRelu) + "/reference.cpp"));
}

// A candidate whose only failure is its values (here: it leaves a file in the runner's directory
// and returns without writing its outputs) does not cost a fresh worker and runner: the next job
// runs on the same pair, and still finds nothing of it. One that writes out of bounds (an
// integrity failure) ends the pair: the next job gets a fresh one.
TEST_F(AnswerKey, ARunnerServesOnAfterWrongValuesButNotAfterAnOutOfBoundsWrite) {
  auto restarts = [&] {
    std::string t = ev_->StatusText();
    auto p = t.find("worker_restarts: ");
    return p == std::string::npos ? -1 : std::atoi(t.c_str() + p + 17);
  };
  const std::string honest = ReadSource(std::string(kRelu) + "/reference.cpp");
  ASSERT_EQ(Name(Run(kRelu, honest).status), std::string("Ok"));
  const int before = restarts();
  const std::string leaves_a_file_and_fails =
      "static int stolen(void) { FILE* f = fopen(\"left-behind.txt\", \"w\"); if (f) {"
      " fputs(\"outputs\", f); fclose(f); } return 0; }\n";
  ExpectRejected("writes nothing", kRelu,
                 Wrap(leaves_a_file_and_fails, std::string(kRelu) + "/reference.cpp"));
  const std::string reader =
      "static int stolen(void) { FILE* f = fopen(\"left-behind.txt\", \"r\"); if (!f) return 0;"
      " fclose(f); return 1; }\n";
  ExpectRejected("reads a file a failed job left in the runner's directory", kRelu,
                 Wrap(reader, std::string(kRelu) + "/reference.cpp"));
  EXPECT_EQ(Name(Run(kRelu, honest).status), std::string("Ok"));
  EXPECT_EQ(restarts(), before) << "wrong values replaced the worker: " << ev_->StatusText();
  // One float past the end of the output: the guard region catches it.
  std::string oob = honest;
  const std::string ret = "  return 0;\n}";
  ASSERT_NE(oob.rfind(ret), std::string::npos);
  oob.replace(oob.rfind(ret), ret.size(), "  y[n] = 1.0f;\n  return 0;\n}");
  EvalResult bad = Run(kRelu, oob);
  EXPECT_EQ(Name(bad.status), std::string("Incorrect")) << bad.diagnostics;
  EXPECT_NE(bad.diagnostics.find("out of bounds"), std::string::npos) << bad.diagnostics;
  EXPECT_EQ(Name(Run(kRelu, honest).status), std::string("Ok"));
  EXPECT_EQ(restarts(), before + 1) << "the pair that saw an out-of-bounds write served on: "
                                    << ev_->StatusText();
}

TEST_F(AnswerKey, GoldenDataIsOutOfReach) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3: install python3-torch "
                    "(tools/setup.sh does)";
  const std::string honest = std::string(kLinearRelu) + "/candidates/linear_relu.cpp";
  // The honest candidate first: golden data of the task is then in the cache.
  EvalResult ok = Run(kLinearRelu, ReadSource(honest));
  ASSERT_EQ(Name(ok.status), std::string("Ok")) << ok.diagnostics;
  ExpectRejected("reads the golden cache", kLinearRelu,
                 Wrap(ListProbe(cache() + "/kernelbench", ".bin"), honest));
}

// A checkout or build tree under a hidden folder (a clone in /tmp, the default eval.scratch_dir)
// still evaluates: the build tree's plugin folder holds links into that tree, and the runner
// loads the plugin by its real path, which stays in view.
TEST(HiddenTree, ABuildTreeUnderAHiddenFolderStillEvaluates) {
  if (geteuid() != 0) GTEST_SKIP() << "runners hide folders only when htamd runs as root";
  std::string tree = ExecutablePath();  // <build>/tests/integration/eval_answer_key_test
  for (int up = 0; up < 3; ++up) tree = tree.substr(0, tree.find_last_of('/'));
  TempDir dir;
  auto ev = StartEvaluator(TestConfig(dir.path(), {{"eval.seeds", "2"},
                                                  {"eval.runner_hidden_dirs", tree},
                                                  {"server.tasks_dir", Abs("configs/tasks")}}));
  ASSERT_NE(ev, nullptr);
  auto r = ev->Evaluate(Job(1, kRelu, ReadSource(std::string(kRelu) + "/reference.cpp")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Name(r->status), std::string("Ok")) << r->diagnostics;
}

// A plugin kept in a hidden folder itself (here the scratch folder that holds every worker's
// private files) would show that whole folder to candidates when bound back: the runner refuses
// to start and says which folder, and nothing is evaluated with the answer key in view.
TEST(HiddenTree, APluginInAHiddenFolderItselfIsRefusedNotShown) {
  if (geteuid() != 0) GTEST_SKIP() << "runners hide folders only when htamd runs as root";
  std::string tree = ExecutablePath();
  for (int up = 0; up < 3; ++up) tree = tree.substr(0, tree.find_last_of('/'));
  TempDir dir;
  const std::string scratch = dir.path() + "/scratch";
  ASSERT_EQ(system(("mkdir -p " + scratch + " && cp " + tree +
                    "/backends/cpu/libhtam_backend_cpu.so " + scratch + "/")
                       .c_str()),
            0);
  auto e = Evaluator::Start(EvalOptions::FromConfig(
      TestConfig(dir.path(), {{"eval.plugin_dir", scratch},
                              {"server.tasks_dir", Abs("configs/tasks")}})));
  std::string said = e.ok() ? (*e)->StatusText() : e.status().ToString();
  if (e.ok() && !(*e)->Backends().empty()) {
    auto r = (*e)->Evaluate(Job(1, kRelu, ReadSource(std::string(kRelu) + "/reference.cpp")));
    ASSERT_FALSE(r.ok() && Name(r->status) == std::string("Ok")) << "evaluated in plain view";
    said += r.ok() ? std::string(Name(r->status)) + ": " + r->diagnostics : r.status().ToString();
  }
  EXPECT_NE(said.find("a folder hidden from candidates"), std::string::npos) << said;
}

}  // namespace
}  // namespace htam::eval::testing
