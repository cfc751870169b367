// The wire codec of htamd: checks every inbound frame before anything reads it (size limits,
// file identifier, the FlatBuffers verifier, protocol version, known body type, then every field:
// sizes, UTF-8 strings, finite numbers) and builds
// replies. Thread-safety: free functions without shared state; safe for concurrent use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "htam/schema/protocol_generated.h"

namespace htam::server {

// Limits applied to every inbound message (from the server section of the config table).
struct CodecLimits {
  size_t max_message_bytes = 8 << 20;  // server.max_message_bytes
  size_t max_source_bytes = 1 << 20;   // server.max_source_bytes
  uint32_t max_depth = 32;             // nesting of tables and vectors
  uint32_t max_tables = 100000;        // tables in one message (bounds verification time)
};

// The outcome of checking one inbound frame.
struct Decoded {
  // ok: the envelope is verified and safe to read. Otherwise `error` and `message` say why.
  bool ok = false;
  fb::ErrorCode error = fb::ErrorCode::None;
  std::string message;
  // The request id, when at least the envelope header could be read safely (else 0), so that an
  // error about a bad body can still be correlated by the client.
  uint64_t request_id = 0;
  const fb::Envelope* envelope = nullptr;  // points into the caller's aligned buffer when ok
};

// An 8-byte aligned copy of a frame: ZeroMQ keeps small messages inline, unaligned.
class AlignedFrame {
 public:
  void Assign(const void* data, size_t size);
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> words_;
  size_t size_ = 0;
};

// Checks `frame` (already aligned). Never reads outside it, whatever its bytes.
Decoded DecodeRequest(const AlignedFrame& frame, const CodecLimits& limits);

// Semantic checks the verifier cannot do: string and vector sizes of the request body against
// the limits. OK or InvalidArgument naming the field.
Status CheckRequestLimits(const fb::Envelope& envelope, const CodecLimits& limits);

// Serializes an envelope (object API) with the file identifier.
std::string Encode(const fb::EnvelopeT& envelope);
std::string EncodeError(uint64_t request_id, fb::ErrorCode code, std::string_view message);

// Wraps any body object (fb::StepT, fb::ResultT, ...) in an envelope and serializes it.
template <typename BodyT>
std::string EncodeReply(uint64_t request_id, BodyT body) {
  fb::EnvelopeT env;
  env.version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
  env.request_id = request_id;
  env.body.Set(std::move(body));
  return Encode(env);
}

// Maps a Status code to the wire error code.
fb::ErrorCode ErrorCodeFor(const Status& status);

// True for body types a client may send to the daemon (requests, not replies).
bool IsRequest(fb::Body type);

}  // namespace htam::server
