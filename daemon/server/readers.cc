// Reader threads: memory reads (NextStep, Query) run off the poll loop; their replies go back to
// the loop, which alone sends on the front socket.
// Thread-safety: RunRead and SendReadyReplies run on the loop thread, ReaderLoop on the reader
// threads; they share read_queue_ and readers_stop_ (read_mu_), ready_ and results_push_
// (results_mu_).
#include "daemon/server/server_impl.h"

namespace htam::server {

void Server::RunRead(const Peer& peer, uint64_t request_id, std::function<std::string()> work) {
  // The reader thread logs with this request's ids; a failure is an error reply, never the end
  // of a reader thread.
  work = [fields = LogScope::Current(), work = std::move(work), request_id] {
    LogScope scope(fields);
    try {
      return work();
    } catch (const std::exception& e) {
      HTAM_LOG(kError, kComponent) << "read request " << request_id << " failed: " << e.what();
      return EncodeError(request_id, fb::ErrorCode::Internal,
                         std::string("internal error while reading the memory: ") + e.what());
    }
  };
  if (readers_.empty()) return Reply(peer, work());
  {
    MutexLock lock(&read_mu_);
    read_queue_.emplace_back(peer, std::move(work));
  }
  read_cv_.Signal();
}

void Server::ReaderLoop() {
  while (true) {
    std::pair<Peer, std::function<std::string()>> item;
    {
      MutexLock lock(&read_mu_);
      while (!readers_stop_ && read_queue_.empty()) read_cv_.Wait(&read_mu_);
      if (read_queue_.empty()) return;  // stopping, nothing left
      item = std::move(read_queue_.front());
      read_queue_.pop_front();
    }
    std::string reply = item.second();
    MutexLock lock(&results_mu_);
    ready_.emplace_back(std::move(item.first), std::move(reply));
    if (results_push_) {
      try {
        results_push_->send(zmq::str_buffer("q"), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
      }
    }
  }
}

void Server::SendReadyReplies() {
  std::deque<std::pair<Peer, std::string>> ready;
  {
    MutexLock lock(&results_mu_);
    ready.swap(ready_);
  }
  for (auto& [peer, payload] : ready) Reply(peer, payload);
}

}  // namespace htam::server
