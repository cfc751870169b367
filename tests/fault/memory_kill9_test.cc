// Crash safety: a writer child is killed with SIGKILL at random moments, at least 50 times. Every
// transition it acknowledged (reported over a pipe after its commit returned) must be in the
// store afterwards, and the store's indexes and statistics must agree with its records.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>

#include "daemon/memory/memory.h"

extern char** environ;

namespace htam::memory {
namespace {

constexpr int kKills = 50;

// Reads every complete id available until `deadline` (or EOF); returns false at EOF.
bool ReadAcks(int fd, std::chrono::steady_clock::time_point deadline, std::vector<uint64_t>* ids,
              std::string* partial) {
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    int ms =
        deadline > now
            ? static_cast<int>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count())
            : 0;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc <= 0) return true;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    partial->append(buf, static_cast<size_t>(n));
    while (partial->size() >= 8) {
      uint64_t id;
      std::memcpy(&id, partial->data(), 8);
      ids->push_back(id);
      partial->erase(0, 8);
    }
  }
}

TEST(MemoryFaultTest, AcknowledgedStepsSurviveKill9) {
  char tmpl[] = "/tmp/htam-kill9-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::mt19937 rng(20261122);
  std::set<uint64_t> acked;
  int killed_with_acks = 0;
  for (int round = 0; round < kKills; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    std::string fd_arg = std::to_string(fds[1]), seed_arg = std::to_string(round);
    const char* argv[] = {HTAM_FAULT_WRITER, dir.c_str(), fd_arg.c_str(), seed_arg.c_str(),
                          nullptr};
    pid_t pid = 0;
    ASSERT_EQ(
        posix_spawn(&pid, HTAM_FAULT_WRITER, nullptr, nullptr, const_cast<char**>(argv), environ),
        0);
    ::close(fds[1]);
    // Kill at a random moment: every tenth round while the store opens, the others mid-storm
    // (a random time after the first acknowledgement).
    std::vector<uint64_t> ids;
    std::string partial;
    bool open = true;
    if (round % 10 == 0) {
      auto start = std::chrono::steady_clock::now();
      open = ReadAcks(fds[0], start + std::chrono::milliseconds(rng() % 40), &ids, &partial);
    } else {
      auto first_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (open && ids.empty() && std::chrono::steady_clock::now() < first_by)
        open = ReadAcks(fds[0], std::chrono::steady_clock::now() + std::chrono::milliseconds(5),
                        &ids, &partial);
      open = open &&
             ReadAcks(fds[0],
                      std::chrono::steady_clock::now() + std::chrono::milliseconds(rng() % 150),
                      &ids, &partial);
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (open)
      ReadAcks(fds[0], std::chrono::steady_clock::now() + std::chrono::seconds(2), &ids, &partial);
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "writer exited on its own with " << WEXITSTATUS(status) << " in round " << round;
    if (!ids.empty()) ++killed_with_acks;
    acked.insert(ids.begin(), ids.end());

    MemoryOptions o;
    o.dir = dir;
    o.map_size_mb = 1;
    o.snapshot_interval_s = 0;
    auto m = Memory::Open(o);
    ASSERT_TRUE(m.ok()) << "round " << round << ": " << m.status().ToString();
    for (uint64_t id : ids) {
      auto t = (*m)->GetTransition(id);
      ASSERT_TRUE(t.ok()) << "round " << round << ": acknowledged transition " << id << " lost";
    }
    std::vector<std::string> problems;
    Status c = (*m)->Check(&problems);
    ASSERT_TRUE(c.ok()) << "round " << round << ": " << c.ToString() << ": " << problems[0];
  }
  // At the end, every acknowledgement of every round is still there.
  MemoryOptions o;
  o.dir = dir;
  auto m = Memory::Open(o);
  ASSERT_TRUE(m.ok());
  for (uint64_t id : acked) ASSERT_TRUE((*m)->GetTransition(id).ok()) << id;
  EXPECT_GE(killed_with_acks, kKills * 8 / 10);
  EXPECT_GT(acked.size(), 200u);
  std::printf("kill -9 rounds: %d, with acknowledged writes: %d, acknowledged transitions: %zu\n",
              kKills, killed_with_acks, acked.size());
  m->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace htam::memory
