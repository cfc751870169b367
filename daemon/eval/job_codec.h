// The packing of the job tables of schema/job.fbs (JobSpec, JobResult) into buffers and back. The
// daemon's EvalJob is a JobSpecT and its EvalResult a JobResultT (evaluator.h): there is nothing
// to convert, only to pack. Every carrier of a job (remote-worker protocol, worker frames, durable
// queue) goes through here; a buffer from another process, the network or the disk is checked by
// the FlatBuffers Verifier before any field is read.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "htam/schema/job_generated.h"

namespace htam::eval {

// File identifiers: a job buffer carries "HTJB" (the schema's), a result buffer "HTJR".
inline constexpr const char* kJobIdentifier = "HTJB";
inline constexpr const char* kResultIdentifier = "HTJR";

// Buffers (identifier included). Pack never fails (an EvalJob packs as its JobSpecT; on_stage,
// a callback, is never carried); Unpack returns Corruption, naming `what` ("worker frame",
// "queued job", ...), for a buffer that is too short, has another identifier or fails the
// Verifier. An unpacked result's status and bottleneck of a value this build does not know (a
// newer peer) read as InfraError and Unknown: such a value is not trusted as an outcome.
std::string PackJob(const fb::JobSpecT& spec);
Result<fb::JobSpecT> UnpackJob(std::string_view buffer, const std::string& what);
std::string PackResult(const fb::JobResultT& spec);
Result<fb::JobResultT> UnpackResult(std::string_view buffer, const std::string& what);

// The identifier of a buffer ("" when shorter than 8 bytes): tells a job from a result.
std::string BufferIdentifier(std::string_view buffer);

}  // namespace htam::eval
