// The worker protocol's framing: each message is a 4-byte big-endian length followed by that many
// bytes of JSON (one object with a "type" field: describe, hello, job, progress, result, fatal).
// Carried over a socketpair between the Evaluator and htam-eval-worker; the same JSON bodies can
// travel as single ZeroMQ frames when remote workers connect (docs/backends.md).
// Thread-safety: functions are stateless; one reader and one writer per fd.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace htam::eval {

constexpr uint32_t kMaxFrameBytes = 64u << 20;

// Writes one frame (blocking; retries on EINTR). IOError when the peer is gone.
Status WriteFrame(int fd, const nlohmann::json& body);
// Reads one frame (blocking). NotFound on a clean EOF before any byte; Corruption on a bad length
// or invalid JSON; IOError otherwise.
Result<nlohmann::json> ReadFrame(int fd);

// Incremental reader for a non-blocking fd driven by poll(): Feed() reads what is available.
class FrameReader {
 public:
  // Reads available bytes. Returns false at EOF or on error (then eof() is true).
  bool Feed(int fd);
  // Takes the next complete frame if any: true and *out set; Corruption in *error on bad data.
  bool Next(nlohmann::json* out, Status* error);
  bool eof() const { return eof_; }

 private:
  std::string buf_;
  bool eof_ = false;
};

}  // namespace htam::eval
