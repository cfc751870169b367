// htamd's front: one ROUTER socket and one poll loop. Requests are checked by the codec, answered
// from the memory library, and evaluations are handed to the evaluator; their results come back
// to the loop over an inproc socket, where the memory write happens and waiting clients are
// answered, so a slow evaluation never blocks anyone else.
// Thread-safety: Start() and Run() are called from one thread; Stop() may be called from any.
// Inside, the state shared with reader and evaluator threads is marked GUARDED_BY and checked by
// clang's -Wthread-safety (ctest label lint); the rest belongs to the loop thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "base/paths.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "daemon/config/config.h"
#include "daemon/server/codec.h"

namespace htam::server {
class Metrics;
}
namespace htam::memory {
class Memory;
struct StepInput;
}  // namespace htam::memory
namespace htam::fb {
struct JobResultT;
}  // namespace htam::fb
namespace htam::eval {
class Evaluator;
using EvalResult = fb::JobResultT;  // daemon/eval/evaluator.h
}  // namespace htam::eval

namespace htam::auth {
class ZapHandler;
}  // namespace htam::auth

namespace htam::server {

// What the server calls into. Not owned; either may be null (requests needing it then get an
// Unavailable error).
struct Services {
  memory::Memory* memory = nullptr;
  eval::Evaluator* evaluator = nullptr;
  Metrics* metrics = nullptr;  // counts requests and outcomes when set (server.metrics_endpoint)
};

// The server section of the configuration table, read once.
struct ServerOptions {
  std::string bind = "tcp://127.0.0.1:7878";
  bool allow_insecure_bind = false;
  bool curve = false;
  std::string curve_secret_key_file;
  std::string curve_authorized_keys;
  std::string tasks_dir = ShippedPath("", "tasks");  // default: <prefix>/share/htam/tasks
  CodecLimits limits;
  int max_frames = 3;
  int poll_interval_ms = 100;
  int client_expiry_s = 300;
  int max_wait_ms = 600000;
  int max_pending_jobs = 1024;
  int result_retention = 4096;
  int query_limit_max = 10000;
  int send_hwm = 10000;
  int max_clients = 10000;
  int batch_max = 256;
  int shutdown_grace_ms = 10000;
  int read_threads = 4;

  static ServerOptions FromConfig(const Config& config);
};

class Server {
 public:
  Server(ServerOptions options, Services services);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Checks the security settings, starts the ZAP handler (CURVE) and binds the sockets.
  Status Start();
  // Serves until Stop() is called, then waits (up to shutdown_grace_ms) for evaluations in
  // flight, records their results and returns.
  Status Run();
  // Safe from any thread and from a signal-driven flag check; Run() returns soon after.
  void Stop() { stop_.store(true); }
  // Also stop when *flag becomes true (set by a signal handler). Call before Run().
  void StopWhen(const std::atomic<bool>* flag) { external_stop_ = flag; }
  // The endpoint actually bound (resolves a wildcard port).
  const std::string& endpoint() const { return endpoint_; }

 private:
  struct Peer {
    std::string identity;
    bool delimiter = false;  // REQ-style client: an empty frame before the payload
    // The request this reply answers, for metrics: its body type (0: undecodable) and when it
    // was received (steady clock, microseconds).
    int kind = 0;
    int64_t received_us = 0;
  };
  enum class ReplyKind { kFinal, kError, kProgress };  // progress replies are not observed
  struct ClientInfo {
    std::string name, user, version;
    int64_t first_seen_ms = 0, last_seen_ms = 0;
    uint64_t requests = 0, errors = 0;
  };
  struct Waiter {
    Peer peer;
    uint64_t request_id = 0;
    int64_t deadline_ms = 0;  // 0: until done
  };
  struct Job {
    uint64_t job_id = 0, session_id = 0, direction_id = 0;
    uint64_t request_id = 0;  // of the Submit (its log lines carry it); 0 for a resumed job
    std::vector<uint64_t> strategy_ids;
    std::string summary, language, source, candidate_hash;
    int64_t submitted_ms = 0;
    std::vector<Waiter> waiters;
    std::vector<Waiter> progress;
  };
  struct PendingWrite;  // a step to record at the end of the batch

  // Loop pieces.
  void HandleFront(std::vector<zmq::message_t>& parts);
  void Dispatch(const Peer& peer, const fb::Envelope& env, ClientInfo* client);
  void DrainResults();
  void FlushWrites();
  void Tick();
  void Reply(const Peer& peer, const std::string& payload, ReplyKind kind = ReplyKind::kFinal);
  void ReplyError(const Peer& peer, uint64_t request_id, fb::ErrorCode code, std::string_view msg);
  void ReplyStatus(const Peer& peer, uint64_t request_id, const Status& st);

  // Runs `work` on a reader thread (or inline without readers); its reply goes to `peer`.
  void RunRead(const Peer& peer, uint64_t request_id, std::function<std::string()> work)
      EXCLUDES(read_mu_);
  void ReaderLoop() EXCLUDES(read_mu_, results_mu_);
  void SendReadyReplies() EXCLUDES(results_mu_);
  std::string NextStepReply(uint64_t rid, uint64_t session_id, std::vector<float> embedding,
                            fb::Bottleneck bottleneck);
  std::string QueryReply(uint64_t rid, const fb::QueryT& q);

  // Requests.
  void OnHello(const Peer& peer, uint64_t rid, const fb::Hello& m, ClientInfo* client);
  void OnOpenSession(const Peer& peer, uint64_t rid, const fb::OpenSession& m);
  void OnNextStep(const Peer& peer, uint64_t rid, const fb::NextStep& m);
  void OnSubmit(const Peer& peer, uint64_t rid, const fb::Submit& m);
  void OnPoll(const Peer& peer, uint64_t rid, const fb::Poll& m);
  void OnRecord(const Peer& peer, uint64_t rid, const fb::Record& m);
  void OnCloseSession(const Peer& peer, uint64_t rid, const fb::CloseSession& m);
  void OnQuery(const Peer& peer, uint64_t rid, const fb::Query& m);
  void OnStatus(const Peer& peer, uint64_t rid, const fb::StatusRequest& m);

  // Loads configs/tasks/<name>/task.json into the store (upsert); falls back to the store.
  Result<uint64_t> ResolveTask(const std::string& name);
  void CompleteJob(const eval::EvalResult& result);
  // Jobs the evaluator kept queued across a restart: tracked again and resubmitted (Run start).
  void ResumeJobs();
  static std::string EncodeJobContext(const Job& job);
  static bool DecodeJobContext(const std::string& text, Job* job);
  // The evaluator's completion callback: hands a result to the loop (any thread).
  std::function<void(eval::EvalResult)> ResultSink();
  // The evaluator's stage reports for a job whose client asked for progress (Submit.progress).
  std::function<void(uint64_t, const std::string&, const std::string&)> StageSink();
  void AnswerJob(Job& job, const fb::ResultT& result);
  void RememberResult(const fb::ResultT& result);
  std::string StatusText(const std::string& section);
  uint64_t NextJobId();

  ServerOptions options_;
  Services services_;
  zmq::context_t context_;
  std::unique_ptr<zmq::socket_t> front_;
  std::unique_ptr<zmq::socket_t> results_pull_;
  std::unique_ptr<auth::ZapHandler> zap_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  const std::atomic<bool>* external_stop_ = nullptr;

  // Completed evaluations handed over by evaluator threads.
  Mutex results_mu_;
  std::unique_ptr<zmq::socket_t> results_push_ GUARDED_BY(results_mu_);
  std::deque<std::unique_ptr<eval::EvalResult>> results_ GUARDED_BY(results_mu_);
  // Stages reported by evaluator threads (job, stage, message), sent before the results that
  // follow them.
  std::deque<std::tuple<uint64_t, std::string, std::string>> stages_ GUARDED_BY(results_mu_);

  // Reader threads: memory reads (NextStep, Query) off the loop.
  Mutex read_mu_ ACQUIRED_BEFORE(results_mu_);
  CondVar read_cv_;
  std::deque<std::pair<Peer, std::function<std::string()>>> read_queue_ GUARDED_BY(read_mu_);
  bool readers_stop_ GUARDED_BY(read_mu_) = false;
  std::vector<std::thread> readers_;  // loop thread (started in Start, joined in Run or ~Server)
  // Replies the readers produced, sent by the loop.
  std::deque<std::pair<Peer, std::string>> ready_ GUARDED_BY(results_mu_);

  // Loop-thread state.
  std::unordered_map<std::string, ClientInfo> clients_;
  std::map<uint64_t, Job> jobs_;          // in flight
  std::map<uint64_t, fb::ResultT> done_;  // finished, for Poll
  std::deque<uint64_t> done_order_;
  std::vector<std::unique_ptr<PendingWrite>> writes_;
  std::set<std::string> peers_with_writes_;
  uint64_t job_counter_ = 0;
  int64_t started_ms_ = 0;
  uint64_t requests_total_ = 0, errors_total_ = 0, malformed_total_ = 0, dropped_total_ = 0;
  uint64_t evaluations_total_ = 0, records_total_ = 0, write_batches_ = 0;
};

}  // namespace htam::server
