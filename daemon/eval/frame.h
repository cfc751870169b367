// The evaluator <-> htam-eval-worker framing: each message is a 4-byte big-endian length followed
// by that many bytes of body. A body is either a JSON object with a "type" field (the control
// messages: describe, hello, progress, fatal, compile, compiled), or, for the job and its result,
// the byte 0x01 followed by a schema/job.fbs buffer (JobSpec "HTJB" or JobResult "HTJR",
// daemon/eval/job_codec.h). Readers present a buffer frame as {"type": "job"|"result", "buffer":
// <binary>}; the buffer is verified where it is unpacked (UnpackJob / UnpackResult).
// Carried over a socketpair (docs/protocol.md, "One job type").
// Thread-safety: functions are stateless; one reader and one writer per fd.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace htam::eval {

constexpr uint32_t kMaxFrameBytes = 64u << 20;

// The first byte of a buffer frame's body (a JSON body starts with '{').
constexpr char kBufferFrameMark = 0x01;

// Writes one frame (blocking; retries on EINTR). IOError when the peer is gone.
Status WriteFrame(int fd, const nlohmann::json& body);
// Writes one buffer frame: a packed JobSpec or JobResult (job_codec.h).
Status WriteBufferFrame(int fd, const std::string& buffer);
// The buffer of a frame read as {"type", "buffer"}; empty when it has none.
std::string FrameBuffer(const nlohmann::json& frame);
// Reads one frame (blocking). NotFound on a clean EOF before any byte; Corruption on a bad length,
// invalid JSON or a buffer frame that is neither a job nor a result; IOError otherwise.
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
