// schema/job.fbs tables <-> verified buffers. See job_codec.h.
#include "daemon/eval/job_codec.h"

#include <cstdlib>
#include <cstring>
#include <memory>

namespace htam::eval {
namespace {

// The Verifier checks alignment: a buffer that arrives at an odd offset (inside a frame, an LMDB
// page) is copied into storage of its own first.
struct Aligned {
  explicit Aligned(std::string_view b) {
    if (reinterpret_cast<uintptr_t>(b.data()) % alignof(std::max_align_t) == 0) {
      data = reinterpret_cast<const uint8_t*>(b.data());
    } else {
      copy.reset(new std::max_align_t[b.size() / sizeof(std::max_align_t) + 1]);
      std::memcpy(copy.get(), b.data(), b.size());
      data = reinterpret_cast<const uint8_t*>(copy.get());
    }
    size = b.size();
  }
  std::unique_ptr<std::max_align_t[]> copy;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// The verifier's limits: a job's source and task files fit well below these.
flatbuffers::Verifier::Options VerifierOptions() {
  flatbuffers::Verifier::Options o;
  o.max_depth = 16;
  o.max_tables = 1u << 20;
  return o;
}

template <typename Table, typename NativeT>
Result<NativeT> Unpack(std::string_view buffer, const char* identifier, const char* type,
                       const std::string& what) {
  if (buffer.size() < 8)
    return Status::Corruption(what + ": " + std::to_string(buffer.size()) +
                              " bytes is too short for a " + type);
  if (!flatbuffers::BufferHasIdentifier(buffer.data(), identifier))
    return Status::Corruption(what + ": not a " + type + " (identifier '" +
                              BufferIdentifier(buffer) + "', expected '" + identifier + "')");
  Aligned a(buffer);
  flatbuffers::Verifier v(a.data, a.size, VerifierOptions());
  if (!v.VerifyBuffer<Table>(identifier))
    return Status::Corruption(what + ": the " + type + " fails the FlatBuffers verifier");
  NativeT out;
  flatbuffers::GetRoot<Table>(a.data)->UnPackTo(&out);
  return out;
}

template <typename NativeT>
std::string Pack(const NativeT& t, const char* identifier) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  fbb.Finish(NativeT::TableType::Pack(fbb, &t), identifier);
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace

std::string PackJob(const fb::JobSpecT& spec) {
  return Pack(spec, kJobIdentifier);
}

Result<fb::JobSpecT> UnpackJob(std::string_view buffer, const std::string& what) {
  return Unpack<fb::JobSpec, fb::JobSpecT>(buffer, kJobIdentifier, "job", what);
}

std::string PackResult(const fb::JobResultT& spec) {
  return Pack(spec, kResultIdentifier);
}

Result<fb::JobResultT> UnpackResult(std::string_view buffer, const std::string& what) {
  auto r = Unpack<fb::JobResult, fb::JobResultT>(buffer, kResultIdentifier, "result", what);
  if (!r.ok()) return r;
  if (r->status < fb::OutcomeStatus::MIN || r->status > fb::OutcomeStatus::MAX)
    r->status = fb::OutcomeStatus::InfraError;
  if (r->bottleneck < fb::Bottleneck::MIN || r->bottleneck > fb::Bottleneck::MAX)
    r->bottleneck = fb::Bottleneck::Unknown;
  return r;
}

std::string BufferIdentifier(std::string_view buffer) {
  if (buffer.size() < 8) return "";
  std::string id(buffer.substr(4, 4));
  for (char& c : id)
    if (c < 0x20 || c > 0x7e) c = '?';
  return id;
}

}  // namespace htam::eval
