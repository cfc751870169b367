// Memory cgroups of workers: created with their limit, a process moved in, an allocation over the
// limit killed and counted, the cgroup gone afterwards. Skips where no memory cgroup is writable.
#include "daemon/eval/memory_cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/file.h"

namespace htam::eval {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

class MemoryCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = FindMemoryCgroupParent();
    if (!p.ok()) GTEST_SKIP() << "no writable memory cgroup here: " << p.status().message();
    parent_ = *p;
  }
  CgroupParent parent_;
};

TEST_F(MemoryCgroupTest, CreatesWithLimitMovesAProcessAndRemovesItself) {
  std::string path;
  {
    auto g = MemoryCgroup::Create(parent_, "htam-test-" + std::to_string(getpid()), 96ull << 20);
    ASSERT_TRUE(g.ok()) << g.status().message();
    path = (*g)->path();
    ASSERT_TRUE(Exists(path));
    const uint64_t limit = std::strtoull(
        ReadFileOrEmpty(path + (parent_.v2 ? "/memory.max" : "/memory.limit_in_bytes")).c_str(), nullptr, 10);
    EXPECT_EQ(limit, 96ull << 20);
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    pid_t pid = fork();
    if (pid == 0) {
      char c;
      (void)!read(go[0], &c, 1);
      _exit(0);
    }
    ASSERT_TRUE((*g)->AddProcess(pid).ok());
    EXPECT_NE(ReadFileOrEmpty(path + "/cgroup.procs").find(std::to_string(pid)), std::string::npos);
    EXPECT_EQ((*g)->OomKills(), 0u);
    (void)!write(go[1], "x", 1);
    waitpid(pid, nullptr, 0);
    close(go[0]);
    close(go[1]);
  }
  EXPECT_FALSE(Exists(path)) << path << " outlived its MemoryCgroup";
}

TEST_F(MemoryCgroupTest, AllocationOverTheLimitIsKilledAndCounted) {
  auto g = MemoryCgroup::Create(parent_, "htam-test-oom-" + std::to_string(getpid()), 64ull << 20);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const MemoryCgroup* cg = g->get();
  pid_t pid = fork();
  if (pid == 0) {
    if (!cg->AddSelf()) _exit(2);
    for (int i = 0; i < 64; ++i) {  // 1 GiB in 16 MiB steps, every page touched
      char* p = static_cast<char*>(malloc(16 << 20));
      if (!p) _exit(3);
      memset(p, 1, 16 << 20);
    }
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st)) << "the child was not killed (status " << st << ")";
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  EXPECT_GE((*g)->OomKills(), 1u);
}

TEST_F(MemoryCgroupTest, RemovesItselfKillingWhatIsLeftInside) {
  std::string path;
  pid_t pid;
  {
    auto g =
        MemoryCgroup::Create(parent_, "htam-test-left-" + std::to_string(getpid()), 64ull << 20);
    ASSERT_TRUE(g.ok()) << g.status().message();
    path = (*g)->path();
    pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
    ASSERT_TRUE((*g)->AddProcess(pid).ok());
  }  // a process still inside: the destructor kills it, then removes the cgroup
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status " << st;
  EXPECT_FALSE(Exists(path)) << path << " outlived its MemoryCgroup";
}

}  // namespace
}  // namespace htam::eval
