// How a worker or runner ended, as an outcome: the one rule both ends of the evaluation use.
#include "daemon/eval/sandbox.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace htam::eval {
namespace {

// The wait status of a real child that ends the given way (exit code, or a signal to itself).
int EndedBy(int exit_code, int signal) {
  pid_t pid = fork();
  if (pid == 0) {
    if (signal != 0) {
      ::signal(signal, SIG_DFL);
      raise(signal);
    }
    _exit(exit_code);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

TEST(ProcessEnd, LimitsAreTheirClassAndEverythingElseIsACrash) {
  ProcessEnd cpu = ClassifyProcessEnd(EndedBy(0, SIGXCPU), "the worker", " during run");
  EXPECT_EQ(cpu.status, fb::OutcomeStatus::Timeout);
  EXPECT_EQ(cpu.message, "CPU time limit exceeded during run");

  ProcessEnd fsz = ClassifyProcessEnd(EndedBy(0, SIGXFSZ), "the worker", " during run");
  EXPECT_EQ(fsz.status, fb::OutcomeStatus::ResourceLimit);
  EXPECT_EQ(fsz.message, "file size limit exceeded during run");

  ProcessEnd oom = ClassifyProcessEnd(EndedBy(0, SIGKILL), "the worker", "");
  EXPECT_EQ(oom.status, fb::OutcomeStatus::ResourceLimit);
  EXPECT_EQ(oom.message, "killed (out of memory?)");

  ProcessEnd mem =
      ClassifyProcessEnd(EndedBy(kExitResourceLimit, 0), "the runner", "", " (RLIMIT_AS)");
  EXPECT_EQ(mem.status, fb::OutcomeStatus::ResourceLimit);
  EXPECT_EQ(mem.message, "memory limit reached (RLIMIT_AS)");

  ProcessEnd segv = ClassifyProcessEnd(EndedBy(0, SIGSEGV), "the candidate's runner", "");
  EXPECT_EQ(segv.status, fb::OutcomeStatus::Crash);
  EXPECT_EQ(segv.message.rfind("the candidate's runner died (SIGSEGV", 0), 0u) << segv.message;

  ProcessEnd quit = ClassifyProcessEnd(EndedBy(7, 0), "the worker", " during compile");
  EXPECT_EQ(quit.status, fb::OutcomeStatus::Crash);
  EXPECT_EQ(quit.message,
            "the worker died (exit code 7) during compile: the candidate ended the process");
}

}  // namespace
}  // namespace htam::eval
