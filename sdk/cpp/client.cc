// htam_client: the C++ SDK. Two paths to the daemon:
//  - direct (synchronous calls): the calling thread checks a DEALER socket out of the Client's
//    pool, sends, and waits for the reply with the request's id on that socket itself; no other
//    thread of the Client is involved. A socket whose request timed out is closed, not returned
//    to the pool (lazy pirate: its late reply must never answer a later request).
//  - the I/O thread (asynchronous calls, Submit with progress events, and synchronous calls while
//    a write sent through the I/O thread is unanswered): it owns one DEALER socket; callers hand
//    requests over a mutex-guarded outbox and an inproc wake-up socket, and get replies through
//    callbacks/futures.
#include "htam/client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "base/clock.h"
#include "flatbuffers/flatbuffers.h"

namespace htam {

namespace {

bool Idempotent(fb::Body type, const fb::BodyUnion& body) {
  switch (type) {
    case fb::Body::Hello:
    case fb::Body::NextStep:
    case fb::Body::Poll:
    case fb::Body::Query:
    case fb::Body::StatusRequest: return true;
    case fb::Body::OpenSession: return body.AsOpenSession()->session_id != 0;
    default: return false;
  }
}

// Reads "public = KEY" / "secret = KEY" lines of an htam-keygen file.
Status ReadKeys(const std::string& path, std::string* pub, std::string* sec) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot read key file " + path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    auto trim = [](std::string s) {
      size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    name = trim(name);
    value = trim(value);
    if (name == "public" && pub) *pub = value;
    if (name == "secret" && sec) *sec = value;
  }
  return Status::OK();
}

// The ZeroMQ context of this process's Clients: one I/O thread serves all their connections (it
// handles whatever is ready at each wake-up, instead of one sleeping thread per Client). It ends
// with the last Client. A child process after fork() gets its own (the parent's I/O thread does
// not exist there; the inherited context is left alone, never terminated by the child).
std::shared_ptr<zmq::context_t> SharedContext() {
  static auto* mu = new std::mutex;
  static auto* shared = new std::weak_ptr<zmq::context_t>;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(*mu);
  std::shared_ptr<zmq::context_t> ctx = shared->lock();
  if (ctx && owner != getpid()) {
    new std::shared_ptr<zmq::context_t>(std::move(ctx));  // the parent's: never released here
    ctx.reset();
  }
  if (!ctx) {
    ctx = std::make_shared<zmq::context_t>(1);
    // The Clients share the context's socket limit (default 1023); raise it to what ZeroMQ
    // allows, as each Client had its own limit before they shared.
    try {
      ctx->set(zmq::ctxopt::max_sockets, ctx->get(zmq::ctxopt::socket_limit));
    } catch (const zmq::error_t&) {
    }
    *shared = ctx;
    owner = getpid();
  }
  return ctx;
}

}  // namespace

Status StatusFromError(const fb::ErrorT& e) {
  std::string m = std::string(fb::EnumNameErrorCode(e.code)) + ": " + e.message;
  switch (e.code) {
    case fb::ErrorCode::NotFound: return Status::NotFound(e.message);
    case fb::ErrorCode::InvalidArgument: return Status::InvalidArgument(e.message);
    case fb::ErrorCode::Busy:
      return Status::ResourceExhausted(
          e.retry_after_ms ? e.message + " (retry after " + std::to_string(e.retry_after_ms) + " ms)"
                           : e.message);
    case fb::ErrorCode::DiskFull:
    case fb::ErrorCode::MapFull: return Status::ResourceExhausted(m);
    case fb::ErrorCode::IoError: return Status::IOError(m);
    case fb::ErrorCode::Unauthorized: return Status::PermissionDenied(e.message);
    case fb::ErrorCode::Unavailable: return Status::Unavailable(e.message);
    case fb::ErrorCode::Malformed:
    case fb::ErrorCode::UnsupportedVersion:
    case fb::ErrorCode::UnknownMessage: return Status::InvalidArgument(m);
    default: return Status::Internal(m);
  }
}

// HTAM_IDENTITY_SECRET (hex, 16 to 64 bytes) into *out; nothing where it is unset.
static Status IdentityFromEnvironment(std::string* out) {
  const char* text = std::getenv("HTAM_IDENTITY_SECRET");
  if (!text || !*text) return Status::OK();
  const std::string hex(text);
  auto nibble = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0 || hex.size() < 32 || hex.size() > 128)
    return Status::InvalidArgument("HTAM_IDENTITY_SECRET must be 32 to 128 hex digits");
  std::string bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return Status::InvalidArgument("HTAM_IDENTITY_SECRET is not hexadecimal");
    bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  *out = std::move(bytes);
  return Status::OK();
}

class Client::Impl {
 public:
  explicit Impl(ClientOptions options) : opt_(std::move(options)), context_(SharedContext()) {}

  // The Hello of every connection: names the client and, without CURVE, its identity.
  fb::HelloT MakeHello() const {
    fb::HelloT hello;
    hello.client = opt_.client_name;
    hello.client_version = HTAM_VERSION;
    hello.identity_secret.assign(opt_.identity_secret.begin(), opt_.identity_secret.end());
    return hello;
  }

  ~Impl() { Shutdown(); }

  Status Start() {
    if (!opt_.server_public_key_file.empty()) {
      HTAM_RETURN_IF_ERROR(ReadKeys(opt_.server_public_key_file, &opt_.server_public_key, nullptr));
    }
    if (!opt_.client_key_file.empty()) {
      HTAM_RETURN_IF_ERROR(
          ReadKeys(opt_.client_key_file, &opt_.client_public_key, &opt_.client_secret_key));
    }
    bool any = !opt_.server_public_key.empty() || !opt_.client_public_key.empty() ||
               !opt_.client_secret_key.empty();
    bool all = !opt_.server_public_key.empty() && !opt_.client_public_key.empty() &&
               !opt_.client_secret_key.empty();
    if (any && !all)
      return Status::InvalidArgument(
          "CURVE needs the server public key and the client public and secret keys");
    if (opt_.identity_secret.empty())
      HTAM_RETURN_IF_ERROR(IdentityFromEnvironment(&opt_.identity_secret));
    if (opt_.identity_secret.empty()) {
      std::random_device rd;  // the kernel's random source
      for (int i = 0; i < 4; ++i) {
        uint32_t w = rd();
        opt_.identity_secret.append(reinterpret_cast<const char*>(&w), sizeof w);
      }
    } else if (opt_.identity_secret.size() < 16 || opt_.identity_secret.size() > 64) {
      return Status::InvalidArgument("identity_secret must be 16 to 64 bytes");
    }
    curve_ = all;
    try {
      static std::atomic<uint64_t> clients{0};
      std::ostringstream name;
      name << "inproc://htam-client-wake-" << ++clients;
      wake_recv_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::pair);
      wake_recv_->bind(name.str());
      wake_send_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::pair);
      wake_send_->connect(name.str());
      HTAM_RETURN_IF_ERROR(OpenSocket());
    } catch (const zmq::error_t& e) {
      return Status::InvalidArgument(std::string("cannot connect to ") + opt_.endpoint + ": " +
                                     e.what());
    }
    io_ = std::thread([this] { Loop(); });
    return Status::OK();
  }

  void Shutdown() {
    if (stop_.exchange(true)) return;
    Wake();
    if (io_.joinable()) io_.join();
    DropIdle();
    socket_.reset();
    wake_recv_.reset();
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake_send_.reset();
    }
  }

  void Send(fb::BodyUnion body, EnvelopeCallback done, std::chrono::milliseconds timeout) {
    Outgoing out;
    out.request_id = next_id_.fetch_add(1) + 1;
    fb::EnvelopeT env;
    env.version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
    env.request_id = out.request_id;
    out.idempotent = Idempotent(body.type, body);
    out.hello = body.type == fb::Body::Hello;
    env.body = std::move(body);
    flatbuffers::FlatBufferBuilder fbb(256);
    fbb.Finish(fb::Envelope::Pack(fbb, &env), fb::EnvelopeIdentifier());
    out.payload.assign(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
    out.timeout_ms = (timeout.count() > 0 ? timeout : opt_.timeout).count();
    out.done = std::move(done);
    in_flight_++;
    if (!out.idempotent) loop_writes_++;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        Finished(out);
        out.done(Status::Unavailable("client is shut down"));
        return;
      }
      outbox_.push_back(std::move(out));
    }
    Wake();
  }

  size_t in_flight() const { return in_flight_.load(); }
  const ClientOptions& options() const { return opt_; }
  fb::HelloReplyT hello_;

  // Whether a synchronous call with this body goes the direct way. Progress events need the I/O
  // thread (ClientOptions::on_progress runs there), and so does Poll with them; and while a
  // write sent through the I/O thread is unanswered, later requests follow it on the same
  // connection, so that the daemon commits the write before it serves them (it keeps each
  // connection's requests in order).
  bool Direct(const fb::BodyUnion& body) const {
    if (stop_ || loop_writes_.load() != 0) return false;
    if (body.type == fb::Body::Submit && body.AsSubmit()->progress) return false;
    // A job's Progress events arrive on the I/O thread's connection; its Poll follows them there,
    // so that on_progress has seen the job's "done" event when Poll returns the result.
    if (body.type == fb::Body::Poll && opt_.on_progress) return false;
    return true;
  }

  // A synchronous call on the calling thread (see the top of this file).
  template <typename T>
  Result<T> CallDirect(fb::BodyUnion body, std::chrono::milliseconds timeout) {
    const bool idempotent = Idempotent(body.type, body);
    const bool is_hello = body.type == fb::Body::Hello;
    const uint64_t request_id = next_id_.fetch_add(1) + 1;
    flatbuffers::FlatBufferBuilder fbb(256);
    {
      fb::EnvelopeT env;
      env.version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
      env.request_id = request_id;
      env.body = std::move(body);
      fbb.Finish(fb::Envelope::Pack(fbb, &env), fb::EnvelopeIdentifier());
    }
    const int64_t timeout_ms = (timeout.count() > 0 ? timeout : opt_.timeout).count();
    in_flight_++;
    struct Done {
      std::atomic<size_t>& n;
      ~Done() { n--; }
    } done{in_flight_};
    for (int tries = idempotent ? 1 + std::max(opt_.retries, 0) : 1; tries > 0; --tries) {
      auto socket = Checkout(!is_hello);
      if (!socket.ok()) return socket.status();
      zmq::socket_t& s = **socket;
      const int64_t deadline = NowMs() + timeout_ms;
      bool sent = false;
      try {
        sent = s.send(zmq::const_buffer(fbb.GetBufferPointer(), fbb.GetSize()),
                      zmq::send_flags::dontwait)
                   .has_value();
      } catch (const zmq::error_t&) {
      }
      // Not sent (cannot happen on a fresh socket's empty queue): like the I/O thread, let
      // the deadline retry or fail it.
      std::optional<Result<T>> reply;
      bool broken = false;
      if (sent)
        reply = Receive<T>(s, request_id, deadline, &broken);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      if (reply && !broken && !is_hello && UnknownSocket(reply->status())) {
        // The socket reconnected on its own (htamd restarted) and htamd no longer knows it as
        // this client: introduce it and ask once more (the refused request changed nothing).
        try {
          Announce(s);
          if (s.send(zmq::const_buffer(fbb.GetBufferPointer(), fbb.GetSize()),
                     zmq::send_flags::dontwait))
            reply = Receive<T>(s, request_id, deadline, &broken);
        } catch (const zmq::error_t&) {
        }
      }
      if (reply) {
        if (!broken) Checkin(std::move(*socket));
        return std::move(*reply);
      }
      // No answer by the deadline: this socket is closed with whatever may still arrive on it,
      // and so are the idle ones (they lead to the same daemon); the next try, or the next
      // call, connects afresh.
      socket->reset();
      DropIdle();
      if (stop_) break;
    }
    return Status::Timeout("no answer from " + opt_.endpoint + " within " +
                           std::to_string(timeout_ms) + " ms");
  }

 private:
  // The next reply to `request_id` on `s`, decoded; nullopt when the deadline passes first.
  // Anything else arriving there (the reply to the Hello that announced a fresh socket, a
  // message not from htamd) is skipped. A failing socket sets *broken (and gives Unavailable).
  template <typename T>
  std::optional<Result<T>> Receive(zmq::socket_t& s, uint64_t request_id, int64_t deadline,
                                   bool* broken) {
    using Table = typename T::TableType;
    while (true) {
      const int64_t left = deadline - NowMs();
      if (left <= 0) return std::nullopt;
      zmq::message_t m;
      try {
        s.set(zmq::sockopt::rcvtimeo, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
        if (!s.recv(m, zmq::recv_flags::none)) continue;  // EAGAIN: the deadline is checked
        while (m.more()) {  // one frame per envelope; skip anything else
          zmq::message_t extra;
          (void)s.recv(extra, zmq::recv_flags::none);
          m = std::move(extra);
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        *broken = true;
        return Result<T>(Status::Unavailable(std::string("client socket: ") + e.what()));
      }
      const fb::Envelope* env = VerifiedEnvelope(m);
      if (env == nullptr || env->request_id() != request_id ||
          env->body_type() == fb::Body::Progress)
        continue;
      if (const fb::Error* error = env->body_as_Error()) {
        fb::ErrorT e;
        error->UnPackTo(&e);
        return Result<T>(StatusFromError(e));
      }
      const Table* body = env->body_as<Table>();
      if (body == nullptr)
        return Result<T>(Status::Internal(std::string("unexpected reply ") +
                                          fb::EnumNameBody(env->body_type())));
      T out;
      body->UnPackTo(&out);
      return Result<T>(std::move(out));
    }
  }

  // The envelope in `m` when it is a valid htamd message, else nullptr. Reads `m` in place when
  // its bytes are 8-byte aligned (as FlatBuffers wants), else from an aligned thread-local copy.
  static const fb::Envelope* VerifiedEnvelope(const zmq::message_t& m) {
    thread_local std::vector<uint64_t> aligned;
    const uint8_t* buf = static_cast<const uint8_t*>(m.data());
    if (reinterpret_cast<uintptr_t>(buf) % alignof(uint64_t) != 0) {
      aligned.resize(m.size() / 8 + 2);
      std::memcpy(aligned.data(), m.data(), m.size());
      buf = reinterpret_cast<const uint8_t*>(aligned.data());
    }
    flatbuffers::Verifier verifier(buf, m.size(), 64, 10000000);
    if (!fb::VerifyEnvelopeBuffer(verifier)) return nullptr;
    return fb::GetEnvelope(buf);
  }

  // A refusal because the connection never sent its Hello (docs/protocol.md, Hello).
  static bool UnknownSocket(const Status& st) {
    return st.code() == Status::Code::kPermissionDenied &&
           st.message().find("sent no Hello") != std::string::npos;
  }

  // A socket of the pool, or a new one. A new one is announced with a Hello (unless the
  // request is one) so that the daemon's client list names every connection.
  Result<std::unique_ptr<zmq::socket_t>> Checkout(bool announce) {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (stop_) return Status::Unavailable("client is shut down");
      if (!idle_.empty()) {
        auto s = std::move(idle_.back());
        idle_.pop_back();
        return s;
      }
    }
    try {
      auto s = NewSocket();
      if (announce) Announce(*s);
      return s;
    } catch (const zmq::error_t& e) {
      return Status::Unavailable(std::string("cannot connect to ") + opt_.endpoint + ": " +
                                 e.what());
    }
  }

  // Sends a Hello on a fresh socket without waiting for its reply (whoever reads the socket
  // skips it: its request id is no request's in flight). Throws zmq::error_t.
  void Announce(zmq::socket_t& s) {
    fb::EnvelopeT env;
    env.version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
    env.request_id = next_id_.fetch_add(1) + 1;
    env.body.Set(MakeHello());
    flatbuffers::FlatBufferBuilder fbb(256);
    fbb.Finish(fb::Envelope::Pack(fbb, &env), fb::EnvelopeIdentifier());
    (void)s.send(zmq::const_buffer(fbb.GetBufferPointer(), fbb.GetSize()),
                 zmq::send_flags::dontwait);
  }

  void Checkin(std::unique_ptr<zmq::socket_t> s) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!stop_) idle_.push_back(std::move(s));
  }

  void DropIdle() {
    std::vector<std::unique_ptr<zmq::socket_t>> drop;
    std::lock_guard<std::mutex> lock(pool_mu_);
    drop.swap(idle_);
  }

  struct Outgoing {
    uint64_t request_id = 0;
    std::string payload;
    bool idempotent = false;
    bool hello = false;
    int64_t timeout_ms = 0;
    EnvelopeCallback done;
  };
  struct Pending {
    Outgoing req;
    int64_t deadline_ms = 0;
    int tries_left = 0;
  };

  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!wake_send_) return;
    try {
      wake_send_->send(zmq::str_buffer("w"), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
    }
  }

  // A DEALER socket connected to the daemon (CURVE when configured). Throws zmq::error_t.
  std::unique_ptr<zmq::socket_t> NewSocket() {
    auto s = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    if (curve_) {
      s->set(zmq::sockopt::curve_serverkey, opt_.server_public_key);
      s->set(zmq::sockopt::curve_publickey, opt_.client_public_key);
      s->set(zmq::sockopt::curve_secretkey, opt_.client_secret_key);
    }
    // An IPv6 address (tcp://[::1]:7878) is reached only with IPv6 enabled on the socket.
    if (opt_.endpoint.rfind("tcp://[", 0) == 0) s->set(zmq::sockopt::ipv6, true);
    s->connect(opt_.endpoint);
    return s;
  }

  Status OpenSocket() {
    socket_ = NewSocket();
    announced_ = false;
    return Status::OK();
  }

  // Bookkeeping of a request of the I/O thread's that is answered or failed.
  void Finished(const Outgoing& o) {
    in_flight_--;
    if (!o.idempotent) loop_writes_--;
  }

  void Complete(Pending& p, Result<std::unique_ptr<fb::EnvelopeT>> r) {
    Finished(p.req);
    if (p.req.done) p.req.done(std::move(r));
  }

  void SendPending(Pending& p) {
    try {
      if (!announced_) {  // the I/O thread's socket introduces itself too (Announce)
        announced_ = true;
        if (!p.req.hello) Announce(*socket_);
      }
      socket_->send(zmq::buffer(p.req.payload), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // Not sent (queue full): the deadline will retry or fail it.
    }
  }

  void HandleReply(zmq::message_t& msg) {
    aligned_.resize(msg.size() / 8 + 2);
    std::memcpy(aligned_.data(), msg.data(), msg.size());
    const auto* buf = reinterpret_cast<const uint8_t*>(aligned_.data());
    flatbuffers::Verifier verifier(buf, msg.size(), 64, 10000000);
    if (!fb::VerifyEnvelopeBuffer(verifier)) return;  // not from htamd: ignored
    const fb::Envelope* env = fb::GetEnvelope(buf);
    auto it = pending_.find(env->request_id());
    if (env->body_type() == fb::Body::Progress) {
      if (opt_.on_progress) {
        std::unique_ptr<fb::ProgressT> p(env->body_as_Progress()->UnPack());
        opt_.on_progress(*p);
      }
      return;
    }
    if (it == pending_.end()) return;  // late reply to a request that already timed out
    Pending p = std::move(it->second);
    pending_.erase(it);
    std::unique_ptr<fb::EnvelopeT> unpacked(env->UnPack());
    if (unpacked->body.type == fb::Body::Error) {
      Complete(p, StatusFromError(*unpacked->body.AsError()));
      return;
    }
    Complete(p, std::move(unpacked));
  }

  void Expire() {
    const int64_t now = NowMs();
    bool reconnect = false;
    std::vector<uint64_t> failed;
    for (auto& [id, p] : pending_) {
      if (p.deadline_ms > now) continue;
      if (p.req.idempotent && p.tries_left > 0) {
        p.tries_left--;
        p.deadline_ms = now + p.req.timeout_ms;
        reconnect = true;
      } else {
        failed.push_back(id);
      }
    }
    for (uint64_t id : failed) {
      Pending p = std::move(pending_[id]);
      pending_.erase(id);
      reconnect = true;
      Complete(p, Status::Timeout("no answer from " + opt_.endpoint + " within " +
                                  std::to_string(p.req.timeout_ms) + " ms"));
    }
    if (reconnect) {
      // Lazy pirate: a fresh socket drops whatever was queued for a dead peer. Requests still
      // pending are sent again on it (their replies would never reach the old socket).
      try {
        OpenSocket();
      } catch (const zmq::error_t&) {
      }
      for (auto& [id, p] : pending_) SendPending(p);
    }
  }

  void Loop() {
    while (!stop_) {
      int64_t timeout = -1;  // nothing pending: sleep until woken (a request, or Shutdown)
      if (!pending_.empty()) {
        int64_t nearest = INT64_MAX;
        for (auto& [id, p] : pending_) nearest = std::min(nearest, p.deadline_ms);
        timeout = std::clamp<int64_t>(nearest - NowMs(), 0, 50);
      }
      zmq::pollitem_t items[] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0},
                                 {static_cast<void*>(*wake_recv_), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, std::chrono::milliseconds(timeout));
        if (items[1].revents & ZMQ_POLLIN) {
          zmq::message_t m;
          while (wake_recv_->recv(m, zmq::recv_flags::dontwait)) {
          }
          std::deque<Outgoing> out;
          {
            std::lock_guard<std::mutex> lock(mu_);
            out.swap(outbox_);
          }
          for (auto& o : out) {
            Pending p;
            p.deadline_ms = NowMs() + o.timeout_ms;
            p.tries_left = o.idempotent ? opt_.retries : 0;
            p.req = std::move(o);
            uint64_t id = p.req.request_id;
            auto& slot = pending_[id] = std::move(p);
            SendPending(slot);
          }
        }
        if (items[0].revents & ZMQ_POLLIN) {
          for (int n = 0; n < 1024; ++n) {
            zmq::message_t m;
            if (!socket_->recv(m, zmq::recv_flags::dontwait)) break;
            while (m.more()) {  // one frame per envelope; skip anything else
              zmq::message_t extra;
              (void)socket_->recv(extra, zmq::recv_flags::none);
              m = std::move(extra);
            }
            HandleReply(m);
          }
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) break;
      }
      Expire();
    }
    // Whatever is left fails now.
    std::deque<Outgoing> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out.swap(outbox_);
    }
    for (auto& o : out) {
      Finished(o);
      if (o.done) o.done(Status::Unavailable("client shut down"));
    }
    for (auto& [id, p] : pending_) Complete(p, Status::Unavailable("client shut down"));
    pending_.clear();
  }

  ClientOptions opt_;
  bool curve_ = false;
  std::shared_ptr<zmq::context_t> context_;   // SharedContext(); outlives every socket below
  std::unique_ptr<zmq::socket_t> socket_;     // I/O thread
  bool announced_ = false;                    // I/O thread: socket_ sent its Hello
  std::unique_ptr<zmq::socket_t> wake_recv_;  // I/O thread
  std::mutex mu_;
  std::unique_ptr<zmq::socket_t> wake_send_;       // guarded by mu_
  std::deque<Outgoing> outbox_;                    // guarded by mu_
  std::unordered_map<uint64_t, Pending> pending_;  // I/O thread
  std::vector<uint64_t> aligned_;                  // I/O thread
  std::atomic<uint64_t> next_id_{0};
  std::atomic<size_t> in_flight_{0};
  std::atomic<int> loop_writes_{0};  // non-idempotent requests of the I/O thread unanswered
  std::atomic<bool> stop_{false};
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<zmq::socket_t>> idle_;  // guarded by pool_mu_; sockets for CallDirect
  std::thread io_;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  HTAM_RETURN_IF_ERROR(impl->Start());
  std::unique_ptr<Client> client(new Client(std::move(impl)));
  fb::BodyUnion body;
  body.Set(client->impl_->MakeHello());
  auto reply = client->Call<fb::HelloReplyT>(std::move(body), options.connect_timeout);
  if (!reply.ok()) {
    if (reply.status().code() == Status::Code::kTimeout)
      return Status::Unavailable("htamd did not answer at " + options.endpoint +
                                 " (not running, wrong endpoint, or CURVE keys refused)");
    return reply.status();
  }
  if (reply->protocol_version != static_cast<uint16_t>(fb::ProtocolVersion::Current))
    return Status::FailedPrecondition("htamd speaks protocol " +
                                      std::to_string(reply->protocol_version));
  client->impl_->hello_ = std::move(*reply);
  return client;
}

const fb::HelloReplyT& Client::server() const {
  return impl_->hello_;
}
size_t Client::in_flight() const {
  return impl_->in_flight();
}

void Client::CallAsync(fb::BodyUnion body, EnvelopeCallback done,
                       std::chrono::milliseconds timeout) {
  impl_->Send(std::move(body), std::move(done), timeout);
}

namespace {
// Extracts the typed body of a reply envelope.
template <typename T>
Result<T> Extract(Result<std::unique_ptr<fb::EnvelopeT>> r) {
  if (!r.ok()) return r.status();
  fb::EnvelopeT& env = **r;
  if (env.body.type != fb::BodyUnionTraits<T>::enum_value || env.body.value == nullptr)
    return Status::Internal(std::string("unexpected reply ") + fb::EnumNameBody(env.body.type));
  return std::move(*reinterpret_cast<T*>(env.body.value));
}

template <typename T>
std::future<Result<T>> AsyncTyped(Client* c, fb::BodyUnion body,
                                  std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Result<T>>>();
  auto future = promise->get_future();
  c->CallAsync(
      std::move(body),
      [promise](Result<std::unique_ptr<fb::EnvelopeT>> r) {
        promise->set_value(Extract<T>(std::move(r)));
      },
      timeout);
  return future;
}

template <typename T>
fb::BodyUnion Body(T value) {
  fb::BodyUnion b;
  b.Set(std::move(value));
  return b;
}

fb::SubmitT MakeSubmit(const SubmitArgs& a, bool wait) {
  fb::SubmitT s;
  s.session_id = a.session_id;
  s.source = a.source;
  s.language = a.language;
  s.direction_id = a.direction_id;
  s.strategy_ids = a.strategy_ids;
  s.summary = a.summary;
  s.wait = wait;
  s.progress = a.progress;
  s.profile = a.profile;
  return s;
}
}  // namespace

template <typename T>
Result<T> Client::Call(fb::BodyUnion body, std::chrono::milliseconds timeout) {
  if (impl_->Direct(body)) return impl_->CallDirect<T>(std::move(body), timeout);
  // The I/O thread always answers by the deadline (with Timeout), so get() cannot hang.
  return AsyncTyped<T>(this, std::move(body), timeout).get();
}

Result<fb::HelloReplyT> Client::Hello() {
  return Call<fb::HelloReplyT>(Body(impl_->MakeHello()));
}

Result<fb::SessionInfoT> Client::OpenSession(const OpenSessionArgs& a) {
  fb::OpenSessionT m;
  m.session_id = a.session_id;
  m.task = a.task;
  m.backend = a.backend;
  m.arch = a.arch;
  m.budget = a.budget;
  m.client = impl_->options().client_name;
  m.model = a.model;
  return Call<fb::SessionInfoT>(Body(std::move(m)));
}

Result<fb::StepT> Client::NextStep(uint64_t session_id, const std::vector<float>& embedding) {
  return NextStep(session_id, embedding, /*full=*/false);
}

Result<fb::StepT> Client::NextStep(uint64_t session_id, const std::vector<float>& embedding,
                                   bool full) {
  fb::NextStepT m;
  m.session_id = session_id;
  m.embedding = embedding;
  m.full = full;
  return Call<fb::StepT>(Body(std::move(m)));
}

Result<fb::SubmitAckT> Client::Submit(const SubmitArgs& a) {
  return Call<fb::SubmitAckT>(Body(MakeSubmit(a, false)));
}

Result<fb::ResultT> Client::SubmitAndWait(const SubmitArgs& a, std::chrono::milliseconds wait) {
  auto r = Call<fb::ResultT>(Body(MakeSubmit(a, true)), wait);
  return r;
}

Result<fb::ResultT> Client::Poll(uint64_t job_id, std::chrono::milliseconds wait) {
  fb::PollT m;
  m.job_id = job_id;
  m.wait_ms = static_cast<uint32_t>(wait.count());
  return Call<fb::ResultT>(Body(std::move(m)), impl_->options().timeout + wait);
}

Result<uint64_t> Client::Record(const RecordArgs& a) {
  fb::RecordT m;
  m.session_id = a.session_id;
  m.direction_id = a.direction_id;
  m.strategy_ids = a.strategy_ids;
  m.summary = a.summary;
  m.status = a.status;
  m.speedup_after = a.speedup_after;
  m.median_us = a.median_us;
  m.source = a.source;
  auto r = Call<fb::RecordAckT>(Body(std::move(m)));
  if (!r.ok()) return r.status();
  return r->transition_id;
}

Result<fb::SessionT> Client::CloseSession(uint64_t session_id) {
  fb::CloseSessionT m;
  m.session_id = session_id;
  auto r = Call<fb::CloseAckT>(Body(std::move(m)));
  if (!r.ok()) return r.status();
  if (!r->session) return Status::Internal("CloseAck without a session");
  return std::move(*r->session);
}

Result<fb::QueryReplyT> Client::Query(const fb::QueryT& query) {
  return Call<fb::QueryReplyT>(Body(fb::QueryT(query)));
}

Result<std::string> Client::ServerStatus(const std::string& section) {
  fb::StatusRequestT m;
  m.section = section;
  auto r = Call<fb::StatusReplyT>(Body(std::move(m)));
  if (!r.ok()) return r.status();
  return std::move(r->text);
}

std::future<Result<fb::StepT>> Client::NextStepAsync(uint64_t session_id) {
  fb::NextStepT m;
  m.session_id = session_id;
  return AsyncTyped<fb::StepT>(this, Body(std::move(m)), {});
}

std::future<Result<fb::SubmitAckT>> Client::SubmitAsync(const SubmitArgs& a) {
  return AsyncTyped<fb::SubmitAckT>(this, Body(MakeSubmit(a, false)), {});
}

std::future<Result<fb::ResultT>> Client::PollAsync(uint64_t job_id,
                                                   std::chrono::milliseconds wait) {
  fb::PollT m;
  m.job_id = job_id;
  m.wait_ms = static_cast<uint32_t>(wait.count());
  return AsyncTyped<fb::ResultT>(this, Body(std::move(m)), impl_->options().timeout + wait);
}

}  // namespace htam
