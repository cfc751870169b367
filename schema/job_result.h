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

}  // namespace htam::fb
