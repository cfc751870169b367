// Replies a client has not read: at most server.send_hwm of them in ZeroMQ, then an outbox per
// client bounded in bytes (server.client_max_unread_bytes), oldest dropped past it.
// Thread-safety: loop thread only (the front socket and the client table are the loop's).
#include "daemon/server/server_impl.h"

namespace htam::server {

bool Server::SendFrames(const std::string& identity, bool delimiter, const std::string& payload) {
  // The routing frame is where a full pipe shows (EAGAIN: nothing sent); the message's other
  // frames then always go with it.
  if (!front_->send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
    return false;
  if (delimiter)
    front_->send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  front_->send(zmq::buffer(payload), zmq::send_flags::dontwait);
  return true;
}

void Server::HoldUnread(const std::string& identity, bool delimiter, std::string payload) {
  auto it = clients_.find(identity);
  if (it == clients_.end()) {  // a forgotten client: nothing to hold it for
    dropped_total_++;
    return;
  }
  ClientInfo& c = it->second;
  // A held reply costs its bytes and its entry (small replies, such as Busy, are mostly entry).
  const size_t bytes = payload.size() + ClientInfo::kHeldReplyOverhead;
  uint64_t dropped = 0;
  while (!c.outbox.empty() && c.outbox_bytes + bytes > options_.client_max_unread_bytes) {
    c.outbox_bytes -= c.outbox.front().second.size() + ClientInfo::kHeldReplyOverhead;
    c.outbox.pop_front();
    dropped++;
  }
  if (c.outbox_bytes + bytes > options_.client_max_unread_bytes) {
    dropped++;  // larger than the whole bound on its own
  } else {
    c.outbox.emplace_back(delimiter, std::move(payload));
    c.outbox_bytes += bytes;
    outboxed_.insert(identity);
  }
  if (dropped == 0) return;
  // Logged at the 1st, 10th, 100th ... drop of a client: a reader that stopped reading shows
  // once, not once per reply.
  for (uint64_t k = 0; k < dropped; ++k) {
    c.unread_dropped++;
    unread_dropped_total_++;
    uint64_t n = c.unread_dropped;
    while (n % 10 == 0) n /= 10;
    if (n == 1)
      HTAM_LOG(kWarn, kComponent) << "client " << PeerName(identity) << " does not read its "
                                  << "replies: " << c.unread_dropped << " dropped so far ("
                                  << c.outbox_bytes << " bytes held; server.send_hwm "
                                  << options_.send_hwm << ", server.client_max_unread_bytes "
                                  << options_.client_max_unread_bytes << ")";
  }
}

void Server::FlushOutboxes() {
  for (auto id = outboxed_.begin(); id != outboxed_.end();) {
    auto it = clients_.find(*id);
    if (it != clients_.end()) {
      ClientInfo& c = it->second;
      try {
        while (!c.outbox.empty() &&
               SendFrames(*id, c.outbox.front().first, c.outbox.front().second)) {
          c.outbox_bytes -= c.outbox.front().second.size() + ClientInfo::kHeldReplyOverhead;
          c.outbox.pop_front();
        }
      } catch (const zmq::error_t&) {  // the client is gone: its held replies with it
        dropped_total_ += c.outbox.size();
        c.outbox.clear();
        c.outbox_bytes = 0;
      }
      if (!c.outbox.empty()) {
        ++id;
        continue;
      }
    }
    id = outboxed_.erase(id);
  }
}

}  // namespace htam::server
