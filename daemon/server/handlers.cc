// The request handlers: one On<Request> per message of docs/protocol.md. Reads that may be slow
// (NextStep, Query) build their reply on a reader thread (readers.cc); Submit hands the candidate
// to the evaluator and tracks the job (jobs.cc); Record joins the write batch (writes.cc).
// Thread-safety: the On* handlers run on the loop thread and may touch loop state; NextStepReply
// and QueryReply run on reader threads and touch only the memory (itself thread-safe) and the
// options.
#include "daemon/server/server_impl.h"

#include "base/hash.h"
#include "base/text.h"

namespace htam::server {

void Server::OnHello(const Peer& peer, uint64_t rid, const fb::Hello& m, ClientInfo* client) {
  // Shown in Status lines and logs: a name cannot bring lines of its own.
  client->name = EscapeForLine(Str(m.client()));
  client->version = EscapeForLine(Str(m.client_version()));
  // Without CURVE a client's identity secret names it across its connections; only a hash of it is
  // kept (sessions store it as their owner), so neither logs nor Status can show the secret.
  if (!options_.curve && m.identity_secret() && m.identity_secret()->size() != 0) {
    Sha256 h;
    h.Update("htam identity secret\n");
    h.Update(std::string_view(reinterpret_cast<const char*>(m.identity_secret()->data()),
                              m.identity_secret()->size()));
    client->secret_owner = "id:" + h.HexDigest().substr(0, 32);
  }
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
    Status may = MayDrive(peer, *s);
    if (!may.ok()) return ReplyStatus(peer, rid, may);
    info.session = std::make_unique<fb::SessionT>(std::move(*s));
    HTAM_LOG(kInfo, kComponent) << "session " << m.session_id() << " resumed by "
                                << PeerName(peer.identity) << " at step " << info.session->steps;
  } else {
    std::string backend = Str(m.backend());
    if (backend.empty()) backend = "cpu";
    auto task_id = ResolveTask(Str(m.task()));
    if (!task_id.ok()) return ReplyStatus(peer, rid, task_id.status());
    if (enforce_owners_ && peer.role == "read")
      return ReplyError(peer, rid, fb::ErrorCode::Unauthorized,
                        "this client's key has the read role: it cannot open sessions");
    auto s = mem.OpenSession(*task_id, backend, Str(m.arch()), Str(m.client()), Str(m.model()),
                             m.budget(), enforce_owners_ ? peer.owner : std::string());
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
  if (enforce_owners_) {
    auto s = services_.memory->GetSession(sid, /*with_steps=*/false);
    if (!s.ok()) return ReplyStatus(peer, rid, s.status());
    Status may = MayDrive(peer, *s);
    if (!may.ok()) return ReplyStatus(peer, rid, may);
  }
  // The client's measurement of its current kernel; Unknown lets the memory take what htamd
  // profiled for the session (Session.measured_bottleneck).
  fb::Bottleneck b = fb::Bottleneck::Unknown;
  // (a value this build does not know is ignored)
  if (static_cast<int>(m.bottleneck()) > static_cast<int>(fb::Bottleneck::Unknown) &&
      static_cast<int>(m.bottleneck()) <= static_cast<int>(fb::Bottleneck::MAX))
    b = m.bottleneck();
  const bool full = m.full();  // every strategy in full and all evidence (default: compact)
  RunRead(peer, rid, [this, rid, sid, b, full, emb = std::move(embedding)]() mutable {
    return NextStepReply(rid, sid, std::move(emb), b, full);
  }, /*inline_ok=*/true);
}

std::string Server::NextStepReply(uint64_t rid, uint64_t session_id, std::vector<float> embedding,
                                  fb::Bottleneck bottleneck, bool full) {
  std::optional<std::vector<float>> emb;
  if (!embedding.empty()) emb = std::move(embedding);
  memory::StateInput state;
  state.bottleneck = bottleneck;
  state.full = full;
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
  if (source.empty())
    return ReplyError(peer, rid, fb::ErrorCode::InvalidArgument, "Submit.source: empty source");
  auto session = services_.memory->GetSession(m.session_id(), /*with_steps=*/false);
  if (!session.ok()) return ReplyStatus(peer, rid, session.status());
  Status may = MayDrive(peer, *session);
  if (!may.ok()) return ReplyStatus(peer, rid, may);
  if (session->state != fb::SessionState::Open)
    return ReplyError(peer, rid, fb::ErrorCode::InvalidArgument,
                      "session " + std::to_string(m.session_id()) + " is closed");
  // Every id the result will be recorded under must be known before a device spends time on it.
  Status ids = CheckStepIds("Submit", m.direction_id(), m.strategy_ids());
  if (!ids.ok()) return ReplyStatus(peer, rid, ids);
  Job job;
  job.job_id = NextJobId();
  job.session_id = m.session_id();
  job.request_id = rid;
  job.owner = session->owner;
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
  ej.candidate_hash = job.candidate_hash;  // hashed once, here
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

Status Server::CheckStepIds(const char* message, uint64_t direction_id,
                            const flatbuffers::Vector<uint64_t>* strategy_ids) {
  const std::string m(message);
  if (direction_id == 0)
    return Status::InvalidArgument(m + ".direction_id: missing (the direction of this step, " +
                                   "from NextStep's answer)");
  auto d = services_.memory->GetDirection(direction_id);
  if (!d.ok()) {
    if (d.status().IsNotFound())
      return Status::NotFound(m + ".direction_id: no direction " + std::to_string(direction_id));
    return d.status();
  }
  if (!strategy_ids) return Status::OK();
  for (uint64_t id : *strategy_ids) {
    auto s = services_.memory->GetStrategy(id);
    if (!s.ok()) {
      if (s.status().IsNotFound())
        return Status::NotFound(m + ".strategy_ids: no strategy " + std::to_string(id));
      return s.status();
    }
  }
  return Status::OK();
}

void Server::OnPoll(const Peer& peer, uint64_t rid, const fb::Poll& m) {
  auto done = done_.find(m.job_id());
  if (done != done_.end() && enforce_owners_ && services_.memory) {
    auto s = services_.memory->GetSession(done->second.session_id, /*with_steps=*/false);
    Status may = s.ok() ? MayDrive(peer, *s) : Status::OK();
    if (!may.ok()) return ReplyStatus(peer, rid, may);
  }
  if (done != done_.end()) {
    fb::ResultT copy = done->second;
    return Reply(peer, EncodeReply(rid, std::move(copy)));
  }
  auto job = jobs_.find(m.job_id());
  if (job == jobs_.end())
    return ReplyError(peer, rid, fb::ErrorCode::NotFound,
                      "no evaluation " + std::to_string(m.job_id()) +
                          " (unknown, or its result is no longer kept)");
  Status may = MayDrive(peer, job->second.owner);
  if (!may.ok()) return ReplyStatus(peer, rid, may);
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
  // Numbers in range at the door (finiteness is the codec's): how much a reported outcome may
  // weigh is the memory's rule; a time below zero or a speedup past any machine is no outcome.
  if (m.median_us() < 0)
    return ReplyError(peer, rid, fb::ErrorCode::InvalidArgument,
                      "Record.median_us: negative time " + std::to_string(m.median_us()));
  if (m.speedup_after() < 0 || m.speedup_after() > options_.max_speedup)
    return ReplyError(peer, rid, fb::ErrorCode::InvalidArgument,
                      "Record.speedup_after: " + std::to_string(m.speedup_after()) +
                          " is outside 0.." + std::to_string(options_.max_speedup) +
                          " (memory.max_speedup)");
  if (enforce_owners_) {
    auto s = services_.memory->GetSession(m.session_id(), /*with_steps=*/false);
    if (!s.ok()) return ReplyStatus(peer, rid, s.status());
    Status may = MayDrive(peer, *s);
    if (!may.ok()) return ReplyStatus(peer, rid, may);
  }
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
    auto s = services_.memory->GetSession(m.session_id(), /*with_steps=*/false);
    if (s.ok()) in.language = LanguageOf(s->backend);
    in.candidate_hash = memory::CandidateHash(in.language, in.source);
  }
  peers_with_writes_.insert(peer.identity);
  writes_.push_back(std::move(w));
}

void Server::OnCloseSession(const Peer& peer, uint64_t rid, const fb::CloseSession& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
  if (enforce_owners_) {
    auto owned = services_.memory->GetSession(m.session_id(), /*with_steps=*/false);
    if (!owned.ok()) return ReplyStatus(peer, rid, owned.status());
    Status may = MayDrive(peer, *owned);
    if (!may.ok()) return ReplyStatus(peer, rid, may);
  }
  auto s = services_.memory->CloseSession(m.session_id());
  if (!s.ok()) return ReplyStatus(peer, rid, s.status());
  HTAM_LOG(kInfo, kComponent) << "session " << m.session_id() << " closed after " << s->steps
                              << " step(s), best speedup " << s->best_speedup;
  fb::CloseAckT ack;
  ack.session = std::make_unique<fb::SessionT>(std::move(*s));
  Reply(peer, EncodeReply(rid, std::move(ack)));
}

void Server::OnQuery(const Peer& peer, uint64_t rid, const fb::Query& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
  std::shared_ptr<fb::QueryT> q(m.UnPack());
  RunRead(peer, rid, [this, rid, q, peer] { return QueryReply(rid, *q, peer); });
}

namespace {

// The bytes `item` takes packed on its own: what it adds to a reply, give or take its offset.
template <typename T>
size_t PackedSize(const T& item) {
  flatbuffers::FlatBufferBuilder b(1024);
  b.Finish(T::TableType::Pack(b, &item));
  return b.GetSize() + 16;
}

// A page of one list: the items from `cursor` on, at most `limit` of them, as many as fit in
// `budget` bytes (pairs of items count together, so `v` and `with` stay aligned). Returns the
// next page's cursor (0: this is the last page); *too_big when not even the first item fits.
template <typename T, typename U = T>
uint64_t Page(std::vector<T>& v, uint64_t cursor, size_t limit, size_t* budget, bool* too_big,
              std::vector<U>* with = nullptr) {
  auto drop_front = [cursor](auto& list) {
    list.erase(list.begin(), list.begin() + static_cast<ptrdiff_t>(
                                                std::min<uint64_t>(cursor, list.size())));
  };
  drop_front(v);
  if (with) drop_front(*with);
  bool more = v.size() > limit;
  size_t keep = 0;
  for (; keep < v.size() && keep < limit; ++keep) {
    size_t bytes = PackedSize(v[keep]) + (with && keep < with->size() ? PackedSize((*with)[keep]) : 0);
    if (bytes > *budget) {
      more = true;
      *too_big = keep == 0;
      break;
    }
    *budget -= bytes;
  }
  v.resize(keep);
  if (with && with->size() > keep) with->resize(keep);
  return more ? cursor + keep : 0;
}

// The BestCandidates query: the best candidate of each matching session, best speedup first,
// paged from `cursor` (at most `limit`, within *budget bytes) into r's candidates and sessions.
// Sources travel when asked for, or when the query names its one session; sessions of other
// clients are left out unless `see_others`, their sources unless `see_others_sources`.
Status BestCandidates(memory::Memory& mem, const fb::QueryT& m, uint64_t task_id, uint64_t cursor,
                      size_t limit, bool see_others, bool see_others_sources,
                      const std::function<bool(uint64_t)>& of_other, size_t* budget, bool* too_big,
                      fb::QueryReplyT* r) {
  std::vector<fb::SessionT> sessions;
  if (m.session_id) {
    auto s = mem.GetSession(m.session_id, /*with_steps=*/false);
    if (!s.ok()) return s.status();
    sessions.push_back(std::move(*s));
  } else {
    auto all = mem.ListSessions(task_id, 0);
    if (!all.ok()) return all.status();
    sessions = std::move(*all);
  }
  const std::string backend = m.backend;
  std::erase_if(sessions, [&](const fb::SessionT& s) {
    return s.best_candidate.empty() || (!backend.empty() && s.backend != backend) ||
           (!see_others && of_other(s.id));
  });
  std::stable_sort(sessions.begin(), sessions.end(),
                   [](auto& a, auto& b) { return a.best_speedup > b.best_speedup; });
  if (cursor < sessions.size()) {
    sessions.erase(sessions.begin(), sessions.begin() + static_cast<ptrdiff_t>(cursor));
  } else {
    sessions.clear();
  }
  if (sessions.size() > limit + 1) sessions.resize(limit + 1);
  const bool sources = m.with_sources || m.session_id != 0;
  std::vector<fb::CandidateT> candidates;
  std::vector<fb::SessionT> found;
  for (auto& s : sessions) {
    auto c = mem.GetCandidate(s.best_candidate);
    if (!c.ok()) continue;
    if (!sources || (!see_others_sources && of_other(s.id)))
      c->source.clear(), c->compile_log.clear();
    candidates.push_back(std::move(*c));
    found.push_back(std::move(s));
  }
  uint64_t next = Page(found, 0, limit, budget, too_big, &candidates);
  r->next_cursor = next ? cursor + next : 0;
  r->candidates = Boxed(std::move(candidates));
  r->sessions = Boxed(std::move(found));
  return Status::OK();
}

}  // namespace

Status Server::MayDrive(const Peer& peer, const std::string& owner) const {
  if (!enforce_owners_ || peer.role == "admin") return Status::OK();
  if (peer.role == "read")
    return Status::PermissionDenied("this client's key has the read role: it reads, never drives "
                                    "a session");
  // Sessions written before owners existed belong to no one.
  if (owner.empty() || owner == peer.owner) return Status::OK();
  if (peer.owner.starts_with("conn:"))
    return Status::PermissionDenied(
        "the session belongs to another client (this connection sent no Hello with a "
        "identity_secret, so it is its own owner)");
  return Status::PermissionDenied("the session belongs to another client");
}

Status Server::MayDrive(const Peer& peer, const fb::SessionT& session) const {
  Status st = MayDrive(peer, session.owner);
  if (st.ok()) return st;
  return Status::PermissionDenied("session " + std::to_string(session.id) + ": " + st.message());
}

bool Server::MayReadOthers(const Peer& peer) const {
  return !enforce_owners_ || peer.role == "admin" || options_.others_read != "none";
}

bool Server::MayReadOthersSources(const Peer& peer) const {
  return !enforce_owners_ || peer.role == "admin" || options_.others_read == "all";
}

std::string Server::QueryReply(uint64_t rid, const fb::QueryT& m, const Peer& viewer) {
  memory::Memory& mem = *services_.memory;
  const size_t limit = std::min<size_t>(m.limit == 0 ? options_.query_limit_max : m.limit,
                                        static_cast<size_t>(options_.query_limit_max));
  // Cursors point into lists of at most a few billion items; a larger one is past the end.
  const uint64_t cursor = std::min<uint64_t>(m.cursor, uint64_t{1} << 40);
  // Lists are read to one past the page, so that the reply knows whether another page follows.
  const size_t fetch = static_cast<size_t>(std::min<uint64_t>(cursor + limit + 1, SIZE_MAX / 2));
  // Room for the items of the reply; the rest is the envelope's.
  size_t budget = options_.reply_max_bytes > 4096 ? options_.reply_max_bytes - 4096 : 0;
  bool too_big = false;
  fb::QueryReplyT r;
  auto fail = [rid](const Status& st) { return EncodeError(rid, ErrorCodeFor(st), st.message()); };
  // A list, paged; or the one item the query names.
  auto list = [&](auto result, auto* out) -> Status {
    if (!result.ok()) return result.status();
    r.next_cursor = Page(*result, cursor, limit, &budget, &too_big);
    *out = Boxed(std::move(*result));
    return Status::OK();
  };
  auto one = [&](auto result, auto* out) -> Status {
    if (!result.ok()) return result.status();
    using T = typename std::decay_t<decltype(*result)>;
    out->push_back(std::make_unique<T>(std::move(*result)));
    return Status::OK();
  };
  uint64_t task_id = 0;
  if (!m.task.empty()) {
    auto t = mem.FindTask(m.task);
    if (!t.ok()) return fail(t.status());
    task_id = t->id;
  }
  // Sessions of other clients: hidden with server.others_read = none, their sources shown only
  // with all (admins see everything).
  const bool see_others = MayReadOthers(viewer);
  const bool see_others_sources = MayReadOthersSources(viewer);
  std::map<uint64_t, bool> others_cache;
  auto of_other = [&](uint64_t sid) {
    if (!enforce_owners_ || viewer.role == "admin" || sid == 0) return false;
    auto c = others_cache.find(sid);
    if (c != others_cache.end()) return c->second;
    auto s = mem.GetSession(sid, /*with_steps=*/false);
    bool other = s.ok() && !s->owner.empty() && s->owner != viewer.owner;
    others_cache.emplace(sid, other);
    return other;
  };
  const Status hidden = Status::PermissionDenied(
      "the session belongs to another client (server.others_read = none)");
  if (!see_others && m.session_id && of_other(m.session_id)) return fail(hidden);
  if (!see_others && m.kind == fb::QueryKind::Sessions && m.id && of_other(m.id))
    return fail(hidden);
  auto visible = [&](auto result, auto session_of) {
    if (result.ok() && !see_others)
      std::erase_if(*result, [&](const auto& x) { return of_other(session_of(x)); });
    return result;
  };
  Status st;
  switch (m.kind) {
    case fb::QueryKind::Directions:
      st = m.id ? one(mem.GetDirection(m.id), &r.directions)
                : list(mem.ListDirections(), &r.directions);
      break;
    case fb::QueryKind::Strategies:
      if (m.id) {
        st = one(mem.GetStrategy(m.id), &r.strategies);
      } else {
        memory::StrategyFilter f;
        f.direction_id = m.direction_id;
        f.backend = m.backend;
        f.limit = fetch;
        st = list(mem.ListStrategies(f), &r.strategies);
      }
      break;
    case fb::QueryKind::Transitions:
      if (m.id) {
        auto t = mem.GetTransition(m.id);
        if (t.ok() && !see_others && of_other(t->session_id)) return fail(hidden);
        st = one(std::move(t), &r.transitions);
      } else {
        st = list(visible(mem.ListTransitions(m.session_id, fetch),
                          [](const fb::TransitionRecordT& t) { return t.session_id; }),
                  &r.transitions);
      }
      break;
    case fb::QueryKind::Sessions:
      st = (m.id || m.session_id)
               ? one(mem.GetSession(m.id ? m.id : m.session_id), &r.sessions)
               : list(visible(mem.ListSessions(task_id, fetch),
                              [](const fb::SessionT& s) { return s.id; }),
                      &r.sessions);
      break;
    case fb::QueryKind::Tasks:
      if (m.id || task_id)
        st = one(mem.GetTask(m.id ? m.id : task_id), &r.tasks);
      else
        st = list(mem.ListTasks(), &r.tasks);
      break;
    case fb::QueryKind::BestCandidates:
      st = BestCandidates(mem, m, task_id, cursor, limit, see_others, see_others_sources, of_other,
                          &budget, &too_big, &r);
      break;
    case fb::QueryKind::Edges: st = list(mem.ListEdges(m.direction_id), &r.edges); break;
    default: return EncodeError(rid, fb::ErrorCode::InvalidArgument, "unknown query kind");
  }
  if (!st.ok()) return fail(st);
  if (too_big)
    return EncodeError(rid, fb::ErrorCode::InvalidArgument,
                       "the item at cursor " + std::to_string(cursor) +
                           " alone is larger than server.reply_max_bytes (" +
                           std::to_string(options_.reply_max_bytes) + " bytes)");
  return EncodeReply(rid, std::move(r));
}

void Server::OnStatus(const Peer& peer, uint64_t rid, const fb::StatusRequest& m) {
  fb::StatusReplyT r;
  r.text = StatusText(Str(m.section()), peer);
  Reply(peer, EncodeReply(rid, std::move(r)));
}

}  // namespace htam::server
