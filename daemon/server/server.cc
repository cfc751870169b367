// The htamd poll loop: front ROUTER socket, request dispatch, evaluation hand-off and batched
// memory writes. See server.h for the threading model and docs/protocol.md for the messages.
#include "daemon/server/server.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/log.h"
#include "daemon/common/auth.h"
#include "daemon/memory/memory.h"
#include "daemon/server/metrics.h"
#include "daemon/server/task_loader.h"
#ifdef HTAM_SERVER_HAVE_EVAL
#include "base/clock.h"
#include "base/endpoint.h"
#include "daemon/common/language.h"
#include "daemon/eval/evaluator.h"
#else
namespace htam::eval {
struct EvalResult {
  uint64_t job_id = 0;
  fb::OutcomeStatus status = fb::OutcomeStatus::InfraError;
  std::string diagnostics;
  double median_us = 0, spread_us = 0;
  uint32_t repetitions = 0;
  double baseline_us = 0, speedup = 0;
  fb::ProfileT profile;
  std::string candidate_hash, device, arch;
  double wall_ms = 0;
};
}  // namespace htam::eval
#endif

namespace htam::server {

namespace {
constexpr const char* kResultsEndpoint = "inproc://htamd-results";
constexpr const char* kComponent = "server";

std::string Str(const flatbuffers::String* s) {
  return s ? s->str() : std::string();
}

template <typename T>
std::vector<std::unique_ptr<T>> Boxed(std::vector<T>&& items) {
  std::vector<std::unique_ptr<T>> out;
  out.reserve(items.size());
  for (auto& it : items) out.push_back(std::make_unique<T>(std::move(it)));
  return out;
}

// A printable form of a ZeroMQ routing id for logs.
std::string PeerName(const std::string& identity) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity.substr(0, 8)) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}
}  // namespace

// What the loop needs to record a job's result, kept by a durable evaluator queue across restarts.
std::string Server::EncodeJobContext(const Job& job) {
  nlohmann::json j{{"direction_id", job.direction_id},
                   {"strategy_ids", job.strategy_ids},
                   {"summary", job.summary},
                   {"language", job.language},
                   {"candidate_hash", job.candidate_hash}};
  return j.dump();
}

bool Server::DecodeJobContext(const std::string& text, Job* job) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  try {
    job->direction_id = j.value("direction_id", uint64_t(0));
    job->strategy_ids = j.value("strategy_ids", std::vector<uint64_t>{});
    job->summary = j.value("summary", "");
    job->language = j.value("language", "");
    job->candidate_hash = j.value("candidate_hash", "");
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

struct Server::PendingWrite {
  Peer peer;
  uint64_t request_id = 0;
  uint64_t job_id = 0;  // non-zero: an evaluation result
  std::unique_ptr<eval::EvalResult> eval;
  memory::StepInput input;
};

ServerOptions ServerOptions::FromConfig(const Config& c) {
  ServerOptions o;
  o.bind = c.GetString("server.bind");
  o.allow_insecure_bind = c.GetBool("server.allow_insecure_bind");
  o.curve = c.GetBool("server.curve");
  o.curve_secret_key_file = c.GetString("server.curve_secret_key_file");
  o.curve_authorized_keys = c.GetString("server.curve_authorized_keys");
  o.tasks_dir = ShippedPath(c.GetString("server.tasks_dir"), "tasks");
  o.limits.max_message_bytes = static_cast<size_t>(c.GetInt("server.max_message_bytes"));
  o.limits.max_source_bytes = static_cast<size_t>(c.GetInt("server.max_source_bytes"));
  o.max_frames = static_cast<int>(c.GetInt("server.max_frames"));
  o.poll_interval_ms = static_cast<int>(c.GetInt("server.poll_interval_ms"));
  o.client_expiry_s = static_cast<int>(c.GetInt("server.client_expiry_s"));
  o.max_wait_ms = static_cast<int>(c.GetInt("server.max_wait_ms"));
  o.max_pending_jobs = static_cast<int>(c.GetInt("server.max_pending_jobs"));
  o.result_retention = static_cast<int>(c.GetInt("server.result_retention"));
  o.query_limit_max = static_cast<int>(c.GetInt("server.query_limit_max"));
  o.send_hwm = static_cast<int>(c.GetInt("server.send_hwm"));
  o.max_clients = static_cast<int>(c.GetInt("server.max_clients"));
  o.batch_max = static_cast<int>(c.GetInt("server.batch_max"));
  o.shutdown_grace_ms = static_cast<int>(c.GetInt("server.shutdown_grace_ms"));
  o.read_threads = static_cast<int>(c.GetInt("server.read_threads"));
  return o;
}

Server::Server(ServerOptions options, Services services)
    : options_(std::move(options)), services_(services), context_(1) {}

Server::~Server() {
  {
    std::lock_guard<std::mutex> lock(read_mu_);
    readers_stop_ = true;
  }
  read_cv_.notify_all();
  for (auto& t : readers_)
    if (t.joinable()) t.join();
  front_.reset();
  results_pull_.reset();
  {
    std::lock_guard<std::mutex> lock(results_mu_);
    results_push_.reset();
  }
  if (zap_) zap_->Stop();
  zap_.reset();
}

Status Server::Start() {
  started_ms_ = NowMs();
  job_counter_ = static_cast<uint64_t>(WallMs()) << 12;
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
    front_->set(zmq::sockopt::sndhwm, options_.send_hwm);
    front_->set(zmq::sockopt::rcvhwm, options_.send_hwm);
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
      HTAM_ASSIGN_OR_RETURN(auto allowed, auth::LoadAuthorizedKeys(options_.curve_authorized_keys));
      HTAM_LOG(kInfo, "auth") << "CURVE on: " << allowed.size() << " authorized client key(s) from "
                              << options_.curve_authorized_keys;
      zap_ = std::make_unique<auth::ZapHandler>(&context_, std::move(allowed));
      HTAM_RETURN_IF_ERROR(zap_->Start());
      front_->set(zmq::sockopt::curve_server, true);
      front_->set(zmq::sockopt::curve_secretkey, keys.secret_key);
      front_->set(zmq::sockopt::zap_domain, "htam");
    }
    front_->bind(options_.bind);
    endpoint_ = front_->get(zmq::sockopt::last_endpoint);
    results_pull_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::pull);
    results_pull_->set(zmq::sockopt::linger, 0);
    results_pull_->bind(kResultsEndpoint);
    results_push_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::push);
    results_push_->set(zmq::sockopt::linger, 0);
    results_push_->connect(kResultsEndpoint);
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
    zmq::pollitem_t items[] = {{static_cast<void*>(*front_), 0, ZMQ_POLLIN, 0},
                               {static_cast<void*>(*results_pull_), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(options_.poll_interval_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;  // a signal: the flag is checked above
      return Status::Internal(std::string("poll: ") + e.what());
    }
    if (items[1].revents & ZMQ_POLLIN) DrainResults();
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
      }
    }
    FlushWrites();
    if (NowMs() - last_tick >= options_.poll_interval_ms) {
      Tick();
      last_tick = NowMs();
    }
  }
  {
    std::lock_guard<std::mutex> lock(read_mu_);
    readers_stop_ = true;
  }
  read_cv_.notify_all();
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

void Server::Reply(const Peer& peer, const std::string& payload, ReplyKind kind) {
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
    front_->send(zmq::buffer(peer.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (peer.delimiter)
      front_->send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    front_->send(zmq::buffer(payload), zmq::send_flags::dontwait);
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
  Decoded d = DecodeRequest(frame, options_.limits);
  if (!d.ok) {
    if (d.error == fb::ErrorCode::Malformed) malformed_total_++;
    HTAM_LOG(kDebug, kComponent) << "bad message from " << PeerName(peer.identity) << ": "
                                 << d.message;
    ReplyError(peer, d.request_id, d.error, d.message);
    return;
  }
  peer.kind = static_cast<int>(d.envelope->body_type());
  Dispatch(peer, *d.envelope, client);
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

// ---------------------------------------------------------------- requests

void Server::OnHello(const Peer& peer, uint64_t rid, const fb::Hello& m, ClientInfo* client) {
  client->name = Str(m.client());
  client->version = Str(m.client_version());
  HTAM_LOG(kInfo, kComponent) << "hello from " << PeerName(peer.identity) << " client '"
                              << client->name << "' " << client->version
                              << (client->user.empty() ? "" : " key " + client->user);
  fb::HelloReplyT r;
  r.protocol_version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
  r.server_version = HTAM_VERSION;
  r.capabilities = {"next-step", "submit", "poll",   "progress",
                    "record",    "query",  "status", "resume"};
  if (options_.curve) r.capabilities.push_back("curve");
#ifdef HTAM_SERVER_HAVE_EVAL
  if (services_.evaluator) {
    r.backends = services_.evaluator->Backends();
    r.devices = Boxed(services_.evaluator->Devices());
  }
#endif
  if (services_.memory) {
    auto meta = services_.memory->GetMeta();
    if (meta.ok()) {
      r.embedder_model = meta->embedder_model;
      r.embedder_dim = meta->embedder_dim;
    }
  }
  Reply(peer, EncodeReply(rid, std::move(r)));
}

Result<uint64_t> Server::ResolveTask(const std::string& name) {
  if (!IsTaskName(name))
    return Status::InvalidArgument("bad task name '" + name + "' (letters, digits, - _ . only)");
  std::string dir = options_.tasks_dir + "/" + name;
  auto task = LoadTaskDir(dir);
  if (task.ok()) return services_.memory->PutTask(*task);
  if (!task.status().IsNotFound()) return task.status();
  auto known = services_.memory->FindTask(name);
  if (known.ok()) return known->id;
  return Status::NotFound("no task '" + name + "' in " + options_.tasks_dir + " or the store");
}

void Server::OnOpenSession(const Peer& peer, uint64_t rid, const fb::OpenSession& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
  memory::Memory& mem = *services_.memory;
  fb::SessionInfoT info;
  if (m.session_id() != 0) {
    auto s = mem.GetSession(m.session_id());
    if (!s.ok()) return ReplyStatus(peer, rid, s.status());
    info.session = std::make_unique<fb::SessionT>(std::move(*s));
    HTAM_LOG(kInfo, kComponent) << "session " << m.session_id() << " resumed by "
                                << PeerName(peer.identity) << " at step " << info.session->steps;
  } else {
    std::string backend = Str(m.backend());
    if (backend.empty()) backend = "cpu";
    auto task_id = ResolveTask(Str(m.task()));
    if (!task_id.ok()) return ReplyStatus(peer, rid, task_id.status());
    auto s = mem.OpenSession(*task_id, backend, Str(m.arch()), Str(m.client()), Str(m.model()),
                             m.budget());
    if (!s.ok()) return ReplyStatus(peer, rid, s.status());
    info.session = std::make_unique<fb::SessionT>(std::move(*s));
    LogScope log_new_session("session_id", info.session->id);
    HTAM_LOG(kInfo, kComponent) << "session " << info.session->id << " opened on task '"
                                << Str(m.task()) << "' backend " << backend << " by "
                                << PeerName(peer.identity);
  }
  auto task = mem.GetTask(info.session->task_id);
  if (task.ok()) info.task = std::make_unique<fb::TaskT>(std::move(*task));
  info.baseline_source = ReadReferenceSource(options_.tasks_dir + "/" + info.session->task_name,
                                             info.session->backend);
  if (!info.session->best_candidate.empty()) {
    auto c = mem.GetCandidate(info.session->best_candidate);
    if (c.ok()) info.best_source = c->source;
  }
  Reply(peer, EncodeReply(rid, std::move(info)));
}

void Server::OnNextStep(const Peer& peer, uint64_t rid, const fb::NextStep& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
  std::vector<float> embedding;
  if (m.embedding()) embedding.assign(m.embedding()->begin(), m.embedding()->end());
  const uint64_t sid = m.session_id();
  auto measured = measured_bottleneck_.find(sid);
  const fb::Bottleneck b =
      measured == measured_bottleneck_.end() ? fb::Bottleneck::Unknown : measured->second;
  RunRead(peer, [this, rid, sid, b, emb = std::move(embedding)]() mutable {
    return NextStepReply(rid, sid, std::move(emb), b);
  });
}

std::string Server::NextStepReply(uint64_t rid, uint64_t session_id, std::vector<float> embedding,
                                  fb::Bottleneck bottleneck) {
  std::optional<std::vector<float>> emb;
  if (!embedding.empty()) emb = std::move(embedding);
  memory::StateInput state;
  state.bottleneck = bottleneck;
  auto d = services_.memory->NextStep(session_id, state, std::move(emb));
  if (!d.ok()) return EncodeError(rid, ErrorCodeFor(d.status()), d.status().message());
  fb::StepT step;
  step.session_id = session_id;
  step.step = d->step;
  step.direction = std::make_unique<fb::DirectionT>(std::move(d->direction));
  step.strategies = Boxed(std::move(d->strategies));
  step.scores = Boxed(std::move(d->scores));
  step.evidence = Boxed(std::move(d->evidence));
  step.why = std::move(d->why);
  step.prompt_context = std::move(d->prompt_context);
  return EncodeReply(rid, std::move(step));
}

void Server::RunRead(const Peer& peer, std::function<std::string()> work) {
  if (readers_.empty()) return Reply(peer, work());
  // The reader thread logs with this request's ids.
  work = [fields = LogScope::Current(), work = std::move(work)] {
    LogScope scope(fields);
    return work();
  };
  {
    std::lock_guard<std::mutex> lock(read_mu_);
    read_queue_.emplace_back(peer, std::move(work));
  }
  read_cv_.notify_one();
}

void Server::ReaderLoop() {
  while (true) {
    std::pair<Peer, std::function<std::string()>> item;
    {
      std::unique_lock<std::mutex> lock(read_mu_);
      read_cv_.wait(lock, [this] { return readers_stop_ || !read_queue_.empty(); });
      if (read_queue_.empty()) return;  // stopping, nothing left
      item = std::move(read_queue_.front());
      read_queue_.pop_front();
    }
    std::string reply = item.second();
    std::lock_guard<std::mutex> lock(results_mu_);
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
    std::lock_guard<std::mutex> lock(results_mu_);
    ready.swap(ready_);
  }
  for (auto& [peer, payload] : ready) Reply(peer, payload);
}

void Server::OnSubmit(const Peer& peer, uint64_t rid, const fb::Submit& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
#ifndef HTAM_SERVER_HAVE_EVAL
  return ReplyError(peer, rid, fb::ErrorCode::Unavailable,
                    "this daemon was built without evaluation");
#else
  if (!services_.evaluator)
    return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "evaluation is not running");
  if (static_cast<int>(jobs_.size()) >= options_.max_pending_jobs)
    return ReplyError(peer, rid, fb::ErrorCode::Busy,
                      "too many evaluations in flight (" + std::to_string(jobs_.size()) + ")");
  std::string source = Str(m.source());
  if (source.empty()) return ReplyError(peer, rid, fb::ErrorCode::InvalidArgument, "empty source");
  auto session = services_.memory->GetSession(m.session_id());
  if (!session.ok()) return ReplyStatus(peer, rid, session.status());
  if (session->state != fb::SessionState::Open)
    return ReplyError(peer, rid, fb::ErrorCode::InvalidArgument,
                      "session " + std::to_string(m.session_id()) + " is closed");
  Job job;
  job.job_id = NextJobId();
  job.session_id = m.session_id();
  job.direction_id = m.direction_id();
  if (m.strategy_ids()) job.strategy_ids.assign(m.strategy_ids()->begin(), m.strategy_ids()->end());
  job.summary = Str(m.summary());
  job.language = Str(m.language());
  if (job.language.empty()) job.language = LanguageOf(session->backend);
  job.source = source;
  job.candidate_hash = memory::CandidateHash(job.language, source);
  job.submitted_ms = NowMs();

  eval::EvalJob ej;
  ej.job_id = job.job_id;
  ej.task_dir = options_.tasks_dir + "/" + session->task_name;
  ej.backend = session->backend;
  ej.arch = session->arch;
  ej.language = job.language;
  ej.source = std::move(source);
  ej.session_id = job.session_id;
  ej.context = EncodeJobContext(job);
  ej.profile = m.profile();
  if (m.progress()) ej.on_stage = StageSink();
  Status st = services_.evaluator->Submit(std::move(ej), ResultSink());
  if (!st.ok()) return ReplyStatus(peer, rid, st);
  evaluations_total_++;
  const uint64_t job_id = job.job_id;
  if (m.wait()) {
    int64_t deadline = NowMs() + options_.max_wait_ms;
    job.waiters.push_back(Waiter{peer, rid, deadline});
  }
  if (m.progress()) job.progress.push_back(Waiter{peer, rid, 0});
  size_t queued = jobs_.size();
  jobs_.emplace(job_id, std::move(job));
  HTAM_LOG(kDebug, kComponent) << "job " << job_id << " for session " << m.session_id()
                               << " queued (" << queued << " ahead)";
  if (!m.wait()) {
    fb::SubmitAckT ack;
    ack.session_id = m.session_id();
    ack.job_id = job_id;
    ack.candidate_hash = jobs_[job_id].candidate_hash;
    ack.queued = static_cast<uint32_t>(queued);
    Reply(peer, EncodeReply(rid, std::move(ack)));
  }
  if (m.progress()) {
    fb::ProgressT p;
    p.job_id = job_id;
    p.stage = "queued";
    p.message = std::to_string(queued) + " evaluation(s) ahead";
    Reply(peer, EncodeReply(rid, std::move(p)), ReplyKind::kProgress);
  }
#endif
}

std::function<void(eval::EvalResult)> Server::ResultSink() {
  return [this](eval::EvalResult r) {
    // Evaluator thread: hand the result to the loop; never touch loop state here.
    std::lock_guard<std::mutex> lock(results_mu_);
    results_.push_back(std::make_unique<eval::EvalResult>(std::move(r)));
    if (results_push_) {
      try {
        results_push_->send(zmq::str_buffer("r"), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
        // The loop drains on every tick as well.
      }
    }
  };
}

std::function<void(uint64_t, const std::string&, const std::string&)> Server::StageSink() {
  return [this](uint64_t job_id, const std::string& stage, const std::string& message) {
    // Evaluator thread: queue it for the loop, which alone knows who asked for progress.
    std::lock_guard<std::mutex> lock(results_mu_);
    stages_.emplace_back(job_id, stage, message);
    if (results_push_) {
      try {
        results_push_->send(zmq::str_buffer("s"), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
        // The loop drains on every tick as well.
      }
    }
  };
}

void Server::ResumeJobs() {
#ifdef HTAM_SERVER_HAVE_EVAL
  if (!services_.evaluator) return;
  for (auto& ej : services_.evaluator->Recovered()) {
    Job job;
    if (!DecodeJobContext(ej.context, &job)) {
      HTAM_LOG(kWarn, kComponent) << "queued job " << ej.job_id << ": unreadable context, skipped";
      continue;
    }
    job.job_id = ej.job_id;
    job.session_id = ej.session_id;
    job.source = ej.source;
    job.submitted_ms = NowMs();
    const uint64_t id = ej.job_id;
    Status st = services_.evaluator->Submit(std::move(ej), ResultSink());
    if (!st.ok()) {
      HTAM_LOG(kWarn, kComponent) << "queued job " << id << " not resumed: " << st.ToString();
      continue;
    }
    job_counter_ = std::max(job_counter_, id);
    jobs_.emplace(id, std::move(job));
    evaluations_total_++;
    HTAM_LOG(kInfo, kComponent) << "job " << id << " queued before the restart resumed";
  }
#endif
}

void Server::OnPoll(const Peer& peer, uint64_t rid, const fb::Poll& m) {
  auto done = done_.find(m.job_id());
  if (done != done_.end()) {
    fb::ResultT copy = done->second;
    return Reply(peer, EncodeReply(rid, std::move(copy)));
  }
  auto job = jobs_.find(m.job_id());
  if (job == jobs_.end())
    return ReplyError(peer, rid, fb::ErrorCode::NotFound,
                      "no evaluation " + std::to_string(m.job_id()) +
                          " (unknown, or its result is no longer kept)");
  if (m.wait_ms() == 0) {
    fb::ResultT r;
    r.job_id = m.job_id();
    r.session_id = job->second.session_id;
    r.done = false;
    return Reply(peer, EncodeReply(rid, std::move(r)));
  }
  int64_t wait = std::min<int64_t>(m.wait_ms(), options_.max_wait_ms);
  job->second.waiters.push_back(Waiter{peer, rid, NowMs() + wait});
}

void Server::OnRecord(const Peer& peer, uint64_t rid, const fb::Record& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
  auto w = std::make_unique<PendingWrite>();
  w->peer = peer;
  w->request_id = rid;
  memory::StepInput& in = w->input;
  in.session_id = m.session_id();
  in.direction_id = m.direction_id();
  if (m.strategy_ids()) in.strategy_ids.assign(m.strategy_ids()->begin(), m.strategy_ids()->end());
  in.summary = Str(m.summary());
  // The client's own evaluation keeps its outcome class (so the memory learns from reported
  // failures and successes) but is marked unverified: htamd did not compile, check or time it.
  in.status = m.status();
  in.verified = false;
  in.speedup_after = m.speedup_after();
  in.median_us = m.median_us();
  in.diagnostics = std::string("client-reported outcome, not verified by htamd: ") +
                   fb::EnumNameOutcomeStatus(m.status());
  in.source = Str(m.source());
  if (!in.source.empty()) {
    in.language = "cpp";
    // The language follows the session's backend; looked up only when a source is kept.
    auto s = services_.memory->GetSession(m.session_id());
    if (s.ok()) in.language = LanguageOf(s->backend);
    in.candidate_hash = memory::CandidateHash(in.language, in.source);
  }
  auto measured = measured_bottleneck_.find(in.session_id);
  if (measured != measured_bottleneck_.end()) {
    memory::StateInput state;
    state.bottleneck = measured->second;
    in.state = state;
  }
  peers_with_writes_.insert(peer.identity);
  writes_.push_back(std::move(w));
}

void Server::OnCloseSession(const Peer& peer, uint64_t rid, const fb::CloseSession& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
  auto s = services_.memory->CloseSession(m.session_id());
  if (!s.ok()) return ReplyStatus(peer, rid, s.status());
  measured_bottleneck_.erase(m.session_id());
  HTAM_LOG(kInfo, kComponent) << "session " << m.session_id() << " closed after " << s->steps
                              << " step(s), best speedup " << s->best_speedup;
  fb::CloseAckT ack;
  ack.session = std::make_unique<fb::SessionT>(std::move(*s));
  Reply(peer, EncodeReply(rid, std::move(ack)));
}

void Server::OnQuery(const Peer& peer, uint64_t rid, const fb::Query& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
  std::shared_ptr<fb::QueryT> q(m.UnPack());
  RunRead(peer, [this, rid, q] { return QueryReply(rid, *q); });
}

std::string Server::QueryReply(uint64_t rid, const fb::QueryT& m) {
  memory::Memory& mem = *services_.memory;
  size_t limit = std::min<size_t>(m.limit == 0 ? options_.query_limit_max : m.limit,
                                  static_cast<size_t>(options_.query_limit_max));
  auto trim = [limit](auto& v) {
    if (v.size() > limit) v.resize(limit);
  };
  fb::QueryReplyT r;
  Status st;
  auto take = [&st](auto result, auto* out) {
    if (!result.ok()) {
      st = result.status();
      return;
    }
    out->push_back(std::make_unique<typename std::decay_t<decltype(*result)>>(std::move(*result)));
  };
  auto take_all = [&st, &trim](auto result, auto* out) {
    if (!result.ok()) {
      st = result.status();
      return;
    }
    trim(*result);
    *out = Boxed(std::move(*result));
  };
  uint64_t task_id = 0;
  if (!m.task.empty()) {
    auto t = mem.FindTask(m.task);
    if (!t.ok()) return EncodeError(rid, ErrorCodeFor(t.status()), t.status().message());
    task_id = t->id;
  }
  switch (m.kind) {
    case fb::QueryKind::Directions:
      if (m.id)
        take(mem.GetDirection(m.id), &r.directions);
      else
        take_all(mem.ListDirections(), &r.directions);
      break;
    case fb::QueryKind::Strategies:
      if (m.id) {
        take(mem.GetStrategy(m.id), &r.strategies);
      } else {
        memory::StrategyFilter f;
        f.direction_id = m.direction_id;
        f.backend = m.backend;
        f.limit = limit;
        take_all(mem.ListStrategies(f), &r.strategies);
      }
      break;
    case fb::QueryKind::Transitions:
      if (m.id)
        take(mem.GetTransition(m.id), &r.transitions);
      else
        take_all(mem.ListTransitions(m.session_id, limit), &r.transitions);
      break;
    case fb::QueryKind::Sessions:
      if (m.id || m.session_id)
        take(mem.GetSession(m.id ? m.id : m.session_id), &r.sessions);
      else
        take_all(mem.ListSessions(task_id, limit), &r.sessions);
      break;
    case fb::QueryKind::Tasks:
      if (m.id)
        take(mem.GetTask(m.id), &r.tasks);
      else if (task_id)
        take(mem.GetTask(task_id), &r.tasks);
      else
        take_all(mem.ListTasks(), &r.tasks);
      break;
    case fb::QueryKind::BestCandidates: {
      // The best candidate of each matching session, best speedup first.
      std::vector<fb::SessionT> sessions;
      if (m.session_id) {
        auto s = mem.GetSession(m.session_id);
        if (!s.ok()) return EncodeError(rid, ErrorCodeFor(s.status()), s.status().message());
        sessions.push_back(std::move(*s));
      } else {
        auto all = mem.ListSessions(task_id, 0);
        if (!all.ok()) return EncodeError(rid, ErrorCodeFor(all.status()), all.status().message());
        sessions = std::move(*all);
      }
      const std::string backend = m.backend;
      std::erase_if(sessions, [&](const fb::SessionT& s) {
        return s.best_candidate.empty() || (!backend.empty() && s.backend != backend);
      });
      std::stable_sort(sessions.begin(), sessions.end(),
                       [](auto& a, auto& b) { return a.best_speedup > b.best_speedup; });
      trim(sessions);
      for (auto& s : sessions) {
        auto c = mem.GetCandidate(s.best_candidate);
        if (c.ok()) r.candidates.push_back(std::make_unique<fb::CandidateT>(std::move(*c)));
      }
      r.sessions = Boxed(std::move(sessions));
      break;
    }
    case fb::QueryKind::Edges: take_all(mem.ListEdges(m.direction_id), &r.edges); break;
    default: return EncodeError(rid, fb::ErrorCode::InvalidArgument, "unknown query kind");
  }
  if (!st.ok()) return EncodeError(rid, ErrorCodeFor(st), st.message());
  return EncodeReply(rid, std::move(r));
}

void Server::OnStatus(const Peer& peer, uint64_t rid, const fb::StatusRequest& m) {
  fb::StatusReplyT r;
  r.text = StatusText(Str(m.section()));
  Reply(peer, EncodeReply(rid, std::move(r)));
}

std::string Server::StatusText(const std::string& section) {
  std::ostringstream out;
  const int64_t now = NowMs();
  auto want = [&section](const char* s) { return section.empty() || section == s; };
  if (want("server")) {
    out << "# server\n"
        << "version: " << HTAM_VERSION << "\n"
        << "protocol_version: " << static_cast<int>(fb::ProtocolVersion::Current) << "\n"
        << "pid: " << ::getpid() << "\n"
        << "endpoint: " << endpoint_ << "\n"
        << "curve: " << (options_.curve ? "on" : "off") << "\n"
        << "uptime_s: " << (now - started_ms_) / 1000 << "\n"
        << "requests_total: " << requests_total_ << "\n"
        << "errors_total: " << errors_total_ << "\n"
        << "malformed_total: " << malformed_total_ << "\n"
        << "dropped_total: " << dropped_total_ << "\n"
        << "records_total: " << records_total_ << "\n"
        << "write_batches: " << write_batches_ << "\n";
    if (zap_)
      out << "auth_accepted: " << zap_->accepted() << "\nauth_refused: " << zap_->refused() << "\n";
    out << "\n";
  }
  if (want("clients")) {
    int active = 0;
    for (auto& [id, c] : clients_)
      if (now - c.last_seen_ms < 60000) active++;
    out << "# clients\n"
        << "known: " << clients_.size() << "\n"
        << "active_last_minute: " << active << "\n";
    int shown = 0;
    for (auto& [id, c] : clients_) {
      if (shown++ >= 32) break;
      out << "client_" << PeerName(id) << ": name=" << (c.name.empty() ? "-" : c.name)
          << " requests=" << c.requests << " errors=" << c.errors
          << " idle_ms=" << now - c.last_seen_ms << (c.user.empty() ? "" : " key=" + c.user)
          << "\n";
    }
    out << "\n";
  }
  if (want("memory")) {
    if (services_.memory)
      out << services_.memory->StatusText();
    else
      out << "# memory\nstate: unavailable\n";
    out << "\n";
  }
  if (want("evaluation")) {
#ifdef HTAM_SERVER_HAVE_EVAL
    if (services_.evaluator)
      out << services_.evaluator->StatusText();
    else
      out << "# evaluation\nstate: unavailable\n";
#else
    out << "# evaluation\nstate: not built\n";
#endif
    out << "jobs_in_flight: " << jobs_.size() << "\n"
        << "jobs_total: " << evaluations_total_ << "\n"
        << "results_kept: " << done_.size() << "\n\n";
  }
#ifdef HTAM_SERVER_HAVE_EVAL
  if (want("workers") && services_.evaluator) {
    std::string w = services_.evaluator->WorkersStatusText();
    if (!w.empty()) out << w << "\n";
  }
#endif
  return out.str();
}

// ---------------------------------------------------------------- evaluation results and writes

void Server::DrainResults() {
  try {
    zmq::message_t m;
    while (results_pull_->recv(m, zmq::recv_flags::dontwait)) {
    }
  } catch (const zmq::error_t&) {
  }
  SendReadyReplies();
  std::deque<std::unique_ptr<eval::EvalResult>> batch;
  std::deque<std::tuple<uint64_t, std::string, std::string>> stages;
  {
    std::lock_guard<std::mutex> lock(results_mu_);
    batch.swap(results_);
    stages.swap(stages_);
  }
  // Stages first: each was reported before any result taken in the same swap.
  for (auto& [job_id, stage, message] : stages) {
    auto job = jobs_.find(job_id);
    if (job == jobs_.end()) continue;
    for (auto& w : job->second.progress) {
      fb::ProgressT p;
      p.job_id = job_id;
      p.stage = stage;
      p.message = message;
      Reply(w.peer, EncodeReply(w.request_id, std::move(p)), ReplyKind::kProgress);
    }
  }
  for (auto& r : batch) {
    auto job = jobs_.find(r->job_id);
    if (job == jobs_.end()) {
      HTAM_LOG(kWarn, kComponent) << "result for unknown job " << r->job_id << " dropped";
      continue;
    }
    const Job& j = job->second;
    auto w = std::make_unique<PendingWrite>();
    w->job_id = r->job_id;
    memory::StepInput& in = w->input;
    in.session_id = j.session_id;
    in.direction_id = j.direction_id;
    in.strategy_ids = j.strategy_ids;
    in.summary = j.summary;
    in.status = r->status;
    in.speedup_after = r->speedup;
    in.median_us = r->median_us;
    in.spread_us = r->spread_us;
    in.profile = r->profile;
    in.verified = true;
    in.candidate_hash = r->candidate_hash.empty() ? j.candidate_hash : r->candidate_hash;
    in.language = j.language;
    in.source = j.source;
    in.diagnostics = r->diagnostics;
    // A profiled candidate's measured class is the state of the session's next steps (this
    // step's state is the one it started from).
    auto measured = measured_bottleneck_.find(j.session_id);
    if (measured != measured_bottleneck_.end()) {
      memory::StateInput state;
      state.bottleneck = measured->second;
      in.state = state;
    }
    if (r->bottleneck != fb::Bottleneck::Unknown)
      measured_bottleneck_[j.session_id] = r->bottleneck;
    w->eval = std::move(r);
    writes_.push_back(std::move(w));
  }
}

void Server::FlushWrites() {
  if (writes_.empty()) return;
  std::vector<std::unique_ptr<PendingWrite>> batch;
  batch.swap(writes_);
  peers_with_writes_.clear();
  std::vector<Result<memory::StepRecorded>> outcomes;
  outcomes.reserve(batch.size());
  if (!services_.memory) {
    for (size_t i = 0; i < batch.size(); ++i)
      outcomes.emplace_back(Status::Unavailable("no memory"));
  } else {
    std::vector<memory::StepInput> inputs;
    inputs.reserve(batch.size());
    for (auto& w : batch) inputs.push_back(w->input);
    // One synced transaction for the whole batch; if any step is refused, each goes alone so
    // that one bad request does not fail the others.
    auto all = batch.size() > 1 ? services_.memory->RecordSteps(inputs)
                                : Result<std::vector<memory::StepRecorded>>(Status::Internal(""));
    if (all.ok() && all->size() == batch.size()) {
      for (auto& rec : *all) outcomes.emplace_back(rec);
    } else {
      for (auto& in : inputs) outcomes.push_back(services_.memory->RecordStep(in));
    }
    write_batches_++;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    PendingWrite& w = *batch[i];
    auto& rec = outcomes[i];
    LogScope log_request("request_id", w.request_id), log_session("session_id", w.input.session_id),
        log_job("job_id", w.job_id);
    if (services_.metrics && rec.ok())
      services_.metrics->CountOutcome(fb::EnumNameOutcomeStatus(w.input.status), w.input.verified);
    if (w.job_id == 0) {
      if (!rec.ok()) {
        ReplyStatus(w.peer, w.request_id, rec.status());
        continue;
      }
      records_total_++;
      fb::RecordAckT ack;
      ack.transition_id = rec->transition_id;
      Reply(w.peer, EncodeReply(w.request_id, ack));
      continue;
    }
    const eval::EvalResult& e = *w.eval;
    fb::ResultT r;
    r.job_id = w.job_id;
    r.session_id = w.input.session_id;
    r.done = true;
    r.status = e.status;
    r.diagnostics = e.diagnostics;
    r.median_us = e.median_us;
    r.spread_us = e.spread_us;
    r.repetitions = e.repetitions;
    r.baseline_us = e.baseline_us;
    r.speedup = e.speedup;
    r.profile = std::make_unique<fb::ProfileT>(e.profile);
    if (rec.ok()) {
      records_total_++;
      r.transition_id = rec->transition_id;
      r.best_speedup = rec->best_speedup;
      r.new_strategy_id = rec->new_strategy_id;
    } else {
      HTAM_LOG(kError, kComponent)
          << "job " << w.job_id << ": result not recorded: " << rec.status().ToString();
      r.diagnostics += (r.diagnostics.empty() ? "" : "\n") +
                       std::string("not recorded in memory: ") + rec.status().ToString();
    }
    HTAM_LOG(kInfo, kComponent) << "job " << w.job_id << " session " << r.session_id << ": "
                                << fb::EnumNameOutcomeStatus(r.status) << " speedup " << r.speedup
                                << " (" << e.wall_ms << " ms)";
    auto job = jobs_.find(w.job_id);
    if (job != jobs_.end()) {
      AnswerJob(job->second, r);
      jobs_.erase(job);
    }
    RememberResult(r);
  }
}

void Server::AnswerJob(Job& job, const fb::ResultT& result) {
  // Progress first: a client that waits for the Result has then seen "done" already.
  for (auto& w : job.progress) {
    fb::ProgressT p;
    p.job_id = job.job_id;
    p.stage = "done";
    p.message = fb::EnumNameOutcomeStatus(result.status);
    Reply(w.peer, EncodeReply(w.request_id, std::move(p)), ReplyKind::kProgress);
  }
  for (auto& w : job.waiters) {
    fb::ResultT copy = result;
    Reply(w.peer, EncodeReply(w.request_id, std::move(copy)));
  }
  job.waiters.clear();
  job.progress.clear();
}

void Server::RememberResult(const fb::ResultT& result) {
  done_[result.job_id] = result;
  done_order_.push_back(result.job_id);
  while (static_cast<int>(done_order_.size()) > options_.result_retention) {
    done_.erase(done_order_.front());
    done_order_.pop_front();
  }
}

void Server::Tick() {
  DrainResults();  // in case a wake-up message was lost
  if (services_.metrics) {
    services_.metrics->SetGauge("htam_evaluation_queue_depth", static_cast<double>(jobs_.size()),
                                "Evaluations accepted and not finished (queued or running).");
    services_.metrics->SetGauge("htam_clients", static_cast<double>(clients_.size()),
                                "Clients known to htamd (silent ones expire).");
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
  const int64_t expiry = static_cast<int64_t>(options_.client_expiry_s) * 1000;
  std::erase_if(clients_, [&](const auto& kv) { return now - kv.second.last_seen_ms > expiry; });
}

uint64_t Server::NextJobId() {
  return ++job_counter_;
}

}  // namespace htam::server
