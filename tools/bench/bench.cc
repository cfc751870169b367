// htam-bench helpers.
#include "tools/bench/bench.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace htam::bench {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double rank = p / 100.0 * (v.size() - 1);
  size_t lo = static_cast<size_t>(rank);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - lo);
}

static uint64_t StatusField(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0)
      return std::stoull(line.substr(std::string(field).size())) * 1024;
  return 0;
}
uint64_t RssBytes() {
  return StatusField("VmRSS:");
}
uint64_t PeakRssBytes() {
  return StatusField("VmHWM:");
}
uint64_t RssAnonBytes() {
  return StatusField("RssAnon:");
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

Flags::Flags(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    a = a.substr(2);
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      values_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      values_[a] = argv[++i];
    } else {
      values_[a] = "true";
    }
  }
}

std::string Flags::Get(const std::string& n, const std::string& def) const {
  auto it = values_.find(n);
  return it == values_.end() ? def : it->second;
}

int64_t Flags::GetInt(const std::string& n, int64_t def) const {
  auto v = GetIntList(n, {def});
  return v.empty() ? def : v[0];
}

// Numbers may end in k (thousand) or m (million): 10k, 1m.
std::vector<int64_t> Flags::GetIntList(const std::string& n,
                                       const std::vector<int64_t>& def) const {
  auto it = values_.find(n);
  if (it == values_.end()) return def;
  std::vector<int64_t> out;
  size_t pos = 0;
  const std::string& s = it->second;
  while (pos <= s.size()) {
    size_t c = s.find(',', pos);
    std::string part = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (!part.empty()) {
      int64_t mult = 1;
      char last = part.back();
      if (last == 'k' || last == 'K') mult = 1000, part.pop_back();
      if (last == 'm' || last == 'M') mult = 1000000, part.pop_back();
      out.push_back(std::stoll(part) * mult);
    }
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

std::string Flags::Unknown(const std::vector<std::string>& known) const {
  for (const auto& [k, v] : values_)
    if (std::find(known.begin(), known.end(), k) == known.end()) return k;
  return "";
}

std::string RunCapture(const std::vector<std::string>& argv, int* status) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

std::string SelfExe() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

}  // namespace htam::bench
