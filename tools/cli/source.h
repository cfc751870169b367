// Where the CLI reads the memory from: the store directly (read-only LMDB readers, safe while
// htamd runs) or a running daemon (Query and Status messages through the C++ SDK).
// Thread-safety: external synchronization required (the CLI is single-threaded).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/memory/memory.h"

namespace htam::cli {

namespace fb = ::htam::fb;

class Source {
 public:
  virtual ~Source() = default;
  virtual std::string where() const = 0;  // "store /x/store" or "daemon tcp://..."
  virtual bool remote() const = 0;

  virtual Result<std::string> StatusText() = 0;  // INFO-style sections
  virtual Result<std::vector<fb::DirectionT>> Directions() = 0;
  virtual Result<std::vector<fb::TransitionEdgeT>> Edges() = 0;
  // direction 0 = all; backend "" = any.
  virtual Result<std::vector<fb::StrategyT>> Strategies(uint64_t direction,
                                                        const std::string& backend,
                                                        bool include_merged) = 0;
  virtual Result<std::vector<fb::TaskT>> Tasks() = 0;
  virtual Result<std::vector<fb::SessionT>> Sessions() = 0;  // newest first
  virtual Result<std::vector<fb::TransitionRecordT>> Transitions(
      uint64_t session) = 0;  // step order

  virtual Result<fb::DirectionT> Direction(uint64_t id) = 0;
  virtual Result<fb::StrategyT> Strategy(uint64_t id) = 0;
  virtual Result<fb::TransitionRecordT> Transition(uint64_t id) = 0;
  virtual Result<fb::SessionT> Session(uint64_t id) = 0;
  virtual Result<fb::TaskT> Task(uint64_t id) = 0;
  virtual Result<fb::CandidateT> Candidate(const std::string& hash) = 0;

  // The local memory (nullptr for a daemon): explain, check and the like need it.
  virtual memory::Memory* local() { return nullptr; }
};

// The store directory of a data directory, as the memory library lays it out (DATA/store).
std::string StoreDir(const std::string& data_dir);

// Opens DATA/store read-only. A missing or damaged store is a clear error.
Result<std::unique_ptr<Source>> OpenLocal(const std::string& data_dir);
// Connects to htamd (Hello first, so a wrong endpoint fails here). timeout_ms bounds each call.
// CURVE: server_key_file = the server's NAME.pub, client_key_file = this client's NAME.key
// (htam-keygen); both empty = plain connection.
Result<std::unique_ptr<Source>> OpenRemote(const std::string& endpoint, int timeout_ms,
                                           const std::string& server_key_file = "",
                                           const std::string& client_key_file = "");

}  // namespace htam::cli
