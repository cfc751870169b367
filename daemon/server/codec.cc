// Inbound checks and reply encoding for the htamd wire protocol (docs/protocol.md).
#include "daemon/server/codec.h"

#include <cstdint>
#include <cstring>

#include "daemon/server/request_fields.h"
#include "flatbuffers/flatbuffers.h"

namespace htam::server {

void AlignedFrame::Assign(const void* data, size_t size) {
  words_.resize((size + 7) / 8 + 1);
  if (size > 0) std::memcpy(words_.data(), data, size);
  size_ = size;
}

namespace {

// Reads Envelope.version and request_id after verifying only the root table header and those two
// scalar fields, so that an error about a malformed body can still carry the request id.
bool ReadHeader(const uint8_t* buf, size_t size, uint16_t* version, uint64_t* request_id) {
  if (size < 8 || size >= FLATBUFFERS_MAX_BUFFER_SIZE) return false;
  flatbuffers::Verifier verifier(buf, size, 8, 16);
  if (!verifier.VerifyAlignment(0, sizeof(flatbuffers::uoffset_t))) return false;
  auto root_off = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(buf);
  if (root_off >= size || root_off < 4) return false;
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(buf + root_off);
  if (!table->VerifyTableStart(verifier)) return false;
  if (!table->VerifyField<uint16_t>(verifier, fb::Envelope::VT_VERSION, sizeof(uint16_t)))
    return false;
  if (!table->VerifyField<uint64_t>(verifier, fb::Envelope::VT_REQUEST_ID, sizeof(uint64_t)))
    return false;
  *version = table->GetField<uint16_t>(fb::Envelope::VT_VERSION, 1);
  *request_id = table->GetField<uint64_t>(fb::Envelope::VT_REQUEST_ID, 0);
  return true;
}

Decoded Fail(Decoded d, fb::ErrorCode code, std::string message) {
  d.ok = false;
  d.error = code;
  d.message = std::move(message);
  d.envelope = nullptr;
  return d;
}

}  // namespace

uint64_t PeekRequestId(const AlignedFrame& frame) {
  uint16_t version = 0;
  uint64_t request_id = 0;
  if (frame.size() < 12 || !flatbuffers::BufferHasIdentifier(frame.data(), fb::EnvelopeIdentifier()))
    return 0;
  return ReadHeader(frame.data(), frame.size(), &version, &request_id) ? request_id : 0;
}

Decoded DecodeRequest(const AlignedFrame& frame, const CodecLimits& limits) {
  Decoded d;
  const uint8_t* buf = frame.data();
  const size_t size = frame.size();
  if (size > limits.max_message_bytes)
    return Fail(d, fb::ErrorCode::Malformed,
                "message of " + std::to_string(size) + " bytes exceeds the limit of " +
                    std::to_string(limits.max_message_bytes));
  if (size < 12) return Fail(d, fb::ErrorCode::Malformed, "message too short to be an envelope");
  if (!flatbuffers::BufferHasIdentifier(buf, fb::EnvelopeIdentifier()))
    return Fail(d, fb::ErrorCode::Malformed, "not an htam envelope (file identifier is not HTAM)");
  uint16_t version = 0;
  if (!ReadHeader(buf, size, &version, &d.request_id))
    return Fail(d, fb::ErrorCode::Malformed, "envelope header failed verification");
  if (version != static_cast<uint16_t>(fb::ProtocolVersion::Current))
    return Fail(d, fb::ErrorCode::UnsupportedVersion,
                "protocol version " + std::to_string(version) +
                    " not supported; this daemon speaks " +
                    std::to_string(static_cast<int>(fb::ProtocolVersion::Current)));
  flatbuffers::Verifier verifier(buf, size, limits.max_depth, limits.max_tables);
  if (!fb::VerifyEnvelopeBuffer(verifier))
    return Fail(d, fb::ErrorCode::Malformed, "envelope failed FlatBuffers verification");
  const fb::Envelope* env = fb::GetEnvelope(buf);
  fb::Body type = env->body_type();
  if (type == fb::Body::NONE || env->body() == nullptr)
    return Fail(d, fb::ErrorCode::UnknownMessage, "envelope has no body");
  if (static_cast<uint8_t>(type) > static_cast<uint8_t>(fb::Body::MAX))
    return Fail(d, fb::ErrorCode::UnknownMessage,
                "unknown message type " + std::to_string(static_cast<int>(type)));
  if (!IsRequest(type))
    return Fail(d, fb::ErrorCode::UnknownMessage,
                std::string("message type ") + fb::EnumNameBody(type) + " is not a request");
  Status st = CheckRequestLimits(*env, limits);
  if (st.ok()) st = CheckRequestFields(*env);
  if (!st.ok()) return Fail(d, fb::ErrorCode::InvalidArgument, st.message());
  d.ok = true;
  d.envelope = env;
  return d;
}

namespace {
size_t Len(const flatbuffers::String* s) {
  return s ? s->size() : 0;
}
template <typename V>
size_t Len(const V* v) {
  return v ? v->size() : 0;
}
// The FlatBuffers verifier checks a vector's length prefix for alignment, not its elements: a
// hand-made frame can place 8-byte ids at an address that is only 4-byte aligned.
template <typename T>
bool Misaligned(const flatbuffers::Vector<T>* v) {
  return v && v->size() > 0 && reinterpret_cast<uintptr_t>(v->Data()) % alignof(T) != 0;
}
constexpr size_t kMaxName = 4096;  // names, backends, task, client, summary lines
constexpr size_t kMaxSummary = 65536;
constexpr size_t kMaxIds = 4096;
constexpr size_t kMaxEmbedding = 65536;
constexpr size_t kMinIdentitySecret = 16, kMaxIdentitySecret = 64;
}  // namespace

Status CheckRequestLimits(const fb::Envelope& env, const CodecLimits& limits) {
  auto too_long = [](const char* field) {
    return Status::InvalidArgument(std::string("field ") + field + " is too long");
  };
  switch (env.body_type()) {
    case fb::Body::Hello: {
      auto* m = env.body_as_Hello();
      if (Len(m->client()) > kMaxName || Len(m->client_version()) > kMaxName)
        return too_long("client");
      if (Len(m->identity_secret()) != 0 && (m->identity_secret()->size() < kMinIdentitySecret ||
                                 m->identity_secret()->size() > kMaxIdentitySecret))
        return Status::InvalidArgument("field identity_secret must hold " +
                                       std::to_string(kMinIdentitySecret) + " to " +
                                       std::to_string(kMaxIdentitySecret) + " bytes (got " +
                                       std::to_string(m->identity_secret()->size()) + ")");
      break;
    }
    case fb::Body::OpenSession: {
      auto* m = env.body_as_OpenSession();
      if (Len(m->task()) > kMaxName) return too_long("task");
      if (Len(m->backend()) > kMaxName || Len(m->arch()) > kMaxName)
        return too_long("backend/arch");
      if (Len(m->client()) > kMaxName || Len(m->model()) > kMaxName)
        return too_long("client/model");
      break;
    }
    case fb::Body::NextStep:
      if (Len(env.body_as_NextStep()->embedding()) > kMaxEmbedding) return too_long("embedding");
      break;
    case fb::Body::Submit: {
      auto* m = env.body_as_Submit();
      if (Len(m->source()) > limits.max_source_bytes) return too_long("source");
      if (Len(m->language()) > kMaxName) return too_long("language");
      if (Len(m->summary()) > kMaxSummary) return too_long("summary");
      if (Len(m->strategy_ids()) > kMaxIds) return too_long("strategy_ids");
      if (Misaligned(m->strategy_ids()))
        return Status::InvalidArgument("field strategy_ids is not aligned to 8 bytes");
      break;
    }
    case fb::Body::Record: {
      auto* m = env.body_as_Record();
      if (Len(m->source()) > limits.max_source_bytes) return too_long("source");
      if (Len(m->summary()) > kMaxSummary) return too_long("summary");
      if (Len(m->strategy_ids()) > kMaxIds) return too_long("strategy_ids");
      if (Misaligned(m->strategy_ids()))
        return Status::InvalidArgument("field strategy_ids is not aligned to 8 bytes");
      break;
    }
    case fb::Body::Query: {
      auto* m = env.body_as_Query();
      if (Len(m->task()) > kMaxName || Len(m->backend()) > kMaxName)
        return too_long("task/backend");
      break;
    }
    case fb::Body::StatusRequest:
      if (Len(env.body_as_StatusRequest()->section()) > kMaxName) return too_long("section");
      break;
    default: break;
  }
  return Status::OK();
}

bool IsRequest(fb::Body type) {
  switch (type) {
    case fb::Body::Hello:
    case fb::Body::OpenSession:
    case fb::Body::NextStep:
    case fb::Body::Submit:
    case fb::Body::Poll:
    case fb::Body::Record:
    case fb::Body::CloseSession:
    case fb::Body::Query:
    case fb::Body::StatusRequest: return true;
    default: return false;
  }
}

std::string Encode(const fb::EnvelopeT& envelope) {
  flatbuffers::FlatBufferBuilder fbb(256);
  fbb.Finish(fb::Envelope::Pack(fbb, &envelope), fb::EnvelopeIdentifier());
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

std::string EncodeError(uint64_t request_id, fb::ErrorCode code, std::string_view message,
                        uint32_t retry_after_ms) {
  fb::ErrorT err;
  err.code = code;
  err.message = std::string(message);
  err.retry_after_ms = retry_after_ms;
  return EncodeReply(request_id, std::move(err));
}

fb::ErrorCode ErrorCodeFor(const Status& status) {
  // Store faults (daemon/lmdb/env.h names them in the message), each its own code.
  if (status.code() == Status::Code::kResourceExhausted) {
    if (status.message().find("disk full: ") != std::string::npos) return fb::ErrorCode::DiskFull;
    if (status.message().find("map full: ") != std::string::npos) return fb::ErrorCode::MapFull;
  }
  switch (status.code()) {
    case Status::Code::kIOError: return fb::ErrorCode::IoError;
    case Status::Code::kOk: return fb::ErrorCode::None;
    case Status::Code::kNotFound: return fb::ErrorCode::NotFound;
    case Status::Code::kInvalidArgument: return fb::ErrorCode::InvalidArgument;
    case Status::Code::kFailedPrecondition: return fb::ErrorCode::InvalidArgument;
    case Status::Code::kResourceExhausted: return fb::ErrorCode::Busy;
    case Status::Code::kUnavailable: return fb::ErrorCode::Unavailable;
    case Status::Code::kPermissionDenied: return fb::ErrorCode::Unauthorized;
    case Status::Code::kTimeout: return fb::ErrorCode::Unavailable;
    default: return fb::ErrorCode::Internal;
  }
}

}  // namespace htam::server
