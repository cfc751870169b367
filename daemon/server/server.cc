// The htamd poll loop: the front ROUTER socket, reading and checking requests, dispatch to the
// handlers (handlers.cc), replies, and the periodic tick (waiter and client expiry). See server.h
// for the threading model and docs/protocol.md for the messages.
// Thread-safety: everything here runs on the loop thread (Start, Run), except the destructor,
// which stops the reader threads first.
#include <malloc.h>

#include "base/endpoint.h"
#include "daemon/config/sections.h"
#include "daemon/server/server_impl.h"

namespace htam::server {

namespace {
constexpr const char* kResultsEndpoint = "inproc://htamd-results";
constexpr const char* kMonitorEndpoint = "inproc://htamd-front-monitor";
}  // namespace

ServerOptions ServerOptions::FromConfig(const Config& c) {
  const config::Server s = config::Server::From(c);
  ServerOptions o;
  o.bind = s.bind;
  o.allow_insecure_bind = s.allow_insecure_bind;
  o.curve = s.curve;
  o.curve_secret_key_file = s.curve_secret_key_file;
  o.curve_authorized_keys = s.curve_authorized_keys;
  o.tasks_dir = ShippedPath(s.tasks_dir, "tasks");
  o.limits.max_message_bytes = static_cast<size_t>(s.max_message_bytes);
  o.limits.max_source_bytes = static_cast<size_t>(s.max_source_bytes);
  o.max_frames = static_cast<int>(s.max_frames);
  o.poll_interval_ms = static_cast<int>(s.poll_interval_ms);
  o.client_expiry_s = static_cast<int>(s.client_expiry_s);
  o.max_wait_ms = static_cast<int>(s.max_wait_ms);
  o.max_pending_jobs = static_cast<int>(s.max_pending_jobs);
  o.result_retention = static_cast<int>(s.result_retention);
  o.query_limit_max = static_cast<int>(s.query_limit_max);
  o.reply_max_bytes = static_cast<size_t>(std::max<int64_t>(s.reply_max_bytes, 4096));
  o.client_max_in_flight = static_cast<int>(std::max<int64_t>(s.client_max_in_flight, 1));
  o.client_max_queued_bytes = static_cast<size_t>(std::max<int64_t>(s.client_max_queued_bytes, 1));
  o.busy_retry_ms = static_cast<int>(s.busy_retry_ms);
  o.max_speedup = config::Memory::From(c).max_speedup;  // one ceiling, the memory's
  o.others_read = s.others_read;
  o.auth_log_interval_s = static_cast<int>(s.auth_log_interval_s);
  o.owners_without_curve = s.owners_without_curve;
  o.data_dir = config::General::From(c).data_dir;
  o.send_hwm = static_cast<int>(std::max<int64_t>(s.send_hwm, 1));
  o.client_max_unread_bytes = static_cast<size_t>(std::max<int64_t>(s.client_max_unread_bytes, 0));
  o.recv_hwm = static_cast<int>(s.recv_hwm);
  o.max_clients = static_cast<int>(s.max_clients);
  o.batch_max = static_cast<int>(s.batch_max);
  o.shutdown_grace_ms = static_cast<int>(s.shutdown_grace_ms);
  o.read_threads = static_cast<int>(s.read_threads);
  o.inline_next_step = s.inline_next_step;
  return o;
}

Server::Server(ServerOptions options, Services services)
    : options_(std::move(options)), services_(services), context_(1) {}

Server::~Server() {
  {
    MutexLock lock(&read_mu_);
    readers_stop_ = true;
  }
  read_cv_.SignalAll();
  for (auto& t : readers_)
    if (t.joinable()) t.join();
  monitor_.reset();
  front_.reset();
  results_pull_.reset();
  {
    MutexLock lock(&results_mu_);
    results_push_.reset();
  }
  if (zap_) zap_->Stop();
  zap_.reset();
}

Status Server::Start() {
  started_ms_ = NowMs();
  job_counter_ = static_cast<uint64_t>(WallMs()) << 12;
  if (options_.others_read != "none" && options_.others_read != "records" &&
      options_.others_read != "all")
    return Status::InvalidArgument("server.others_read is '" + options_.others_read +
                                   "': none, records or all");
  enforce_owners_ = options_.curve || options_.owners_without_curve;
  if (!options_.curve && !IsLocalEndpoint(options_.bind)) {
    if (!options_.allow_insecure_bind)
      return Status::FailedPrecondition(
          "refusing to bind " + options_.bind +
          " without CURVE: anyone who can reach it could read and write the memory. Enable "
          "server.curve (see docs/operations.md) or set server.allow_insecure_bind = true");
    HTAM_LOG(kWarn, kComponent) << "binding non-loopback " << options_.bind
                                << " WITHOUT authentication (server.allow_insecure_bind)";
  }
  try {
    front_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::router);
    front_->set(zmq::sockopt::linger, 0);
    // A client that does not read its replies holds at most send_hwm of them in ZeroMQ (a full
    // pipe is EAGAIN, not a silent drop, with ROUTER_MANDATORY); the rest wait in its outbox,
    // bounded in bytes (HoldUnread).
    front_->set(zmq::sockopt::sndhwm, options_.send_hwm);
    front_->set(zmq::sockopt::rcvhwm, options_.recv_hwm);
    front_->set(zmq::sockopt::router_mandatory, true);
    // ZeroMQ itself cuts off a peer sending frames far over the limit (no reply possible); those
    // a little over it get an Error from the codec.
    front_->set(zmq::sockopt::maxmsgsize,
                static_cast<int64_t>(options_.limits.max_message_bytes) * 2 + 4096);
    if (options_.curve) {
      if (options_.curve_secret_key_file.empty() || options_.curve_authorized_keys.empty())
        return Status::InvalidArgument(
            "server.curve needs server.curve_secret_key_file and server.curve_authorized_keys");
      HTAM_ASSIGN_OR_RETURN(auth::KeyPair keys, auth::ReadKeyFile(options_.curve_secret_key_file));
      if (keys.secret_key.empty())
        return Status::InvalidArgument(options_.curve_secret_key_file + " holds no secret key");
      HTAM_ASSIGN_OR_RETURN(roles_, auth::LoadAuthorizedKeyRoles(options_.curve_authorized_keys));
      std::set<std::string> allowed;
      for (auto& [key, role] : roles_) allowed.insert(key);
      HTAM_LOG(kInfo, "auth") << "CURVE on: " << allowed.size() << " authorized client key(s) from "
                              << options_.curve_authorized_keys;
      zap_ = std::make_unique<auth::ZapHandler>(&context_, std::move(allowed));
      HTAM_RETURN_IF_ERROR(zap_->Start());
      front_->set(zmq::sockopt::curve_server, true);
      front_->set(zmq::sockopt::curve_secretkey, keys.secret_key);
      front_->set(zmq::sockopt::zap_domain, "htam");
    }
    // Every refused handshake (a NULL client at a CURVE server, a wrong server key, garbage
    // bytes, an unknown client key) reaches the loop through the socket monitor.
    if (zmq_socket_monitor(static_cast<void*>(*front_), kMonitorEndpoint,
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) == 0) {
      monitor_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pair);
      monitor_->set(zmq::sockopt::linger, 0);
      monitor_->connect(kMonitorEndpoint);
    }
    bool ipv6 = false;
    const std::string bind = BindableEndpoint(options_.bind, &ipv6);
    if (ipv6) front_->set(zmq::sockopt::ipv6, true);
    front_->bind(bind);
    endpoint_ = front_->get(zmq::sockopt::last_endpoint);
    results_pull_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pull);
    results_pull_->set(zmq::sockopt::linger, 0);
    results_pull_->bind(kResultsEndpoint);
    {
      MutexLock lock(&results_mu_);  // no other thread yet; taken for the analysis's sake
      results_push_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::push);
      results_push_->set(zmq::sockopt::linger, 0);
      results_push_->connect(kResultsEndpoint);
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot bind " + options_.bind + ": " + e.what());
  }
  for (int i = 0; i < options_.read_threads; ++i) readers_.emplace_back([this] { ReaderLoop(); });
  HTAM_LOG(kInfo, kComponent) << "listening on " << endpoint_ << (options_.curve ? " (CURVE)" : "")
                              << ", " << options_.read_threads << " reader thread(s)";
  return Status::OK();
}

Status Server::Run() {
  ResumeJobs();
  int64_t last_tick = NowMs();
  int64_t stop_deadline = 0;
  while (true) {
    const bool stopping = stop_.load() || (external_stop_ && external_stop_->load());
    if (stopping && stop_deadline == 0) {
      stop_deadline = NowMs() + options_.shutdown_grace_ms;
      HTAM_LOG(kInfo, kComponent) << "stopping: " << jobs_.size()
                                  << " evaluation(s) in flight, waiting up to "
                                  << options_.shutdown_grace_ms << " ms";
    }
    if (stop_deadline != 0 && (jobs_.empty() || NowMs() >= stop_deadline)) break;
    zmq::pollitem_t items[] = {
        {static_cast<void*>(*front_), 0, ZMQ_POLLIN, 0},
        {static_cast<void*>(*results_pull_), 0, ZMQ_POLLIN, 0},
        {monitor_ ? static_cast<void*>(*monitor_) : nullptr, 0, ZMQ_POLLIN, 0}};
    FlushOutboxes();
    // ZeroMQ does not say when a client's full pipe drains: while replies are held, the loop
    // looks again every millisecond instead of every poll_interval_ms.
    const int wait_ms =
        outboxed_.empty() ? options_.poll_interval_ms : std::min(options_.poll_interval_ms, 1);
    try {
      zmq::poll(items, monitor_ ? 3 : 2, std::chrono::milliseconds(wait_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;  // a signal: the flag is checked above
      return Status::Internal(std::string("poll: ") + e.what());
    }
    if (items[1].revents & ZMQ_POLLIN) DrainResults();
    if (monitor_ && (items[2].revents & ZMQ_POLLIN)) DrainMonitor();
    // While stopping, requests are no longer read: clients see a timeout and retry elsewhere.
    if ((items[0].revents & ZMQ_POLLIN) && stop_deadline == 0) {
      for (int n = 0; n < options_.batch_max; ++n) {
        std::vector<zmq::message_t> parts;
        try {
          zmq::message_t part;
          if (!front_->recv(part, zmq::recv_flags::dontwait)) break;
          bool more = part.more();
          parts.push_back(std::move(part));
          // Read every frame of the message, but keep at most max_frames + 1 of them.
          while (more) {
            zmq::message_t next;
            (void)front_->recv(next, zmq::recv_flags::none);
            more = next.more();
            if (static_cast<int>(parts.size()) <= options_.max_frames)
              parts.push_back(std::move(next));
            else
              parts.back() = zmq::message_t();  // too many frames: marked below
          }
        } catch (const zmq::error_t& e) {
          HTAM_LOG(kWarn, kComponent) << "receive: " << e.what();
          break;
        }
        HandleFront(parts);
        // Answers the readers finished go out during a long batch too, not only after it.
        if ((n & 3) == 3) SendReadyReplies();
      }
    }
    FlushWrites();
    if (NowMs() - last_tick >= options_.poll_interval_ms) {
      Tick();
      last_tick = NowMs();
    }
  }
  {
    MutexLock lock(&read_mu_);
    readers_stop_ = true;
  }
  read_cv_.SignalAll();
  for (auto& t : readers_)
    if (t.joinable()) t.join();
  readers_.clear();
  DrainResults();
  FlushWrites();
  if (!jobs_.empty()) {
    HTAM_LOG(kWarn, kComponent) << jobs_.size()
                                << " evaluation(s) unfinished at shutdown were not recorded (with "
                                   "worker.durable_queue they run again at the next start)";
  }
  HTAM_LOG(kInfo, kComponent) << "stopped after " << requests_total_ << " requests";
  return Status::OK();
}

void Server::Reply(const Peer& peer, const std::string& payload_in, ReplyKind kind) {
  // No reply exceeds the budget, whatever built it: an oversized one becomes an error naming it.
  std::string oversized;
  if (payload_in.size() > options_.reply_max_bytes) {
    const uint64_t rid = fb::GetEnvelope(payload_in.data())->request_id();
    HTAM_LOG(kWarn, kComponent) << "reply of " << payload_in.size() << " bytes to "
                                << PeerName(peer.identity) << " exceeds server.reply_max_bytes";
    oversized = EncodeError(rid, fb::ErrorCode::Internal,
                            "the reply (" + std::to_string(payload_in.size()) +
                                " bytes) exceeds server.reply_max_bytes (" +
                                std::to_string(options_.reply_max_bytes) + ")");
    kind = ReplyKind::kError;
  }
  const std::string& payload = oversized.empty() ? payload_in : oversized;
  if (peer.held_bytes != 0 && kind != ReplyKind::kProgress) {
    auto c = clients_.find(peer.identity);
    if (c != clients_.end()) {
      c->second.in_flight = std::max(0, c->second.in_flight - 1);
      c->second.queued_bytes -= std::min(c->second.queued_bytes, peer.held_bytes);
    }
  }
  if (services_.metrics && peer.received_us != 0 && kind != ReplyKind::kProgress) {
    // Replies built on reader threads (NextStep, Query) may be errors too: our own encoding,
    // so reading its body type is safe.
    if (kind == ReplyKind::kFinal && !payload.empty() &&
        fb::GetEnvelope(payload.data())->body_type() == fb::Body::Error)
      kind = ReplyKind::kError;
    const char* type =
        peer.kind == 0 ? "Invalid" : fb::EnumNameBody(static_cast<fb::Body>(peer.kind));
    services_.metrics->ObserveRequest(type, (NowUs() - peer.received_us) / 1e6,
                                      kind == ReplyKind::kError);
  }
  try {
    // Replies keep their order: behind held ones, a reply is held too.
    if (!outboxed_.count(peer.identity) && SendFrames(peer.identity, peer.delimiter, payload))
      return;
    HoldUnread(peer.identity, peer.delimiter, payload);
  } catch (const zmq::error_t& e) {
    dropped_total_++;
    HTAM_LOG(kDebug, kComponent) << "reply to " << PeerName(peer.identity)
                                 << " dropped: " << e.what();
  }
}

void Server::ReplyError(const Peer& peer, uint64_t request_id, fb::ErrorCode code,
                        std::string_view msg) {
  errors_total_++;
  auto it = clients_.find(peer.identity);
  if (it != clients_.end()) it->second.errors++;
  Reply(peer, EncodeError(request_id, code, msg), ReplyKind::kError);
}

void Server::ReplyStatus(const Peer& peer, uint64_t request_id, const Status& st) {
  ReplyError(peer, request_id, ErrorCodeFor(st), st.message());
}

void Server::HandleFront(std::vector<zmq::message_t>& parts) {
  if (parts.empty()) return;
  Peer peer;
  peer.identity = parts[0].to_string();
  peer.received_us = NowUs();
  if (parts.size() < 2) {  // no payload frame: nothing to answer
    dropped_total_++;
    return;
  }
  const int64_t now = NowMs();
  auto it = clients_.find(peer.identity);
  if (it == clients_.end()) {
    if (static_cast<int>(clients_.size()) >= options_.max_clients) {
      auto oldest = std::min_element(clients_.begin(), clients_.end(), [](auto& a, auto& b) {
        return a.second.last_seen_ms < b.second.last_seen_ms;
      });
      clients_.erase(oldest);
    }
    it = clients_.emplace(peer.identity, ClientInfo{}).first;
    it->second.first_seen_ms = now;
    const char* user = nullptr;
    try {
      user = parts.back().gets("User-Id");
    } catch (const zmq::error_t&) {
    }
    if (user) it->second.user = user;
  }
  ClientInfo* client = &it->second;
  client->last_seen_ms = now;
  if (options_.curve) {
    peer.owner = "key:" + client->user;
    auto role = roles_.find(client->user);
    peer.role = role != roles_.end() ? role->second : "read";
  } else {
    peer.owner = client->secret_owner.empty() ? "conn:" + HexId(peer.identity)
                                               : client->secret_owner;
    peer.role = options_.owners_without_curve ? "agent" : "admin";
  }
  client->requests++;
  requests_total_++;

  zmq::message_t& payload = parts.back();
  if (static_cast<int>(parts.size()) > options_.max_frames ||
      (parts.size() == 3 && parts[1].size() != 0) || parts.size() > 3) {
    malformed_total_++;
    ReplyError(peer, 0, fb::ErrorCode::Malformed,
               "expected one envelope frame (optionally after an empty delimiter)");
    return;
  }
  peer.delimiter = parts.size() == 3;
  thread_local AlignedFrame frame;
  frame.Assign(payload.data(), payload.size());
  // One client's flood is refused at its own bound, before it costs anyone else a queue slot
  // (and before the full check of its frame: a refusal costs the loop little).
  if (client->in_flight >= options_.client_max_in_flight ||
      client->queued_bytes + payload.size() > options_.client_max_queued_bytes) {
    busy_total_++;
    client->busy++;
    errors_total_++;
    client->errors++;
    Reply(peer,
          EncodeError(PeekRequestId(frame), fb::ErrorCode::Busy,
                      "busy: " + std::to_string(client->in_flight) +
                          " request(s) of this client in flight (server.client_max_in_flight " +
                          std::to_string(options_.client_max_in_flight) +
                          ", server.client_max_queued_bytes " +
                          std::to_string(options_.client_max_queued_bytes) + ")",
                      static_cast<uint32_t>(options_.busy_retry_ms)),
          ReplyKind::kError);
    return;
  }
  Decoded d = DecodeRequest(frame, options_.limits);
  if (!d.ok) {
    if (d.error == fb::ErrorCode::Malformed) malformed_total_++;
    HTAM_LOG(kDebug, kComponent) << "bad message from " << PeerName(peer.identity) << ": "
                                 << d.message;
    ReplyError(peer, d.request_id, d.error, d.message);
    return;
  }
  peer.kind = static_cast<int>(d.envelope->body_type());
  peer.held_bytes = std::max<size_t>(payload.size(), 1);
  client->in_flight++;
  client->queued_bytes += peer.held_bytes;
  // No failure of one request may end the loop that serves everyone: it becomes an error reply
  // and a log line.
  try {
    Dispatch(peer, *d.envelope, client);
  } catch (const std::exception& e) {
    HTAM_LOG(kError, kComponent) << "request " << d.request_id << " from "
                                 << PeerName(peer.identity) << " failed: " << e.what();
    ReplyError(peer, d.request_id, fb::ErrorCode::Internal,
               std::string("internal error while handling the request: ") + e.what());
  }
}

void Server::Dispatch(const Peer& peer, const fb::Envelope& env, ClientInfo* client) {
  const uint64_t rid = env.request_id();
  // Log lines of this request carry its ids (general.log_format = json).
  uint64_t session_id = 0, job_id = 0;
  switch (env.body_type()) {
    case fb::Body::OpenSession: session_id = env.body_as_OpenSession()->session_id(); break;
    case fb::Body::NextStep: session_id = env.body_as_NextStep()->session_id(); break;
    case fb::Body::Submit: session_id = env.body_as_Submit()->session_id(); break;
    case fb::Body::Record: session_id = env.body_as_Record()->session_id(); break;
    case fb::Body::CloseSession: session_id = env.body_as_CloseSession()->session_id(); break;
    case fb::Body::Poll: job_id = env.body_as_Poll()->job_id(); break;
    default: break;
  }
  LogScope log_request("request_id", rid), log_session("session_id", session_id),
      log_job("job_id", job_id);
  // Keep each client's requests in order: its earlier writes commit before it reads.
  if (env.body_type() != fb::Body::Record && peers_with_writes_.count(peer.identity)) FlushWrites();
  switch (env.body_type()) {
    case fb::Body::Hello: return OnHello(peer, rid, *env.body_as_Hello(), client);
    case fb::Body::OpenSession: return OnOpenSession(peer, rid, *env.body_as_OpenSession());
    case fb::Body::NextStep: return OnNextStep(peer, rid, *env.body_as_NextStep());
    case fb::Body::Submit: return OnSubmit(peer, rid, *env.body_as_Submit());
    case fb::Body::Poll: return OnPoll(peer, rid, *env.body_as_Poll());
    case fb::Body::Record: return OnRecord(peer, rid, *env.body_as_Record());
    case fb::Body::CloseSession: return OnCloseSession(peer, rid, *env.body_as_CloseSession());
    case fb::Body::Query: return OnQuery(peer, rid, *env.body_as_Query());
    case fb::Body::StatusRequest: return OnStatus(peer, rid, *env.body_as_StatusRequest());
    default: return ReplyError(peer, rid, fb::ErrorCode::UnknownMessage, "not a request");
  }
}

void Server::DrainMonitor() {
  const int64_t now = NowMs();
  while (true) {
    zmq::message_t event, address;
    try {
      if (!monitor_->recv(event, zmq::recv_flags::dontwait)) break;
      if (event.more()) (void)monitor_->recv(address, zmq::recv_flags::none);
    } catch (const zmq::error_t&) {
      break;
    }
    if (event.size() < 6) continue;
    uint16_t id = 0;
    uint32_t value = 0;
    std::memcpy(&id, event.data(), 2);
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
    std::string reason;
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      reason = "auth";  // CURVE key not authorized (ZAP said no)
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
      reason = value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH ? "mechanism"  // e.g. NULL
               : value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC    ? "crypto"  // wrong server key
                                                                   : "protocol";
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      reason = "no_detail";  // garbage bytes, a connection cut during the handshake
    } else {
      continue;
    }
    Refusals& r = refused_handshakes_[reason];
    r.total++;
    r.unlogged++;
    if (r.total == 1 ||
        now - r.last_log_ms >= static_cast<int64_t>(options_.auth_log_interval_s) * 1000) {
      HTAM_LOG(kWarn, "auth") << "refused handshake on " << endpoint_ << ": " << reason << " ("
                              << r.unlogged << " since the last such line, " << r.total
                              << " in all; at most one line per " << options_.auth_log_interval_s
                              << " s)";
      r.unlogged = 0;
      r.last_log_ms = now;
    }
  }
}

void Server::Tick() {
  DrainResults();  // in case a wake-up message was lost
  if (services_.metrics) {
    services_.metrics->SetGauge("htam_evaluation_queue_depth", static_cast<double>(jobs_.size()),
                                "Evaluations accepted and not finished (queued or running).");
    services_.metrics->SetGauge("htam_clients", static_cast<double>(clients_.size()),
                                "Clients known to htamd (silent ones expire).");
    for (const auto& [reason, r] : refused_handshakes_)
      services_.metrics->SetCounter("htam_refused_handshakes_" + reason + "_total",
                                  static_cast<double>(r.total),
                                  "Handshakes refused since start for this reason (auth: unknown "
                                  "client key; mechanism: e.g. a NULL client at a CURVE server; "
                                  "crypto: wrong server key; protocol, no_detail: garbage).");
    services_.metrics->SetCounter("htam_busy_refusals_total", static_cast<double>(busy_total_),
                                "Requests refused Busy since start: their client was over "
                                "server.client_max_in_flight or server.client_max_queued_bytes.");
    services_.metrics->SetCounter("htam_unread_replies_dropped_total",
                                  static_cast<double>(unread_dropped_total_),
                                  "Replies dropped since start because their client did not read "
                                  "them: over server.send_hwm replies in ZeroMQ and "
                                  "server.client_max_unread_bytes held in htamd.");
  }
  const int64_t now = NowMs();
  for (auto& [id, job] : jobs_) {
    auto expired = std::partition(job.waiters.begin(), job.waiters.end(), [now](const Waiter& w) {
      return w.deadline_ms == 0 || w.deadline_ms > now;
    });
    for (auto it = expired; it != job.waiters.end(); ++it) {
      fb::ResultT r;
      r.job_id = id;
      r.session_id = job.session_id;
      r.done = false;
      Reply(it->peer, EncodeReply(it->request_id, std::move(r)));
    }
    job.waiters.erase(expired, job.waiters.end());
  }
  // Memory a burst freed (a flood's queued frames and replies) goes back to the system rather
  // than staying in the allocator's free lists; once per 100 ticks (10 s by default).
  if (now - last_trim_ms_ >= 100LL * options_.poll_interval_ms) {
    ::malloc_trim(0);
    last_trim_ms_ = now;
  }
  const int64_t expiry = static_cast<int64_t>(options_.client_expiry_s) * 1000;
  std::erase_if(clients_, [&](const auto& kv) { return now - kv.second.last_seen_ms > expiry; });
}

}  // namespace htam::server
