// A session's per-step lists (the direction, outcome and whether it raised the session best, one
// entry per step) as rows of their own, (session, step) -> 10 bytes, so that a step appends one
// small row instead of rewriting the session's record with its whole history.
// Thread-safety: stateless functions over the caller's transaction.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "daemon/memory/store.h"
#include "htam/schema/htg_generated.h"

namespace htam::memory {

struct SessionStep {
  uint64_t direction_id = 0;
  fb::OutcomeStatus status = fb::OutcomeStatus::Ok;
  bool raised_best = false;  // the step's outcome raised the session best (Session.path_steps)
};

// (session, step), big-endian: a session's rows sort by step.
std::string SessionStepKey(uint64_t session_id, uint32_t step);

// Writes the row of one step.
Status PutSessionStep(Txn& t, uint64_t session_id, uint32_t step, const SessionStep& s);

// Calls fn for the session's steps >= from, in order, until fn returns false. A record written
// before the rows existed (schema < 4, not yet migrated) holds its first steps in its own lists:
// those come first, the rows after them.
Status ForEachSessionStep(const Txn& t, const fb::Session& s, uint32_t from,
                          const std::function<bool(uint32_t step, const SessionStep&)>& fn);

// Fills s's lists (history, last_status, path_steps) from its rows, after what the record itself
// holds: the session as a client or the CLI sees it.
Status LoadSessionSteps(const Txn& t, fb::SessionT* s);

// Stores the session: lists it carries (an import, a migration) become rows from step 0 on, and
// the record is written without them.
Status PutSessionMovingSteps(Txn& t, fb::SessionT s);

}  // namespace htam::memory
