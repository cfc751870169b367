// Test harness: a real htamd child process in a temp data directory on a private ipc:// endpoint,
// started, killed (-9) and restarted by the integration tests of the daemon and the SDKs.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "htam/client.h"

namespace htam::testing {

inline std::string MakeTempDir(const char* prefix) {
  std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  std::string dir = mkdtemp(buf.data());
  // The evaluator's sandboxed workers run as another user and need to reach the eval cache
  // inside the data directory.
  chmod(dir.c_str(), 0755);
  return dir;
}

// Forks and execs `args` (args[0] a path) with stdout and stderr appended to `log_path`; the
// child's pid.
inline pid_t SpawnLogged(std::vector<std::string> args, const std::string& log_path) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* log = fopen(log_path.c_str(), "a");
    if (log) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// The identity_secret of the Clients DaemonProcess::Connect makes (and of raw sockets that
// act for the same test client).
inline constexpr char kTestIdentitySecret[] = "the test's own client";

class DaemonProcess {
 public:
  explicit DaemonProcess(std::string data_dir, std::map<std::string, std::string> options = {})
      : data_dir_(std::move(data_dir)), options_(std::move(options)) {
    endpoint_ = "ipc://" + data_dir_ + "/htamd.sock";
    if (!options_.count("server.bind"))
      options_["server.bind"] = endpoint_;
    else
      endpoint_ = options_["server.bind"];
  }
  ~DaemonProcess() { Kill(); }

  const std::string& endpoint() const { return endpoint_; }
  const std::string& data_dir() const { return data_dir_; }
  std::string log_path() const { return data_dir_ + "/htamd.log"; }
  pid_t pid() const { return pid_; }

  // Starts htamd; with `wait_ready`, returns once it answers Hello (false if it never does).
  bool Start(bool wait_ready = true) {
    std::vector<std::string> args = {HTAM_HTAMD_PATH, "--general.data_dir", data_dir_,
                                     "--server.tasks_dir",
                                     std::string(HTAM_SOURCE_DIR) + "/configs/tasks"};
    for (auto& [k, v] : options_) {
      args.push_back("--" + k);
      args.push_back(v);
    }
    pid_ = SpawnLogged(std::move(args), log_path());
    if (!wait_ready) return true;
    for (int i = 0; i < 300; ++i) {
      if (Exited()) return false;
      ClientOptions o;
      o.endpoint = endpoint_;
      o.connect_timeout = std::chrono::milliseconds(500);
      auto c = Client::Connect(o);
      if (c.ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // True once the child has exited; its code is in exit_code().
  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return true;
    }
    return false;
  }
  int WaitExit(int timeout_ms = 30000) {
    for (int i = 0; i < timeout_ms / 10; ++i) {
      if (Exited()) return exit_code_;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  int exit_code() const { return exit_code_; }

  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int Terminate() {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGTERM);
    return WaitExit();
  }

  // Resident set size in KiB (0 when unknown).
  long RssKb() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
  }

  std::string Log() const {
    std::ifstream f(log_path());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::unique_ptr<Client> Connect(
      std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.timeout = timeout;
    // Every Client made here is the test's one client (one identity): a test that restarts
    // htamd resumes its sessions with a new Client, as a new process does with the same
    // HTAM_IDENTITY_SECRET.
    o.identity_secret = kTestIdentitySecret;
    auto c = Client::Connect(o);
    return c.ok() ? std::move(*c) : nullptr;
  }

 private:
  std::string data_dir_;
  std::map<std::string, std::string> options_;
  std::string endpoint_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// "key: value" of one line of a status text ("" when absent).
inline std::string StatusValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      size_t b = v.find_first_not_of(' ');
      return b == std::string::npos ? "" : v.substr(b);
    }
  return "";
}

}  // namespace htam::testing
