// Running a step that maps a possibly damaged store in a child process (see isolate.h).
#include "tools/cli/isolate.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/process.h"

namespace htam::cli {

Status RunIsolated(const std::function<Status()>& fn, const std::string& what) {
  auto run = RunForked([&](std::string* reply) {
    Status s = fn();
    // "0" on success: a child that ends without a word (a sanitizer's crash report) failed.
    *reply = s.ok() ? "0" : std::to_string(static_cast<int>(s.code())) + " " + s.message();
    return 0;
  });
  if (!run.ok()) return fn();  // no isolation available: run here
  const std::string& msg = run->reply;
  if (run->signaled)
    return Status::Corruption(what + " crashed (" + strsignal(run->signal) +
                              "): the store is damaged");
  if (msg == "0") return Status::OK();
  if (msg.empty())
    return Status::Corruption(what + " failed without an answer (exit " +
                              std::to_string(run->exit_code) + "): the store is damaged");
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
