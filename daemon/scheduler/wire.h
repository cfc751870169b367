// The worker link's messages (htamd's worker endpoint <-> htam-worker): one JSON object per
// ZeroMQ message, after a protocol frame "HTW1" (docs/protocol.md, "Worker protocol"). The job
// carries the task's files so that a worker host needs no copy of the task suite.
// Thread-safety: functions are stateless.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "daemon/eval/evaluator.h"

namespace htam::scheduler {

inline constexpr const char* kWorkerProtocol = "HTW1";
// Task files shipped with a job: top-level regular files of the task directory, each at most this.
inline constexpr size_t kMaxTaskFileBytes = 4u << 20;

// A job as sent to a worker: backend, arch, language, source, job id, attempt and the task files.
Result<nlohmann::json> JobToWire(const eval::EvalJob& job, uint32_t attempt);
// Unpacks a job on the worker: writes its task files under `task_root`/<name>-<hash>/ (once) and
// returns the job with task_dir pointing there. InvalidArgument on a malformed message.
Result<eval::EvalJob> JobFromWire(const nlohmann::json& msg, const std::string& task_root);

nlohmann::json ResultToWire(const eval::EvalResult& r);
eval::EvalResult ResultFromWire(const nlohmann::json& msg);

// A job as recorded in the durable queue (task_dir kept as a path; the daemon host has it).
nlohmann::json JobToJournal(const eval::EvalJob& job);
Result<eval::EvalJob> JobFromJournal(const nlohmann::json& j);

}  // namespace htam::scheduler
