// A planted locking mistake that the thread-safety check must reject (ctest
// thread_safety_rejects_violation): if this ever compiles cleanly under the check, the check has
// stopped checking. Never built, only compiled by clang with -fsyntax-only.
#include "base/thread_annotations.h"

namespace {

class Counter {
 public:
  void Add() { ++count_; }  // no lock taken: the analysis must object
  int Get() {
    htam::MutexLock l(&mu_);
    return count_;
  }

 private:
  htam::Mutex mu_;
  int count_ GUARDED_BY(mu_) = 0;
};

}  // namespace

int main() {
  Counter c;
  c.Add();
  return c.Get();
}
