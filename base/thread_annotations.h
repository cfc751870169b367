// Clang thread-safety annotations and the annotated mutexes they are checked against: a member
// marked GUARDED_BY(mu_) may only be touched with mu_ held, a function marked REQUIRES(mu_) only
// called with it held, and clang's -Wthread-safety proves it at compile time (ctest
// thread_safety_*, label lint). Under other compilers the macros expand to nothing and Mutex,
// SharedMutex and CondVar are thin wrappers over the standard library.
// Thread-safety: Mutex, SharedMutex and CondVar are safe for concurrent use (that is their job);
// a MutexLock, ReaderMutexLock or WriterMutexLock belongs to the one thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define HTAM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HTAM_THREAD_ANNOTATION(x)
#endif

// On a class: instances are capabilities (locks) that the analysis tracks.
#define CAPABILITY(name) HTAM_THREAD_ANNOTATION(capability(name))
// On a class: an RAII object that holds a capability for its lifetime.
#define SCOPED_CAPABILITY HTAM_THREAD_ANNOTATION(scoped_lockable)
// On a member: reading needs the lock held shared at least, writing needs it held exclusively.
#define GUARDED_BY(x) HTAM_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: the same rule for the data it points to.
#define PT_GUARDED_BY(x) HTAM_THREAD_ANNOTATION(pt_guarded_by(x))
// On a lock member: the lock order (checked by -Wthread-safety-beta only; documents it anyway).
#define ACQUIRED_BEFORE(...) HTAM_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) HTAM_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
// On a function: callers must hold the locks (exclusively / at least shared).
#define REQUIRES(...) HTAM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) HTAM_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: it takes the locks and returns with them held / it releases held locks.
#define ACQUIRE(...) HTAM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) HTAM_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) HTAM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) HTAM_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) HTAM_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) HTAM_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: callers must not hold the locks (it takes them itself; no self-deadlock).
#define EXCLUDES(...) HTAM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: asserts (to the analysis) that the lock is held from here on.
#define ASSERT_CAPABILITY(x) HTAM_THREAD_ANNOTATION(assert_capability(x))
#define ASSERT_SHARED_CAPABILITY(x) HTAM_THREAD_ANNOTATION(assert_shared_capability(x))
// On a function: it returns a reference to the named lock.
#define RETURN_CAPABILITY(x) HTAM_THREAD_ANNOTATION(lock_returned(x))
// On a function: not analysed. Only with a comment saying why it is safe (e.g. runs before any
// other thread exists).
#define NO_THREAD_SAFETY_ANALYSIS HTAM_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace htam {

class CondVar;

// An exclusive lock (std::mutex) the analysis knows about.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds the lock (no run-time check).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// A reader-writer lock (std::shared_mutex): many readers or one writer.
class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void ReaderLock() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void ReaderUnlock() RELEASE_SHARED() { mu_.unlock_shared(); }
  void AssertHeld() const ASSERT_CAPABILITY(this) {}
  void AssertReaderHeld() const ASSERT_SHARED_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope. Unlock()/Lock() let a scope give the lock up for a while (a
// wait, a call that must not hold it); the destructor releases it only if held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// Holds a SharedMutex exclusively for its scope.
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterMutexLock() RELEASE() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex shared for its scope.
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() RELEASE() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// A condition variable over a Mutex the caller holds. Waits are written as loops over the
// condition (`while (!ready_) cv_.Wait(&mu_);`) so the analysis sees every guarded read made
// with the lock held, which a predicate lambda would hide from it.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases *mu, waits for a signal (or a spurious wake-up) and takes *mu again.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();  // still held: the caller's scope owns it
  }
  // As Wait, for at most `timeout`; returns false if it timed out.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    bool signalled = cv_.wait_for(l, timeout) == std::cv_status::no_timeout;
    l.release();
    return signalled;
  }
  // As Wait, until `deadline`; returns false if it passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    bool signalled = cv_.wait_until(l, deadline) == std::cv_status::no_timeout;
    l.release();
    return signalled;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace htam
