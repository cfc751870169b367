// Clock readings in whole units: steady time for intervals and deadlines, wall time for records
// that people read. Thread-safety: pure functions, safe for concurrent use.
#pragma once

#include <chrono>
#include <cstdint>

namespace htam {

// Milliseconds on the steady clock (intervals, deadlines, heartbeats; not a date).
inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Microseconds on the steady clock.
inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Milliseconds since the Unix epoch on the system clock (timestamps in records).
inline int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace htam
