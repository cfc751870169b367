// The process's wait observer (wait_report.h).
#include "base/wait_report.h"

#include <atomic>

namespace htam {
namespace {
std::atomic<WaitObserver> g_observer{nullptr};
}  // namespace

void SetWaitObserver(WaitObserver observer) { g_observer.store(observer); }

ScopedWait::ScopedWait() {
  if (WaitObserver o = g_observer.load()) o(true);
}

ScopedWait::~ScopedWait() {
  if (WaitObserver o = g_observer.load()) o(false);
}

}  // namespace htam
