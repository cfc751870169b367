// htam C++ client SDK (library htam_client): talks to htamd over ZeroMQ (DEALER) with the
// FlatBuffers messages of schema/protocol.fbs (docs/protocol.md). Every call exists in a
// synchronous form (returns Result<T>) and an asynchronous form (callback or std::future).
//
// Timeouts and reconnection: each request has a deadline (ClientOptions::timeout or the call's
// own). When it passes, the call fails with Status::Timeout and the client drops the socket it
// used (and its idle ones) and connects afresh (lazy pirate), so a restarted daemon is picked up
// by the next call and a late reply never answers a later request. Requests that are safe to
// repeat (Hello, NextStep, Poll, Query, Status, reopening a session) are retried up to
// ClientOptions::retries times first, each try on a fresh socket; Submit, Record, CloseSession
// and OpenSession of a new session are never repeated behind the caller's back.
//
// Threading: a Client is safe for concurrent use by many threads.
//  - Synchronous calls run on the calling thread: it takes a DEALER socket from the Client's pool
//    (a new one, connected with the same options and CURVE keys, when none is idle), sends, waits
//    for the reply with its request id, and returns the socket to the pool. No other thread of
//    the Client is involved, so concurrent callers each use a connection of their own, and the
//    pool holds as many sockets as calls were ever in flight at once. Exceptions, which go through
//    the I/O thread below: Submit/SubmitAndWait with progress = true (Progress events go to
//    on_progress); Poll when on_progress is set (the job's Progress events come on the I/O
//    thread's connection, so they have been handled when Poll returns the result); and any
//    synchronous call made while a write (Record, Submit, CloseSession, a new OpenSession) sent
//    through the I/O thread is unanswered (so that the daemon still handles that write first, as
//    it does for the requests of one connection).
//  - Asynchronous calls (CallAsync, *Async) go through one I/O thread per Client, which owns one
//    more socket; callbacks (and on_progress) run on that thread: they must not block and must
//    not call the synchronous methods of the same Client.
//  - All Clients of a process share one ZeroMQ context, i.e. one ZeroMQ I/O thread (a child made
//    by fork() gets its own for the Clients it creates; it cannot use its parent's Clients).
//  - Each new connection first sends a Hello (not waited for), so htamd's status names it and,
//    without CURVE, binds it to this Client's identity_secret: sessions opened over any of the
//    Client's connections are its own.
// A Client must not be destroyed while calls on it are running.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "htam/schema/protocol_generated.h"
#include "htam/status.h"

namespace htam {

struct ClientOptions {
  std::string endpoint = "tcp://127.0.0.1:7878";    // htamd's server.bind
  std::chrono::milliseconds timeout{30000};         // default deadline of one request
  std::chrono::milliseconds connect_timeout{5000};  // Connect(): the Hello handshake
  int retries = 2;                                  // extra tries of idempotent requests
  std::string client_name = "htam-cpp";             // shown in htamd's status and logs
  // CURVE (all three set, or none): the server's public key and this client's key pair, Z85.
  std::string server_public_key;
  std::string client_public_key;
  std::string client_secret_key;
  // Alternatively, files written by htam-keygen: NAME.pub of the server, NAME.key of the client.
  std::string server_public_key_file;
  std::string client_key_file;
  // Without CURVE, htamd holds a session to the client that opened it by this secret, sent in
  // the Hello of every connection the Client opens (its pool, its reconnects): 16 to 64 bytes;
  // empty (the default): HTAM_IDENTITY_SECRET (hex) where set, else 16 random bytes drawn at
  // Connect. Clients that should own the same sessions (processes of one tool, a process that
  // resumes its session after a restart) share one; keep it as private as a password.
  std::string identity_secret;
  // Called (on the I/O thread) for Progress events of Submit(..., progress = true).
  std::function<void(const fb::ProgressT&)> on_progress;
};

struct OpenSessionArgs {
  std::string task;  // task name in htamd's task suite (server.tasks_dir)
  std::string backend = "cpu";
  std::string arch;         // "" = any device of the backend
  uint32_t budget = 0;      // steps; 0 = unlimited
  std::string model;        // the LLM that writes candidates
  uint64_t session_id = 0;  // non-zero: resume this session instead (task etc. ignored)
};

struct SubmitArgs {
  uint64_t session_id = 0;
  std::string source;
  std::string language;       // "" = the session backend's language
  uint64_t direction_id = 0;  // the direction this candidate followed
  std::vector<uint64_t> strategy_ids;
  std::string summary;    // one line: what the candidate does differently
  bool progress = false;  // receive Progress events (ClientOptions::on_progress)
  // When the candidate is Ok, also profile its one call with Nsight Compute (htamd's eval.ncu):
  // Result.profile gets dram_throughput, sm_throughput and occupancy (fractions of peak) and the
  // diagnostics name the bottleneck class; without ncu they say "profile unavailable: ...".
  bool profile = false;
};

struct RecordArgs {
  uint64_t session_id = 0;
  uint64_t direction_id = 0;
  std::vector<uint64_t> strategy_ids;
  std::string summary;
  fb::OutcomeStatus status = fb::OutcomeStatus::Ok;  // what the client measured; stored unverified
  float speedup_after = 0;
  double median_us = 0;
  std::string source;
};

class Client {
 public:
  // Connects and performs Hello (so a bad endpoint, key or version fails here, not later).
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // What the daemon said at Connect (protocol/server version, capabilities, backends, devices).
  const fb::HelloReplyT& server() const;

  // ---- synchronous calls ----
  Result<fb::HelloReplyT> Hello();
  Result<fb::SessionInfoT> OpenSession(const OpenSessionArgs& args);
  Result<fb::StepT> NextStep(uint64_t session_id, const std::vector<float>& embedding = {});
  // full: every strategy of memory.top_k_strategies with its text, and all the evidence (the
  // default answer is compact: memory.listed_strategies, the first few with their text).
  Result<fb::StepT> NextStep(uint64_t session_id, const std::vector<float>& embedding, bool full);
  // Queues an evaluation; returns at once with the job id.
  Result<fb::SubmitAckT> Submit(const SubmitArgs& args);
  // Evaluates and waits for the outcome (up to `wait`; then Timeout, and Poll can continue).
  Result<fb::ResultT> SubmitAndWait(const SubmitArgs& args, std::chrono::milliseconds wait);
  // The job's result; done = false while it runs. wait > 0 waits on the daemon up to that long.
  Result<fb::ResultT> Poll(uint64_t job_id, std::chrono::milliseconds wait = {});
  // Reports an outcome measured elsewhere; stored as Unverified. Returns the transition id.
  Result<uint64_t> Record(const RecordArgs& args);
  Result<fb::SessionT> CloseSession(uint64_t session_id);
  Result<fb::QueryReplyT> Query(const fb::QueryT& query);
  // INFO-style text; section "" = all (server, clients, memory, evaluation).
  Result<std::string> ServerStatus(const std::string& section = "");

  // ---- asynchronous calls ----
  // Sends any request body and calls `done` with the reply envelope (or an error Status: the
  // daemon's Error reply is turned into a Status). `timeout` zero = ClientOptions::timeout.
  using EnvelopeCallback = std::function<void(Result<std::unique_ptr<fb::EnvelopeT>>)>;
  void CallAsync(fb::BodyUnion body, EnvelopeCallback done, std::chrono::milliseconds timeout = {});
  std::future<Result<fb::StepT>> NextStepAsync(uint64_t session_id);
  std::future<Result<fb::SubmitAckT>> SubmitAsync(const SubmitArgs& args);
  std::future<Result<fb::ResultT>> PollAsync(uint64_t job_id, std::chrono::milliseconds wait);

  // Requests sent but not yet answered.
  size_t in_flight() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  template <typename T>
  Result<T> Call(fb::BodyUnion body, std::chrono::milliseconds timeout = {});
  std::unique_ptr<Impl> impl_;
};

// The wire ErrorCode of an Error reply, as a Status (Busy → ResourceExhausted, ...).
Status StatusFromError(const fb::ErrorT& error);

}  // namespace htam
