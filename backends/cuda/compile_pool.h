// A pool of compile threads in front of an NvccCompiler, so that later candidates compile while the
// GPU verifies and times earlier ones. Results land in the compile cache; the plugin's own compile
// of the same (source, arch, flags) is then a cache hit. Size from eval.cuda_compile_threads.
// Thread-safety: Submit() is safe for concurrent use; the destructor joins the threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/nvcc_compiler.h"

namespace htam::cuda {

class CompilePool {
 public:
  CompilePool(const NvccCompiler& compiler, int threads);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  std::shared_future<Result<CompileOutput>> Submit(std::string source, std::string arch,
                                                   std::string flags);

 private:
  void Loop();
  const NvccCompiler& compiler_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace htam::cuda
