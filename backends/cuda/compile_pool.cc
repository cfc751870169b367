// CompilePool: a plain FIFO work queue of compile jobs.
#include "backends/cuda/compile_pool.h"

#include <memory>

namespace htam::cuda {

CompilePool::CompilePool(const NvccCompiler& compiler, int threads) : compiler_(compiler) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

CompilePool::~CompilePool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::shared_future<Result<CompileOutput>> CompilePool::Submit(std::string source, std::string arch,
                                                              std::string flags) {
  auto task = std::make_shared<std::packaged_task<Result<CompileOutput>()>>(
      [this, source = std::move(source), arch = std::move(arch), flags = std::move(flags)] {
        return compiler_.Compile(source, arch, flags, "pool", 0);
      });
  std::shared_future<Result<CompileOutput>> f = task->get_future().share();
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.emplace_back([task] { (*task)(); });
  }
  cv_.notify_one();
  return f;
}

void CompilePool::Loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace htam::cuda
