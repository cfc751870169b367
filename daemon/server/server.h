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
#include "daemon/config/sections.h"
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

// The server section of the configuration table, read once. A default-constructed one holds the
// table's defaults (config::TableDefaults): no default is written here.
struct ServerOptions {
  static const config::Server& D() { return config::TableDefaults<config::Server>(); }
  std::string bind = D().bind;
  bool allow_insecure_bind = D().allow_insecure_bind;
  bool curve = D().curve;
  std::string curve_secret_key_file = D().curve_secret_key_file;
  std::string curve_authorized_keys = D().curve_authorized_keys;
  std::string tasks_dir = ShippedPath(D().tasks_dir, "tasks");  // <prefix>/share/htam/tasks
  CodecLimits limits;
  int max_frames = int(D().max_frames);
  int poll_interval_ms = int(D().poll_interval_ms);
  int client_expiry_s = int(D().client_expiry_s);
  int max_wait_ms = int(D().max_wait_ms);
  int max_pending_jobs = int(D().max_pending_jobs);
  int result_retention = int(D().result_retention);
  int query_limit_max = int(D().query_limit_max);
  size_t reply_max_bytes = size_t(D().reply_max_bytes);
  int client_max_in_flight = int(D().client_max_in_flight);
  size_t client_max_queued_bytes = size_t(D().client_max_queued_bytes);
  int busy_retry_ms = int(D().busy_retry_ms);
  // memory.max_speedup: a Record above it is refused at the door
  double max_speedup = config::TableDefaults<config::Memory>().max_speedup;
  std::string others_read = D().others_read;  // none | records | all
  bool owners_without_curve = D().owners_without_curve;
  std::string data_dir;  // general.data_dir, named in store fault logs
  int auth_log_interval_s = int(D().auth_log_interval_s);
  int send_hwm = int(D().send_hwm);
  size_t client_max_unread_bytes = size_t(D().client_max_unread_bytes);
  int recv_hwm = int(D().recv_hwm);
  int max_clients = int(D().max_clients);
  int batch_max = int(D().batch_max);
  int shutdown_grace_ms = int(D().shutdown_grace_ms);
  int read_threads = int(D().read_threads);
  bool inline_next_step = bool(D().inline_next_step);

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
    // Bytes this request counts against its client's bound until its final reply (0: not
    // counted: progress events, replies to requests refused at the door).
    size_t held_bytes = 0;
    // Who sent it: the owner string sessions are held to ("key:<Z85>" under CURVE; without
    // it "id:<hex>" from the Hello's identity_secret, else "conn:<hex routing id>") and its role
    // (read, agent, admin).
    std::string owner;
    std::string role = "admin";
  };
  enum class ReplyKind { kFinal, kError, kProgress };  // progress replies are not observed
  struct ClientInfo {
    std::string name, user, version;
    // Without CURVE: "id:<hex>" derived from the identity_secret of this connection's last
    // Hello (empty: none sent; the connection is its own owner). The secret is not kept.
    std::string secret_owner;
    int64_t first_seen_ms = 0, last_seen_ms = 0;
    uint64_t requests = 0, errors = 0;
    // Requests read and not yet finally answered, and their bytes (server.client_max_*).
    int in_flight = 0;
    size_t queued_bytes = 0;
    uint64_t busy = 0;  // requests refused for being over those bounds
    // Replies ZeroMQ would not take (the client's pipe holds server.send_hwm unread ones),
    // oldest first, with their bytes (server.client_max_unread_bytes), and how many of them
    // were dropped over that bound.
    std::deque<std::pair<bool, std::string>> outbox;  // (delimiter, payload)
    // What one held reply costs besides its payload: its entry and the allocator's header.
    static constexpr size_t kHeldReplyOverhead = sizeof(std::pair<bool, std::string>) + 16;
    size_t outbox_bytes = 0;
    uint64_t unread_dropped = 0;
  };
  struct Waiter {
    Peer peer;
    uint64_t request_id = 0;
    int64_t deadline_ms = 0;  // 0: until done
  };
  struct Job {
    uint64_t job_id = 0, session_id = 0, direction_id = 0;
    uint64_t request_id = 0;  // of the Submit (its log lines carry it); 0 for a resumed job
    std::string owner;  // the session's owner: who may Poll
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
  // Notes the outcome of a store write: logs a store fault once when it starts (with the data
  // directory), and once when writes succeed again.
  void NoteStoreWrite(const Status& st);
  void Tick();
  void Reply(const Peer& peer, const std::string& payload, ReplyKind kind = ReplyKind::kFinal);
  // Hands one reply to ZeroMQ; false when the client's pipe is full (it has server.send_hwm
  // replies it has not read). Throws zmq::error_t when the client is gone.
  bool SendFrames(const std::string& identity, bool delimiter, const std::string& payload);
  // Holds a reply ZeroMQ would not take, within server.client_max_unread_bytes for the client
  // (its oldest held replies are dropped to make room).
  void HoldUnread(const std::string& identity, bool delimiter, std::string payload);
  // Sends what the clients' pipes take now of their held replies, oldest first.
  void FlushOutboxes();
  void ReplyError(const Peer& peer, uint64_t request_id, fb::ErrorCode code, std::string_view msg);
  void ReplyStatus(const Peer& peer, uint64_t request_id, const Status& st);

  // Runs `work` on a reader thread (or inline without readers); its reply goes to `peer`.
  // inline_ok: the read is short (a NextStep) and may run on the loop itself when no other read
  // is queued or running (server.inline_next_step), which keeps replies in request order.
  void RunRead(const Peer& peer, uint64_t request_id, std::function<std::string()> work,
               bool inline_ok = false) EXCLUDES(read_mu_);
  void ReaderLoop() EXCLUDES(read_mu_, results_mu_);
  void SendReadyReplies() EXCLUDES(results_mu_);
  std::string NextStepReply(uint64_t rid, uint64_t session_id, std::vector<float> embedding,
                            fb::Bottleneck bottleneck, bool full = false);
  std::string QueryReply(uint64_t rid, const fb::QueryT& q, const Peer& viewer);

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

  // Whether `peer` may drive `session` (resume, NextStep, Submit, Record, Close, Poll): its
  // owner, an admin, or anyone when owners are not enforced; PermissionDenied otherwise.
  Status MayDrive(const Peer& peer, const fb::SessionT& session) const;
  Status MayDrive(const Peer& peer, const std::string& owner) const;
  // Whether `peer` may read sessions it does not own (server.others_read), and their sources.
  bool MayReadOthers(const Peer& peer) const;
  bool MayReadOthersSources(const Peer& peer) const;
  // The direction (required) and strategies a step names exist in the store; the error names
  // the field ("Submit.direction_id").
  Status CheckStepIds(const char* message, uint64_t direction_id,
                      const flatbuffers::Vector<uint64_t>* strategy_ids);
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
  std::string StatusText(const std::string& section, const Peer& viewer);
  uint64_t NextJobId();

  ServerOptions options_;
  Services services_;
  zmq::context_t context_;
  std::unique_ptr<zmq::socket_t> front_;
  std::unique_ptr<zmq::socket_t> results_pull_;
  // Handshake failures of the front socket (its monitor): counted by reason, logged at most
  // once per server.auth_log_interval_s per reason.
  std::unique_ptr<zmq::socket_t> monitor_;
  struct Refusals {
    uint64_t total = 0, unlogged = 0;
    int64_t last_log_ms = 0;
  };
  std::map<std::string, Refusals> refused_handshakes_;
  void DrainMonitor();
  std::unique_ptr<auth::ZapHandler> zap_;
  std::map<std::string, std::string> roles_;  // CURVE key -> role (keys file)
  bool enforce_owners_ = false;
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

  // Reader threads: memory reads (NextStep, Query) off the loop, taken round-robin over the
  // clients that have reads waiting, so that one client's many reads never queue ahead of
  // another client's one.
  Mutex read_mu_ ACQUIRED_BEFORE(results_mu_);
  CondVar read_cv_;
  using ReadItem = std::pair<Peer, std::function<std::string()>>;
  std::unordered_map<std::string, std::deque<ReadItem>> read_queues_ GUARDED_BY(read_mu_);
  std::deque<std::string> read_order_ GUARDED_BY(read_mu_);  // identities with reads waiting
  bool readers_stop_ GUARDED_BY(read_mu_) = false;
  size_t reads_running_ GUARDED_BY(read_mu_) = 0;  // taken by a reader thread, reply not yet queued
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
  uint64_t busy_total_ = 0;
  uint64_t unread_dropped_total_ = 0;   // replies dropped over server.client_max_unread_bytes
  std::set<std::string> outboxed_;      // clients with held replies (FlushOutboxes)
  int64_t last_trim_ms_ = 0;  // last malloc_trim (Tick)
  // The store fault last logged (DiskFull, IoError, MapFull; None while writes succeed): each
  // is logged once when it starts, not once per failed write.
  fb::ErrorCode store_fault_ = fb::ErrorCode::None;
  uint64_t store_faults_total_ = 0;
};

}  // namespace htam::server
