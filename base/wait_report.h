// Waits that are not the caller's own work (a device's turn, a lock held by another
// evaluation), reported to whoever measures that work: an evaluation worker tells its evaluator,
// which keeps them out of the job's limits (daemon/eval/work_clock.h). Nothing is reported until
// a process installs an observer.
// Thread-safety: SetWaitObserver before other threads start; ScopedWait from any thread (the
// observer must be safe for that; the worker's writes one frame).
#pragma once

namespace htam {

// Called with true when a wait begins and false when it ends; null uninstalls.
using WaitObserver = void (*)(bool waiting);
void SetWaitObserver(WaitObserver observer);

// A stage that needs more than the evaluator's fixed limit because of the task's own size (a
// reference that takes seconds per call): `seconds` of its own work, for the current stage.
using BudgetObserver = void (*)(double seconds);
void SetBudgetObserver(BudgetObserver observer);
void ReportStageBudget(double seconds);

// Reports a wait for its lifetime. Construct it only once the wait is certain (a first
// non-blocking attempt failed), so that an uncontended lock costs nothing.
class ScopedWait {
 public:
  ScopedWait();
  ~ScopedWait();
  ScopedWait(const ScopedWait&) = delete;
  ScopedWait& operator=(const ScopedWait&) = delete;
};

}  // namespace htam
