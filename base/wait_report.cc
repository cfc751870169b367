// The process's wait observer (wait_report.h).
#include "base/wait_report.h"

#include <atomic>

namespace htam {
namespace {
std::atomic<WaitObserver> g_observer{nullptr};
std::atomic<BudgetObserver> g_budget{nullptr};
}  // namespace

void SetBudgetObserver(BudgetObserver observer) { g_budget.store(observer); }

void ReportStageBudget(double seconds) {
  if (BudgetObserver o = g_budget.load()) o(seconds);
}

void SetWaitObserver(WaitObserver observer) { g_observer.store(observer); }

ScopedWait::ScopedWait() {
  if (WaitObserver o = g_observer.load()) o(true);
}

ScopedWait::~ScopedWait() {
  if (WaitObserver o = g_observer.load()) o(false);
}

}  // namespace htam
