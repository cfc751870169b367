// Whole-file reads and writes, mkdir -p, fsync (see file.h).
#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace htam {

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::string text;
  return ReadWholeFile(path, &text) ? text : std::string();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  std::string cur = !path.empty() && path[0] == '/' ? "/" : "";
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += (cur.empty() || cur.back() == '/' ? "" : "/") + part;
    if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
      return Status::IOError("cannot create " + cur + ": " + strerror(errno));
  }
  return Status::OK();
}

Status MakeSharedDir(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) return Status::OK();
  HTAM_RETURN_IF_ERROR(MakeDirs(path, 0755));
  if (chmod(path.c_str(), 01777) != 0)
    return Status::IOError("cannot make " + path + " shared: " + strerror(errno));
  return Status::OK();
}

Result<std::string> CreateUniqueFile(const std::string& prefix) {
  std::string name = prefix + ".tmp.XXXXXX";
  const int fd = mkstemp(name.data());
  if (fd < 0) return Status::IOError("cannot create " + name + ": " + std::strerror(errno));
  close(fd);
  return name;
}

Status SyncPath(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return Status::IOError("cannot fsync " + path + ": " + std::strerror(err));
  return Status::OK();
}

Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) {
  HTAM_ASSIGN_OR_RETURN(std::string tmp, CreateUniqueFile(path));
  auto fail = [&](const std::string& what) {
    const int err = errno;
    unlink(tmp.c_str());
    return Status::IOError(what + ": " + std::strerror(err));
  };
  const int fd = open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fail("cannot open " + tmp);
  bool ok = fchmod(fd, mode) == 0;
  for (size_t done = 0; ok && done < data.size();) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  if (!ok) {
    const Status s = fail("cannot write " + tmp);
    close(fd);
    return s;
  }
  if (close(fd) != 0) return fail("cannot write " + tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename " + tmp + " onto " + path);
  const size_t slash = path.find_last_of('/');
  return SyncPath(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

Status PublishFile(const std::string& path, const std::function<Status(const std::string&)>& fill,
                   bool durable, mode_t mode) {
  HTAM_ASSIGN_OR_RETURN(std::string tmp, CreateUniqueFile(path));
  Status st = chmod(tmp.c_str(), mode) == 0
                  ? Status::OK()
                  : Status::IOError("cannot chmod " + tmp + ": " + std::strerror(errno));
  if (st.ok()) st = fill(tmp);
  if (st.ok() && durable) st = SyncPath(tmp);
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0)
    st = Status::IOError("cannot rename " + tmp + " onto " + path + ": " + std::strerror(errno));
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  if (!durable) return Status::OK();
  const size_t slash = path.find_last_of('/');
  return SyncPath(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

Status MovePath(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0)
    return Status::IOError("cannot move " + from + " to " + to + ": " + std::strerror(errno));
  return Status::OK();
}

Status PublishDir(const std::string& dir, const std::function<Status(const std::string&)>& fill,
                  mode_t mode) {
  std::string staging = dir + ".tmp.XXXXXX";
  if (!mkdtemp(staging.data()))
    return Status::IOError("cannot create " + staging + ": " + std::strerror(errno));
  auto discard = [&staging] {
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);
  };
  if (chmod(staging.c_str(), mode) != 0) {
    const Status s = Status::IOError("cannot chmod " + staging + ": " + std::strerror(errno));
    discard();
    return s;
  }
  if (Status s = fill(staging); !s.ok()) {
    discard();
    return s;
  }
  if (rename(staging.c_str(), dir.c_str()) != 0) {
    const int err = errno;
    discard();
    struct stat st;
    if (stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::OK();  // published
    return Status::IOError("cannot rename " + staging + " to " + dir + ": " + std::strerror(err));
  }
  return Status::OK();
}

}  // namespace htam
