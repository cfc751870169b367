// The one conversion between the daemon's EvalJob / EvalResult and the job tables of
// schema/job.fbs (JobSpec, JobResult), and the packing of those tables into buffers. Every carrier
// of a job (remote-worker protocol, worker frames, durable queue) goes through here; a buffer from
// another process, the network or the disk is checked by the FlatBuffers Verifier before any field
// is read.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "daemon/eval/evaluator.h"
#include "htam/schema/job_generated.h"

namespace htam::eval {

// File identifiers: a job buffer carries "HTJB" (the schema's), a result buffer "HTJR".
inline constexpr const char* kJobIdentifier = "HTJB";
inline constexpr const char* kResultIdentifier = "HTJR";

// EvalJob <-> JobSpecT: every EvalJob field but on_stage (a callback, never carried). The carrier's
// own fields (task files, attempt, gate, ...) are left at their defaults / ignored.
fb::JobSpecT JobToSpec(const EvalJob& job);
EvalJob JobFromSpec(const fb::JobSpecT& spec);

// EvalResult <-> JobResultT: every field.
fb::JobResultT ResultToSpec(const EvalResult& r);
EvalResult ResultFromSpec(const fb::JobResultT& spec);

// Buffers (identifier included). Pack never fails; Unpack returns Corruption, naming `what`
// ("worker frame", "queued job", ...), for a buffer that is too short, has another identifier or
// fails the Verifier.
std::string PackJob(const fb::JobSpecT& spec);
Result<fb::JobSpecT> UnpackJob(std::string_view buffer, const std::string& what);
std::string PackResult(const fb::JobResultT& spec);
Result<fb::JobResultT> UnpackResult(std::string_view buffer, const std::string& what);

// The identifier of a buffer ("" when shorter than 8 bytes): tells a job from a result.
std::string BufferIdentifier(std::string_view buffer);

}  // namespace htam::eval
