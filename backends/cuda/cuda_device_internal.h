// What the parts of CudaDevice share (cuda_device.cc, cuda_timing.cc, cuda_roofline.cc): the
// clock helpers and the synchronization helper thread. Internal to the CUDA backend.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace htam::cuda {

using Clock = std::chrono::steady_clock;

inline double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

inline double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Sync mode: a thread that runs cudaDeviceSynchronize on request, so that the device thread can
// bound the wait (a hang on any stream becomes a timeout) and still see device idle the same way
// whatever streams the candidate used: the helper is already blocked in the synchronization when
// the work ends, for work on the handed stream and on the candidate's own streams alike. While a
// timing is active (SetActive) the helper spins for requests instead of sleeping, so that no
// wake-up latency lands in the window. Created at device open (the gate counts threads around
// calls). After a timeout the helper may stay blocked forever: it is detached, never joined.
class IdleWaiter {
 public:
  explicit IdleWaiter(int device) : st_(std::make_shared<State>()) {
    std::shared_ptr<State> st = st_;
    thread_ = std::thread([st, device] { Loop(st, device); });
  }
  ~IdleWaiter() {
    st_->stop = true;
    st_->cv.notify_all();
    if (stuck_) {
      thread_.detach();  // blocked in a synchronization that never ends; the process exits soon
    } else {
      thread_.join();
    }
  }
  void SetActive(bool on) {
    st_->active = on;
    st_->cv.notify_all();
  }
  // Device-wide synchronization on the helper; false when it did not end within timeout_ms.
  bool Sync(double timeout_ms, cudaError_t* err) {
    unsigned ticket = ++ticket_;
    st_->request.store(ticket, std::memory_order_release);
    if (!st_->active) st_->cv.notify_all();
    auto t0 = std::chrono::steady_clock::now();
    while (st_->done.load(std::memory_order_acquire) != ticket) {
      if (timeout_ms > 0 &&
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() >
              timeout_ms) {
        stuck_ = true;
        return false;
      }
    }
    *err = static_cast<cudaError_t>(st_->err.load());
    return true;
  }

 private:
  struct State {
    std::atomic<unsigned> request{0}, done{0};
    std::atomic<int> err{0};
    std::atomic<bool> stop{false}, active{false};
    std::mutex mu;
    std::condition_variable cv;
  };
  static void Loop(const std::shared_ptr<State>& st, int device) {
    cudaSetDevice(device);
    unsigned seen = 0;
    while (!st->stop) {
      unsigned r = st->request.load(std::memory_order_acquire);
      if (r == seen) {
        if (st->active) continue;  // spinning: a request comes within microseconds
        std::unique_lock<std::mutex> l(st->mu);
        st->cv.wait_for(l, std::chrono::milliseconds(20),
                        [&] { return st->stop || st->active || st->request.load() != seen; });
        continue;
      }
      seen = r;
      cudaError_t e = cudaDeviceSynchronize();
      st->err.store(static_cast<int>(e));
      st->done.store(r, std::memory_order_release);
    }
  }
  std::shared_ptr<State> st_;
  std::thread thread_;
  unsigned ticket_ = 0;
  bool stuck_ = false;
};

}  // namespace htam::cuda
