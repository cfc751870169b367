// Length-prefixed frames: JSON control messages and schema/job.fbs buffers; see frame.h.
#include "daemon/eval/frame.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "daemon/eval/job_codec.h"

namespace htam::eval {
namespace {

Status WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    // MSG_NOSIGNAL: a worker that died must not take the daemon down with SIGPIPE.
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      usleep(1000);
      continue;
    }
    if (w <= 0) return Status::IOError(std::string("frame write: ") + std::strerror(errno));
    p += w;
    n -= size_t(w);
  }
  return Status::OK();
}

// 0 = EOF before any byte, 1 = ok, -1 = error / short read.
int ReadAll(int fd, char* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return got == 0 && r == 0 ? 0 : -1;
    got += size_t(r);
  }
  return 1;
}

Result<nlohmann::json> Parse(const char* p, size_t n) {
  if (n > 0 && p[0] == kBufferFrameMark) {
    std::string_view buf(p + 1, n - 1);
    const std::string id = BufferIdentifier(buf);
    const char* type = id == kJobIdentifier ? "job" : id == kResultIdentifier ? "result" : nullptr;
    if (!type)
      return Status::Corruption("buffer frame of " + std::to_string(buf.size()) +
                                " bytes is neither a job nor a result (identifier '" + id + "')");
    nlohmann::json j = {{"type", type}};
    j["buffer"] = nlohmann::json::binary_t(std::vector<uint8_t>(buf.begin(), buf.end()));
    return j;
  }
  try {
    auto j = nlohmann::json::parse(p, p + n);
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
      return Status::Corruption("frame is not an object with a type");
    return j;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("frame is not valid JSON: ") + e.what());
  }
}

Status WriteBody(int fd, const std::string& text) {
  if (text.size() > kMaxFrameBytes) return Status::InvalidArgument("frame too large");
  uint32_t n = uint32_t(text.size());
  char hdr[4] = {char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
  std::string all(hdr, 4);
  all += text;
  return WriteAll(fd, all.data(), all.size());
}

}  // namespace

Status WriteFrame(int fd, const nlohmann::json& body) {
  std::string text;
  try {
    text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("frame encode: ") + e.what());
  }
  return WriteBody(fd, text);
}

Status WriteBufferFrame(int fd, const std::string& buffer) {
  return WriteBody(fd, std::string(1, kBufferFrameMark) + buffer);
}

std::string FrameBuffer(const nlohmann::json& frame) {
  if (!frame.is_object() || !frame.contains("buffer") || !frame["buffer"].is_binary()) return "";
  const auto& b = frame["buffer"].get_binary();
  return std::string(b.begin(), b.end());
}

Result<nlohmann::json> ReadFrame(int fd) {
  unsigned char hdr[4];
  int r = ReadAll(fd, reinterpret_cast<char*>(hdr), 4);
  if (r == 0) return Status::NotFound("peer closed");
  if (r < 0) return Status::IOError("frame read failed");
  uint32_t n = uint32_t(hdr[0]) << 24 | uint32_t(hdr[1]) << 16 | uint32_t(hdr[2]) << 8 | hdr[3];
  if (n > kMaxFrameBytes)
    return Status::Corruption("frame length " + std::to_string(n) + " too large");
  std::string body(n, '\0');
  if (ReadAll(fd, body.data(), n) != 1) return Status::IOError("truncated frame");
  return Parse(body.data(), body.size());
}

bool FrameReader::Feed(int fd) {
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r > 0) {
      buf_.append(buf, size_t(r));
      if (buf_.size() > kMaxFrameBytes + 4) {
        eof_ = true;
        return false;
      }
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    eof_ = true;
    return false;
  }
}

bool FrameReader::Next(nlohmann::json* out, Status* error) {
  *error = Status::OK();
  if (buf_.size() < 4) return false;
  auto* h = reinterpret_cast<const unsigned char*>(buf_.data());
  uint32_t n = uint32_t(h[0]) << 24 | uint32_t(h[1]) << 16 | uint32_t(h[2]) << 8 | h[3];
  if (n > kMaxFrameBytes) {
    *error = Status::Corruption("frame length too large");
    return false;
  }
  if (buf_.size() < 4 + size_t(n)) return false;
  auto j = Parse(buf_.data() + 4, n);
  buf_.erase(0, 4 + size_t(n));
  if (!j.ok()) {
    *error = j.status();
    return false;
  }
  *out = std::move(*j);
  return true;
}

}  // namespace htam::eval
