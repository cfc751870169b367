// Private to the server's files (server.cc, handlers.cc, readers.cc, jobs.cc, writes.cc,
// info.cc): the headers they share, small helpers, and the pending-write record.
// Thread-safety: the helpers are pure functions; a PendingWrite belongs to the loop thread.
#pragma once

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
#include "daemon/server/server.h"
#include "daemon/server/task_loader.h"
#ifdef HTAM_SERVER_HAVE_EVAL
#include "base/clock.h"
#include "base/endpoint.h"
#include "daemon/common/language.h"
#include "daemon/eval/evaluator.h"
#else
#include "htam/schema/job_result.h"  // EvalResult is the schema's JobResultT (server.h)
#endif

namespace htam::server {

inline constexpr const char* kComponent = "server";

inline std::string Str(const flatbuffers::String* s) {
  return s ? s->str() : std::string();
}

template <typename T>
std::vector<std::unique_ptr<T>> Boxed(std::vector<T>&& items) {
  std::vector<std::unique_ptr<T>> out;
  out.reserve(items.size());
  for (auto& it : items) out.push_back(std::make_unique<T>(std::move(it)));
  return out;
}

// A ZeroMQ routing id in hex, whole (the owner of sessions opened without CURVE).
inline std::string HexId(const std::string& identity) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

// A printable form of a ZeroMQ routing id for logs.
inline std::string PeerName(const std::string& identity) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity.substr(0, 8)) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

struct Server::PendingWrite {
  Peer peer;
  uint64_t request_id = 0;
  uint64_t job_id = 0;  // non-zero: an evaluation result
  std::unique_ptr<eval::EvalResult> eval;
  memory::StepInput input;
};

}  // namespace htam::server
