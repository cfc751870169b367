// Reader threads: memory reads (NextStep, Query) run off the poll loop; their replies go back to
// the loop, which alone sends on the front socket. A NextStep that finds no read queued or running
// and no other request waiting is answered on the loop itself (server.inline_next_step): the
// hand-off costs more than it.
// Thread-safety: RunRead and SendReadyReplies run on the loop thread, ReaderLoop on the reader
// threads; they share read_queues_, read_order_ and readers_stop_ (read_mu_), ready_ and results_push_
// (results_mu_).
#include "daemon/server/server_impl.h"

namespace htam::server {

void Server::RunRead(const Peer& peer, uint64_t request_id, std::function<std::string()> work,
                     bool inline_ok) {
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
  // Only when no other request waits on the front socket either: under load (a flood, many
  // clients) reads keep going to the reader threads, round-robin by client, with the per-client
  // bounds and Busy as documented.
  if (inline_ok && options_.inline_next_step && front_ &&
      !(front_->get(zmq::sockopt::events) & ZMQ_POLLIN)) {
    // Nothing queued or running: no reply can overtake an earlier one, and the hand-off to a
    // reader thread and back (two wake-ups) would cost more than a decision.
    bool idle;
    {
      MutexLock lock(&read_mu_);
      idle = read_order_.empty() && reads_running_ == 0;
    }
    if (idle) {
      SendReadyReplies();  // earlier replies first
      return Reply(peer, work());
    }
  }
  {
    MutexLock lock(&read_mu_);
    auto& queue = read_queues_[peer.identity];
    if (queue.empty()) read_order_.push_back(peer.identity);
    queue.emplace_back(peer, std::move(work));
  }
  read_cv_.Signal();
}

void Server::ReaderLoop() {
  while (true) {
    ReadItem item;
    {
      MutexLock lock(&read_mu_);
      while (!readers_stop_ && read_order_.empty()) read_cv_.Wait(&read_mu_);
      if (read_order_.empty()) return;  // stopping, nothing left
      // The next client in turn gives one read and goes to the back of the line.
      std::string identity = std::move(read_order_.front());
      read_order_.pop_front();
      auto q = read_queues_.find(identity);
      item = std::move(q->second.front());
      q->second.pop_front();
      if (q->second.empty())
        read_queues_.erase(q);
      else
        read_order_.push_back(std::move(identity));
      ++reads_running_;
    }
    std::string reply = item.second();
    {
      MutexLock lock(&results_mu_);
      ready_.emplace_back(std::move(item.first), std::move(reply));
      if (results_push_) {
        try {
          results_push_->send(zmq::str_buffer("q"), zmq::send_flags::dontwait);
        } catch (const zmq::error_t&) {
        }
      }
    }
    // Counted down only once the reply is queued: the loop never sees "idle" while a reply is
    // still on its way to ready_.
    MutexLock lock(&read_mu_);
    --reads_running_;
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
