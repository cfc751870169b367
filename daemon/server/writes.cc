// The write batcher: the steps of a loop turn (Record requests and evaluation results) are
// recorded in one synced memory transaction, then each is answered.
// Thread-safety: loop thread only.
#include "daemon/server/server_impl.h"

namespace htam::server {

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
    NoteStoreWrite(rec.status());
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
    r.profile = std::make_unique<fb::ProfileT>(fb::ProfileOf(e));
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

void Server::NoteStoreWrite(const Status& st) {
  const fb::ErrorCode code = st.ok() ? fb::ErrorCode::None : ErrorCodeFor(st);
  const bool fault = code == fb::ErrorCode::DiskFull || code == fb::ErrorCode::IoError ||
                     code == fb::ErrorCode::MapFull;
  if (!st.ok() && !fault) return;  // a refused request, not the store
  if (fault) store_faults_total_++;
  if (code == store_fault_) return;
  if (fault) {
    HTAM_LOG(kError, kComponent) << "store fault " << fb::EnumNameErrorCode(code) << " in data dir "
                                 << options_.data_dir << ": " << st.message()
                                 << " (writes are refused until it clears; logged once)";
  } else {
    HTAM_LOG(kWarn, kComponent) << "store writes succeed again in data dir " << options_.data_dir
                                << " after " << fb::EnumNameErrorCode(store_fault_);
  }
  store_fault_ = code;
}

}  // namespace htam::server
