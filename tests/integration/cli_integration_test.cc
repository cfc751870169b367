// Integration tests of the htam CLI as a process: a backup taken during a write storm (a child
// process recording steps) opens and passes `check`; damaged stores give one clear line and exit 1
// (never a signal); the --connect path agrees with the store read directly while htamd runs, and
// the commands that write refuse a live store.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>

namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Proc {
  int rc = -1;  // exit code, or 128 + signal
  bool signaled = false;
  std::string out, err;
};

std::string Slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string Quote(const std::string& s) {
  return "'" + s + "'";
}

class CliProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("htam-cli-it-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    data_ = (dir_ / "data").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs a command line through the shell, stdout and stderr to files.
  Proc Sh(const std::string& cmd) {
    std::string o = (dir_ / "out").string(), e = (dir_ / "err").string();
    int st = std::system((cmd + " >" + Quote(o) + " 2>" + Quote(e)).c_str());
    Proc p;
    p.signaled = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) > 128);
    p.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    p.out = Slurp(o);
    p.err = Slurp(e);
    return p;
  }
  Proc Htam(const std::string& args) { return Sh(std::string(HTAM_CLI_BIN) + " " + args); }
  void BuildStore(const std::string& data) {
    Proc p = Sh(std::string(HTAM_TEST_STORE_BIN) + " build " + Quote(data));
    ASSERT_EQ(p.rc, 0) << p.err;
  }

  fs::path dir_;
  std::string data_;
};

// Spawns argv with stdout on a pipe; returns the pid and the read end.
pid_t Spawn(const std::vector<std::string>& argv, int* out_fd) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::close(p[0]);
    ::close(p[1]);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  ::close(p[1]);
  *out_fd = p[0];
  return pid;
}

std::string ReadLine(int fd) {
  std::string s;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') s += c;
  return s;
}

TEST_F(CliProcessTest, BackupDuringWriteStormOpensAndPassesCheck) {
  BuildStore(data_);
  int fd = -1;
  pid_t storm = Spawn({HTAM_TEST_STORE_BIN, "storm", data_, "6"}, &fd);
  ASSERT_GT(storm, 0);
  ASSERT_EQ(ReadLine(fd), "storming");
  std::vector<std::string> backups;
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    std::string bk = (dir_ / ("bk" + std::to_string(i))).string();
    Proc b = Htam("-d " + Quote(data_) + " backup " + Quote(bk));
    EXPECT_EQ(b.rc, 0) << b.out << b.err;
    backups.push_back(bk);
  }
  std::string last = ReadLine(fd);
  ::close(fd);
  int st = 0;
  ::waitpid(storm, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the writer failed";
  EXPECT_NE(last.find("sessions"), std::string::npos);
  size_t previous = 0;
  for (const auto& bk : backups) {
    // A backup is a data directory of its own: it opens and passes every check.
    Proc c = Htam("-d " + Quote(bk) + " check");
    EXPECT_EQ(c.rc, 0) << bk << ": " << c.out << c.err;
    Proc s = Htam("-d " + Quote(bk) + " --json status");
    ASSERT_EQ(s.rc, 0) << s.err;
    size_t transitions = Json::parse(s.out)["records"]["transitions"];
    EXPECT_GE(transitions, 30u);
    EXPECT_GE(transitions, previous);  // later backups hold at least as much
    previous = transitions;
  }
  Proc now = Htam("-d " + Quote(data_) + " --json status");
  EXPECT_GT(Json::parse(now.out)["records"]["transitions"].get<size_t>(), 30u)
      << "the storm wrote nothing";
  // And a restore of the last one is a working store.
  std::string restored = (dir_ / "restored").string();
  ASSERT_EQ(Htam("-d " + Quote(restored) + " restore " + Quote(backups.back())).rc, 0);
  EXPECT_EQ(Htam("-d " + Quote(restored) + " check").rc, 0);
}

TEST_F(CliProcessTest, DamagedStoresNeverCrashTheTool) {
  BuildStore(data_);
  std::string store = data_ + "/store/data.mdb";
  uintmax_t size = fs::file_size(store);
  std::mt19937 rng(11);
  std::vector<std::string> damaged;
  for (int variant = 0; variant < 4; ++variant) {
    std::string d = (dir_ / ("d" + std::to_string(variant))).string();
    fs::copy(data_, d, fs::copy_options::recursive);
    std::string f = d + "/store/data.mdb";
    if (variant == 0) {
      fs::resize_file(f, size / 2);
    } else {
      std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
      uintmax_t from = variant == 1 ? 0 : 2 * 4096, step = variant == 3 ? 4096 : 8192;
      size_t len = variant == 3 ? 4096 : 96;
      for (uintmax_t off = from; off + len <= size; off += step) {
        io.seekp(static_cast<std::streamoff>(off + (variant == 3 ? 0 : 16)));
        for (size_t i = 0; i < len; ++i) io.put(static_cast<char>(rng()));
      }
    }
    damaged.push_back(d);
  }
  for (const auto& d : damaged)
    for (const char* cmd : {"check", "status", "directions", "strategies", "sessions",
                            "trajectory 1", "explain 1", "top", "graph", "export"}) {
      Proc p = Htam("-d " + Quote(d) + " " + cmd);
      EXPECT_FALSE(p.signaled) << d << " " << cmd << " died: " << p.err;
      if (std::string(cmd) == "check") {
        EXPECT_EQ(p.rc, 1) << d << ": " << p.out;
      }
      if (p.rc != 0) {
        EXPECT_EQ(p.rc, 1) << d << " " << cmd;
        EXPECT_LE(std::count(p.err.begin(), p.err.end(), '\n'), 1)
            << d << " " << cmd << ": " << p.err;
      }
    }
  for (const auto& d : damaged) {
    Proc b = Htam("-d " + Quote(d) + " backup " + Quote(d + "-bk"));
    EXPECT_FALSE(b.signaled);
    if (b.rc == 0) {
      EXPECT_EQ(Htam("-d " + Quote(d + "-bk") + " check").rc, 0);
    }
  }
}

#ifdef HTAM_HTAMD_BIN
TEST_F(CliProcessTest, ThroughARunningDaemon) {
  BuildStore(data_);
  std::string endpoint = "ipc://" + (dir_ / "htamd.sock").string();
  pid_t d = ::fork();
  if (d == 0) {
    std::string log = (dir_ / "htamd.log").string();
    std::freopen(log.c_str(), "w", stderr);
    std::freopen(log.c_str(), "a", stdout);
    std::string a1 = "--general.data_dir=" + data_, a2 = "--server.bind=" + endpoint,
                a3 = "--memory.seed_file=tools/cli/testdata/seed_small.json";
    ::execl(HTAM_HTAMD_BIN, HTAM_HTAMD_BIN, a1.c_str(), a2.c_str(), a3.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(d, 0);
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    up = Htam("-c " + endpoint + " --timeout-ms 1000 status").rc == 0;
  }
  if (!up) {
    ::kill(d, SIGKILL);
    ::waitpid(d, nullptr, 0);
    GTEST_SKIP() << "htamd did not start: " << Slurp((dir_ / "htamd.log").string());
  }
  for (const char* cmd :
       {"sessions", "directions", "strategies --sort uses", "trajectory 2", "show session:3"}) {
    Proc remote = Htam("-c " + endpoint + " --json " + cmd);
    Proc local = Htam("-d " + Quote(data_) + " --json " + cmd);  // readers beside the live daemon
    ASSERT_EQ(remote.rc, 0) << cmd << ": " << remote.err;
    ASSERT_EQ(local.rc, 0) << cmd << ": " << local.err;
    EXPECT_EQ(Json::parse(remote.out), Json::parse(local.out)) << cmd;
  }
  Proc st = Htam("-c " + endpoint + " status");
  EXPECT_NE(st.out.find("# server"), std::string::npos);
  EXPECT_NE(Htam("-d " + Quote(data_) + " status").out.find("daemon_running: yes"),
            std::string::npos);
  // Writers refuse a live store; a hot backup works.
  std::string bk = (dir_ / "bk").string();
  EXPECT_EQ(Htam("-d " + Quote(data_) + " backup " + Quote(bk)).rc, 0);
  Proc rb = Htam("-d " + Quote(data_) + " rebuild");
  EXPECT_EQ(rb.rc, 1);
  EXPECT_NE(rb.err.find("stop it"), std::string::npos) << rb.err;
  EXPECT_EQ(Htam("-d " + Quote(data_) + " restore --force " + Quote(bk)).rc, 1);
  EXPECT_EQ(Htam("-c " + endpoint + " check").rc, 1);  // needs the store itself
  ::kill(d, SIGTERM);
  int status = 0;
  ::waitpid(d, &status, 0);
  EXPECT_EQ(Htam("-d " + Quote(data_) + " rebuild").rc, 0);
  EXPECT_EQ(Htam("-d " + Quote(data_) + " check").rc, 0);
}
#endif

}  // namespace
