// EvalJob / EvalResult <-> schema/job.fbs, and verified buffers. See job_codec.h.
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

std::vector<std::unique_ptr<fb::StageTimeT>> TimesToSpec(
    const std::vector<std::pair<std::string, double>>& v) {
  std::vector<std::unique_ptr<fb::StageTimeT>> out;
  for (const auto& [name, ms] : v) {
    auto t = std::make_unique<fb::StageTimeT>();
    t->name = name;
    t->ms = ms;
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<std::pair<std::string, double>> TimesFromSpec(
    const std::vector<std::unique_ptr<fb::StageTimeT>>& v) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& t : v)
    if (t) out.emplace_back(t->name, t->ms);
  return out;
}

}  // namespace

fb::JobSpecT JobToSpec(const EvalJob& job) {
  fb::JobSpecT s;
  s.job_id = job.job_id;
  s.task_dir = job.task_dir;
  s.backend = job.backend;
  s.arch = job.arch;
  s.language = job.language;
  s.source = job.source;
  s.session_id = job.session_id;
  s.profile = job.profile;
  s.context = job.context;
  return s;
}

EvalJob JobFromSpec(const fb::JobSpecT& s) {
  EvalJob job;
  job.job_id = s.job_id;
  job.task_dir = s.task_dir;
  job.backend = s.backend;
  job.arch = s.arch;
  job.language = s.language;
  job.source = s.source;
  job.session_id = s.session_id;
  job.profile = s.profile;
  job.context = s.context;
  return job;
}

fb::JobResultT ResultToSpec(const EvalResult& r) {
  fb::JobResultT s;
  s.job_id = r.job_id;
  s.status = r.status;
  s.diagnostics = r.diagnostics;
  s.median_us = r.median_us;
  s.spread_us = r.spread_us;
  s.repetitions = r.repetitions;
  s.baseline_us = r.baseline_us;
  s.speedup = r.speedup;
  s.profile = std::make_unique<fb::ProfileT>(r.profile);
  s.candidate_hash = r.candidate_hash;
  s.device = r.device;
  s.arch = r.arch;
  s.wall_ms = r.wall_ms;
  s.bottleneck = r.bottleneck;
  s.stage_ms = TimesToSpec(r.stage_ms);
  s.op_ms = TimesToSpec(r.op_ms);
  s.compile_cached = r.compile_cached;
  s.compile_ms = r.compile_ms;
  s.cases = r.cases;
  s.flops = r.flops;
  s.bytes = r.bytes;
  s.sol_us = r.sol_us;
  s.floor_us = r.floor_us;
  s.copy_bytes_per_s = r.copy_bytes_per_s;
  s.fp32_flops = r.fp32_flops;
  s.tensor16_flops = r.tensor16_flops;
  s.golden_computed = r.golden_computed;
  s.baseline_compile_us = r.baseline_compile_us;
  s.baseline_note = r.baseline_note;
  s.profile_note = r.profile_note;
  s.profiled_kernels = r.profiled_kernels;
  s.profiled_us = r.profiled_us;
  return s;
}

EvalResult ResultFromSpec(const fb::JobResultT& s) {
  EvalResult r;
  r.job_id = s.job_id;
  // A value this build does not know (a newer peer) is not trusted as an outcome.
  r.status = s.status >= fb::OutcomeStatus::MIN && s.status <= fb::OutcomeStatus::MAX
                 ? s.status
                 : fb::OutcomeStatus::InfraError;
  r.diagnostics = s.diagnostics;
  r.median_us = s.median_us;
  r.spread_us = s.spread_us;
  r.repetitions = s.repetitions;
  r.baseline_us = s.baseline_us;
  r.speedup = s.speedup;
  if (s.profile) r.profile = *s.profile;
  r.candidate_hash = s.candidate_hash;
  r.device = s.device;
  r.arch = s.arch;
  r.wall_ms = s.wall_ms;
  r.bottleneck = s.bottleneck >= fb::Bottleneck::MIN && s.bottleneck <= fb::Bottleneck::MAX
                     ? s.bottleneck
                     : fb::Bottleneck::Unknown;
  r.stage_ms = TimesFromSpec(s.stage_ms);
  r.op_ms = TimesFromSpec(s.op_ms);
  r.compile_cached = s.compile_cached;
  r.compile_ms = s.compile_ms;
  r.cases = s.cases;
  r.flops = s.flops;
  r.bytes = s.bytes;
  r.sol_us = s.sol_us;
  r.floor_us = s.floor_us;
  r.copy_bytes_per_s = s.copy_bytes_per_s;
  r.fp32_flops = s.fp32_flops;
  r.tensor16_flops = s.tensor16_flops;
  r.golden_computed = s.golden_computed;
  r.baseline_compile_us = s.baseline_compile_us;
  r.baseline_note = s.baseline_note;
  r.profile_note = s.profile_note;
  r.profiled_kernels = s.profiled_kernels;
  r.profiled_us = s.profiled_us;
  return r;
}

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
  return Unpack<fb::JobResult, fb::JobResultT>(buffer, kResultIdentifier, "result", what);
}

std::string BufferIdentifier(std::string_view buffer) {
  if (buffer.size() < 8) return "";
  std::string id(buffer.substr(4, 4));
  for (char& c : id)
    if (c < 0x20 || c > 0x7e) c = '?';
  return id;
}

}  // namespace htam::eval
