// Child processes as their callers rely on them: what is captured, where, for how long, and what
// a failure to start says.
#include "base/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace htam {
namespace {

Result<ProcessResult> Shell(const std::string& script, ProcessOptions o = {}) {
  return RunProcess({"sh", "-c", script}, o);
}

TEST(RunProcess, InterleavesStderrWithStdoutByDefault) {
  auto r = Shell("echo out; echo err >&2; exit 3");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->output, "out\nerr\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->signaled);
  EXPECT_FALSE(r->timed_out);
}

TEST(RunProcess, StdoutAloneWhenStderrGoesToTheParent) {
  ProcessOptions o;
  o.stderr_to = StderrTo::kParent;
  auto r = Shell("echo '{\"a\":1}'; echo 'a warning' >&2", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->output, "{\"a\":1}\n");
  EXPECT_EQ(r->exit_code, 0);
}

TEST(RunProcess, RunsInAFolderItCannotWriteTo) {
  ProcessOptions o;
  o.cwd = "/proc";  // not writable, even for root
  auto r = Shell("pwd", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->output, "/proc\n");
  char here[4096];
  ASSERT_NE(getcwd(here, sizeof here), nullptr);
  auto same = Shell("pwd");  // no cwd: ours
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->output, std::string(here) + "\n");
}

TEST(RunProcess, StartFailuresAreErrorsThatSayWhy) {
  auto missing = RunProcess({"/nonexistent/tool", "--version"}, ProcessOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(missing.status().message(), "cannot run /nonexistent/tool: No such file or directory");
  auto not_in_path = RunProcess({"htam-no-such-tool"}, ProcessOptions{});
  ASSERT_FALSE(not_in_path.ok());
  EXPECT_EQ(not_in_path.status().code(), Status::Code::kUnavailable);
  ProcessOptions o;
  o.cwd = "/nonexistent/dir";
  auto no_dir = Shell("true", o);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), Status::Code::kIOError);
  EXPECT_NE(no_dir.status().message().find("cannot enter /nonexistent/dir"), std::string::npos);
}

TEST(RunProcess, ReportsTheSignalThatKilledIt) {
  auto r = Shell("kill -TERM $$");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->signal, SIGTERM);
}

TEST(RunProcess, StdinIsEmptyAndTheEnvironmentTakesExtras) {
  setenv("HTAM_PROCESS_TEST", "ours", 1);
  ProcessOptions o;
  o.extra_env = {"HTAM_PROCESS_TEST=theirs", "HTAM_PROCESS_TEST_NEW=1"};
  auto r = Shell("cat; echo $HTAM_PROCESS_TEST $HTAM_PROCESS_TEST_NEW", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->output, "theirs 1\n");
}

TEST(RunProcess, KeepsTheHeadOrTheTailAndNeverBlocksTheChild) {
  ProcessOptions o;
  o.max_output = 10;
  o.timeout_s = 60;
  auto head = Shell("seq 1 300000", o);  // about 2 MB: far beyond a pipe's buffer
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->exit_code, 0);
  EXPECT_EQ(head->output, "1\n2\n3\n4\n5\n");
  o.keep_tail = true;
  auto tail = Shell("seq 1 300000", o);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ(tail->output, "99\n300000\n");
}

// The state letter of /proc/<pid>/stat, or 0 when the process is gone.
char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  size_t p = line.rfind(')');
  return p + 2 < line.size() ? line[p + 2] : 0;
}

TEST(RunProcess, ATimeoutKillsTheWholeGroup) {
  ProcessOptions o;
  o.timeout_s = 0.3;
  auto r = Shell("sleep 30 & echo $!; wait", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->wall_ms, 5000);
  const pid_t grandchild = std::atoi(r->output.c_str());
  ASSERT_GT(grandchild, 0) << r->output;
  for (int i = 0; i < 100 && ProcessState(grandchild) != 0 && ProcessState(grandchild) != 'Z'; ++i)
    usleep(10000);
  const char state = ProcessState(grandchild);
  EXPECT_TRUE(state == 0 || state == 'Z') << "the background sleep survived: " << state;
}

TEST(RunProcess, ADescendantHoldingTheOutputOpenIsNotWaitedFor) {
  ProcessOptions o;
  o.own_group = false;
  auto r = Shell("sleep 30 & echo $!", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_LT(r->wall_ms, 5000);
  const pid_t left = std::atoi(r->output.c_str());
  ASSERT_GT(left, 0) << r->output;
  EXPECT_EQ(getpgid(left), getpgrp());  // own_group = false: it stayed in ours
  kill(left, SIGKILL);
}

TEST(StartBackground, RunsWithItsLogAndEnvironmentUntilStopped) {
  const std::string log = ::testing::TempDir() + "/background_" + std::to_string(getpid()) + ".log";
  std::remove(log.c_str());
  auto pid = StartBackground({"/bin/sh", "-c", "echo started $HTAM_BG_TEST; exec sleep 60"}, log,
                             {"HTAM_BG_TEST=yes"});
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  std::string text;
  for (int i = 0; i < 200 && text.find("started yes") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  EXPECT_NE(text.find("started yes"), std::string::npos) << text;
  EXPECT_EQ(kill(*pid, 0), 0);  // still running
  const int status = StopBackground(*pid, 5000);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_EQ(StopBackground(*pid), -1);  // reaped: no longer a child
  std::remove(log.c_str());
}

TEST(StartBackground, AMissingProgramEndsWith127AndAnUnopenableLogIsAnError) {
  auto pid = StartBackground({"/no/such/program"}, "");
  ASSERT_TRUE(pid.ok());
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127);
  auto bad = StartBackground({"/bin/true"}, "/no/such/folder/log");
  EXPECT_EQ(bad.status().code(), Status::Code::kIOError);
}

TEST(StartWithChannel, TheChildTalksOnFd3InAGroupOfItsOwn) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  auto pid = StartWithChannel(
      {"/bin/sh", "-c", "echo $HTAM_CHANNEL_TEST $(ps -o pgid= -p $$) >&3; read x <&3; exit 4"},
      sv[1], {"HTAM_CHANNEL_TEST=yes"}, "test");
  close(sv[1]);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  std::string got;
  char buf[256];
  ssize_t n;
  while (got.find('\n') == std::string::npos && (n = read(sv[0], buf, sizeof buf)) > 0)
    got.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(got, "yes " + std::to_string(*pid) + "\n");
  ASSERT_EQ(write(sv[0], "go\n", 3), 3);
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 4);
  close(sv[0]);
  auto missing = StartWithChannel({"/no/such/program"}, 0, {}, "test");
  ASSERT_TRUE(missing.ok());
  ASSERT_EQ(waitpid(*missing, &status, 0), *missing);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127);
}

// A scratch folder of a StartDetached test, with what its commands write there read back.
class Detached : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = ::testing::TempDir() + "/detached_XXXXXX";
    ASSERT_NE(mkdtemp(t.data()), nullptr);
    dir_ = t;
  }
  void TearDown() override { RunProcess({"rm", "-rf", dir_}, "", 30); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // What `name` holds once it holds a whole line (within 10 s); "" when it never does.
  std::string AwaitLine(const std::string& name) const {
    for (int i = 0; i < 1000; ++i) {
      std::string text = Read(name);
      if (!text.empty() && text.back() == '\n') return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "";
  }
  std::vector<std::string> Sh(const std::string& script) const {
    return {"/bin/sh", "-c", "cd " + dir_ + " || exit 9; " + script};
  }
  // Whether `lock` can be taken now (nobody holds the flock), taken and dropped at once.
  bool LockFree(const std::string& lock) const {
    const int fd = open(Path(lock).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    const bool free = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (fd >= 0) close(fd);
    return free;
  }
  // Waits (within 10 s) until nothing the detached supervisor started holds `lock`: it has ended.
  bool AwaitLockFree(const std::string& lock) const {
    for (int i = 0; i < 1000; ++i) {
      if (LockFree(lock)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // A process that no longer runs: gone, or a zombie left for init to reap.
  static bool Ended(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) return true;
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
  }
  static pid_t ParentOf(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    std::getline(in, stat);
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) return -1;
    std::istringstream rest(stat.substr(paren + 2));
    char state = 0;
    pid_t ppid = -1;
    rest >> state >> ppid;
    return ppid;
  }
  std::string dir_;
};

TEST_F(Detached, TheCommandOutlivesItsStarterOutsideItsSessionAndIsNotItsChild) {
  // The starter is a process of its own that ends right after StartDetached returns.
  const std::vector<std::string> cmd = Sh("echo $$ > pid; sleep 3; echo finished > done");
  auto starter = RunForked([&](std::string*) { return StartDetached(cmd, {}).ok() ? 0 : 1; });
  ASSERT_TRUE(starter.ok()) << starter.status().message();
  ASSERT_EQ(starter->exit_code, 0);  // the starter has ended ...
  const std::string pid_text = AwaitLine("pid");
  ASSERT_FALSE(pid_text.empty()) << "the detached command never ran";
  const pid_t pid = std::stoi(pid_text);
  EXPECT_FALSE(Ended(pid)) << "... and the command still runs";
  EXPECT_NE(getsid(pid), getsid(0)) << "a session of its own: our group's kill does not reach it";
  EXPECT_NE(getpgid(pid), getpgrp());
  EXPECT_NE(ParentOf(pid), getpid());
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1) << "not our child: never our zombie";
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(AwaitLine("done"), "finished\n") << "it ran to its end after its starter was gone";
  // Started from here too: StartDetached returns at once, long before the command ends.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(StartDetached(Sh("sleep 2; echo second > second"), {}).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500));
  EXPECT_TRUE(Read("second").empty());
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "no child of ours left behind";
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(AwaitLine("second"), "second\n");  // and it still ran to its end
}

TEST_F(Detached, ATimeoutKillsTheCommandsGroupAndRunsOnTimeout) {
  DetachedOptions o;
  o.log_path = Path("log");
  o.timeout_s = 0.5;
  o.on_timeout = Sh("echo late > note");
  o.on_failure = Sh("echo failed > note");
  ASSERT_TRUE(StartDetached(Sh("echo started; sleep 30 & echo $! > child; wait"), o).ok());
  EXPECT_EQ(AwaitLine("note"), "late\n");
  EXPECT_EQ(Read("log"), "started\n");  // the command's output went to its log
  const std::string child = AwaitLine("child");
  ASSERT_FALSE(child.empty());
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {
    ended = Ended(std::stoi(child));
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ended) << "what the command started in its group was killed with it";
}

TEST_F(Detached, AFailureRunsOnFailureASuccessNothingAndTheKeptDescriptorIsHeldToTheEnd) {
  // The command holds our lock (keep_fd) for as long as it runs; we drop ours at once.
  auto start = [&](const std::vector<std::string>& cmd) {
    const int lock = open(Path("lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_EQ(flock(lock, LOCK_EX | LOCK_NB), 0);
    DetachedOptions o;
    o.on_failure = Sh("echo failed > note");
    o.on_timeout = Sh("echo late > note");
    o.keep_fd = lock;
    EXPECT_TRUE(StartDetached(cmd, o).ok());
    close(lock);
  };
  start(Sh("sleep 0.5; echo ran > ran; exit 0"));
  EXPECT_FALSE(LockFree("lock")) << "the detached command holds the kept descriptor's lock";
  ASSERT_TRUE(AwaitLockFree("lock")) << "the lock outlived the command";
  EXPECT_EQ(Read("ran"), "ran\n");
  EXPECT_TRUE(Read("note").empty()) << "a command that succeeded runs neither follow-up";
  start(Sh("exit 3"));
  EXPECT_EQ(AwaitLine("note"), "failed\n");
  ASSERT_TRUE(AwaitLockFree("lock"));
  std::remove(Path("note").c_str());
  start({"/no/such/program"});  // cannot start: a failure too
  EXPECT_EQ(AwaitLine("note"), "failed\n");
  EXPECT_EQ(StartDetached({}, {}).code(), Status::Code::kInvalidArgument);
}

TEST(RunForked, BringsBackTheReplyAndTheExitCode) {
  int here = 7;
  auto r = RunForked([&](std::string* reply) {
    here = 8;  // the child's copy: ours stays 7
    *reply = std::string(200000, 'x') + "end";  // more than a pipe holds
    return 3;
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->signaled);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->reply.size(), 200003u);
  EXPECT_EQ(r->reply.substr(r->reply.size() - 3), "end");
  EXPECT_EQ(here, 7);
}

TEST(RunForked, ACrashInTheChildIsReportedNotShared) {
  auto r = RunForked([](std::string* reply) {
    reply->assign("never sent");
    // A sanitizer build catches SIGSEGV itself and exits with 1; the default action is what a
    // crash in a release build gets.
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    return 0;
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->signal, SIGSEGV);
  EXPECT_TRUE(r->reply.empty());
}

TEST(ReplaceProcess, AMissingProgramIsAnErrorThatSaysWhy) {
  Status s = ReplaceProcess({"/no/such/program", "x"});
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_NE(s.message().find("/no/such/program"), std::string::npos);
  auto r = RunForked([](std::string* reply) {
    ReplaceProcess({"/bin/sh", "-c", "exit 5"});
    *reply = "not replaced";
    return 1;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 5);
  EXPECT_TRUE(r->reply.empty());
}

}  // namespace
}  // namespace htam
