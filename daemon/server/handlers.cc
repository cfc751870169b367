// The request handlers: one On<Request> per message of docs/protocol.md. Reads that may be slow
// (NextStep, Query) build their reply on a reader thread (readers.cc); Submit hands the candidate
// to the evaluator and tracks the job (jobs.cc); Record joins the write batch (writes.cc).
// Thread-safety: the On* handlers run on the loop thread and may touch loop state; NextStepReply
// and QueryReply run on reader threads and touch only the memory (itself thread-safe) and the
// options.
#include "daemon/server/server_impl.h"

#include "base/text.h"

namespace htam::server {

void Server::OnHello(const Peer& peer, uint64_t rid, const fb::Hello& m, ClientInfo* client) {
  // Shown in Status lines and logs: a name cannot bring lines of its own.
  client->name = EscapeForLine(Str(m.client()));
  client->version = EscapeForLine(Str(m.client_version()));
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
  // The client's measurement of its current kernel; Unknown lets the memory take what htamd
  // profiled for the session (Session.measured_bottleneck).
  fb::Bottleneck b = fb::Bottleneck::Unknown;
  // (a value this build does not know is ignored)
  if (static_cast<int>(m.bottleneck()) > static_cast<int>(fb::Bottleneck::Unknown) &&
      static_cast<int>(m.bottleneck()) <= static_cast<int>(fb::Bottleneck::MAX))
    b = m.bottleneck();
  RunRead(peer, rid, [this, rid, sid, b, emb = std::move(embedding)]() mutable {
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
  job.request_id = rid;
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
  peers_with_writes_.insert(peer.identity);
  writes_.push_back(std::move(w));
}

void Server::OnCloseSession(const Peer& peer, uint64_t rid, const fb::CloseSession& m) {
  if (!services_.memory) return ReplyError(peer, rid, fb::ErrorCode::Unavailable, "no memory");
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
  RunRead(peer, rid, [this, rid, q] { return QueryReply(rid, *q); });
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

}  // namespace htam::server
