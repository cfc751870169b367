// The worker link's messages (htamd's worker endpoint <-> htam-worker), protocol "HTW2"
// (docs/protocol.md, "Worker protocol"): every ZeroMQ message is three frames, the protocol name,
// the message type and its body. A job's body is a schema/job.fbs JobSpec buffer that carries the
// task's files, so that a worker host needs no copy of the task suite; a result's is a JobResult
// buffer; the control messages (register, registered, refused, reregister, heartbeat, bye) are
// JSON objects. Job and result buffers go through daemon/eval/job_codec.h and are verified there.
// Thread-safety: functions are stateless.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "daemon/eval/evaluator.h"

namespace htam::scheduler {

inline constexpr const char* kWorkerProtocol = "HTW2";
// The protocol before the job type moved into schema/job.fbs (one JSON object per message): a
// worker that speaks it is answered, in its own protocol, with a "refused" naming both versions.
inline constexpr const char* kOldWorkerProtocol = "HTW1";
// Task files shipped with a job: top-level regular files of the task directory, each at most this.
inline constexpr size_t kMaxTaskFileBytes = 4u << 20;

// A job as sent to a worker: the JobSpec buffer with its task's name and files and the attempt
// (its task_dir and context stay on the daemon). NotFound when the task directory has no task.json.
Result<std::string> JobToWire(const eval::EvalJob& job, uint32_t attempt);
// Unpacks a job on the worker: writes its task files under `task_root`/<name>-<hash>/ (once) and
// returns the job with task_dir pointing there. *job_id and *attempt are set as soon as the buffer
// is verified (so that a refusal can name them), else left alone. InvalidArgument on a malformed
// message (a buffer that fails the verifier, a bad task name or file name, no task.json).
Result<eval::EvalJob> JobFromWire(std::string_view buffer, const std::string& task_root,
                                  uint64_t* job_id, uint32_t* attempt);

// A result with the attempt of the job it answers. ResultFromWire: InvalidArgument on a buffer
// that is not a verified JobResult.
std::string ResultToWire(const eval::EvalResult& r, uint32_t attempt);
Result<eval::EvalResult> ResultFromWire(std::string_view buffer, uint32_t* attempt);

}  // namespace htam::scheduler
