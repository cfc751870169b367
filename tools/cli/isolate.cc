// Running a step that maps a possibly damaged store in a child process (see isolate.h).
#include "tools/cli/isolate.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace htam::cli {

Status RunIsolated(const std::function<Status()>& fn, const std::string& what) {
  int p[2];
  if (::pipe(p) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return fn();
  }
  if (pid == 0) {
    ::close(p[0]);
    Status s = fn();
    // "0" on success: a child that ends without a word (a sanitizer's crash report) failed.
    std::string msg = s.ok() ? "0" : std::to_string(static_cast<int>(s.code())) + " " + s.message();
    ssize_t n = ::write(p[1], msg.data(), msg.size());
    (void)n;
    ::_exit(0);
  }
  ::close(p[1]);
  std::string msg;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) msg.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(st))
    return Status::Corruption(what + " crashed (" + strsignal(WTERMSIG(st)) +
                              "): the store is damaged");
  if (msg == "0") return Status::OK();
  if (msg.empty())
    return Status::Corruption(what + " failed without an answer (exit " +
                              std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
                              "): the store is damaged");
  size_t sp = msg.find(' ');
  int code = std::atoi(msg.substr(0, sp).c_str());
  std::string text = sp == std::string::npos ? msg : msg.substr(sp + 1);
  switch (static_cast<Status::Code>(code)) {
    case Status::Code::kCorruption: return Status::Corruption(text);
    case Status::Code::kNotFound: return Status::NotFound(text);
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(text);
    default: return Status::IOError(text);
  }
}

}  // namespace htam::cli
