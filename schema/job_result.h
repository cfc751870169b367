// Helpers of the one evaluation result type, the schema's JobResultT (job.fbs): its profile is an
// optional table, absent meaning "all unknown", and its stage and operation times a list of
// StageTimeT. Copied beside the generated headers as "htam/schema/job_result.h" (the gate, the
// worker, the daemon and the tools all include it from there).
// Thread-safety: pure functions; ProfileOf's default is immutable.
#pragma once

#include <string>
#include <utility>

#include "htam/schema/job_generated.h"

namespace htam::fb {

// The result's profile, or the all-unknown one (-1 everywhere) when it carries none.
inline const ProfileT& ProfileOf(const JobResultT& r) {
  static const ProfileT kUnknown;
  return r.profile ? *r.profile : kUnknown;
}

// The result's profile to write into, created all-unknown when it carries none.
inline ProfileT& MutableProfile(JobResultT* r) {
  if (!r->profile) r->profile = std::make_unique<ProfileT>();
  return *r->profile;
}

// One stage or operation time.
inline StageTimeT MakeStageTime(std::string name, double ms) {
  StageTimeT t;
  t.name = std::move(name);
  t.ms = ms;
  return t;
}

// Where a KernelBench job's first try ran out of device memory, when the evaluator tries it again
// (JobResult.retry_alone): the candidate's process ended with it.
inline constexpr const char* kOutOfMemoryInCandidate = "in the candidate's process";

// A KernelBench job evaluated again with the whole share of the device's memory reserved, after
// its first try ran out of device memory `where` ("computing the golden data", "in the
// candidate's process") beside other jobs: what the second try's diagnostics add, quoting the
// first's (the judge, and the evaluator for JobResult.retry_alone).
inline std::string EvaluatedTwiceNote(const std::string& where, const std::string& first) {
  return "; evaluated twice: the first try ran out of memory " + where +
         " beside other evaluations (" + first.substr(0, 300) +
         "), the second had the whole share of the device's memory "
         "(eval.kernelbench_memory_share) to itself";
}

}  // namespace htam::fb
