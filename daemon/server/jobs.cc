// Evaluation jobs: the context a durable queue keeps, the evaluator's result and stage sinks,
// jobs resumed after a restart, results turned into pending writes, and the answers to the
// clients waiting on a job (Submit.wait, Poll, Submit.progress).
// Thread-safety: ResultSink and StageSink return callbacks that evaluator threads call; they only
// queue under results_mu_. Everything else runs on the loop thread.
#include "daemon/server/server_impl.h"

namespace htam::server {

// What the loop needs to record a job's result, kept by a durable evaluator queue across restarts.
std::string Server::EncodeJobContext(const Job& job) {
  nlohmann::json j{{"direction_id", job.direction_id},
                   {"strategy_ids", job.strategy_ids},
                   {"summary", job.summary},
                   {"language", job.language},
                   {"candidate_hash", job.candidate_hash}};
  // Requests are checked for UTF-8 at the door; replacing any bad byte here still keeps a
  // surprise from ending the loop.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

std::function<void(eval::EvalResult)> Server::ResultSink() {
  return [this](eval::EvalResult r) {
    // Evaluator thread: hand the result to the loop; never touch loop state here.
    MutexLock lock(&results_mu_);
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
    MutexLock lock(&results_mu_);
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
    MutexLock lock(&results_mu_);
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
    w->request_id = j.request_id;
    memory::StepInput& in = w->input;
    in.session_id = j.session_id;
    in.direction_id = j.direction_id;
    in.strategy_ids = j.strategy_ids;
    in.summary = j.summary;
    in.status = r->status;
    in.speedup_after = r->speedup;
    in.median_us = r->median_us;
    in.spread_us = r->spread_us;
    in.profile = fb::ProfileOf(*r);
    in.verified = true;
    in.candidate_hash = r->candidate_hash.empty() ? j.candidate_hash : r->candidate_hash;
    in.language = j.language;
    in.source = j.source;
    in.diagnostics = r->diagnostics;
    // A profiled candidate's measured class is the state of the session's next steps: the
    // memory keeps it in the session (this step's state is the one it started from).
    in.measured_bottleneck = r->bottleneck;
    w->eval = std::move(r);
    writes_.push_back(std::move(w));
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

uint64_t Server::NextJobId() {
  return ++job_counter_;
}

}  // namespace htam::server
