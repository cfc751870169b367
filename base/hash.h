// Content hashes, defined once for all of htam: SHA-256 (libsodium) in hex. Every key that names
// stored content (a candidate, a task specification, a compile-cache entry) comes from here, so
// the key a client is given is the key the store uses.
// Thread-safety: functions are reentrant; a Sha256 object is used by one thread.
#pragma once

#include <sodium.h>

#include <string>
#include <string_view>

namespace htam {

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  // Finishes and returns 64 hex characters; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  crypto_hash_sha256_state state_;
};

// Hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// The key of a candidate: SHA-256 of language, a newline, and the source.
std::string CandidateKey(std::string_view language, std::string_view source);

// The key of a task specification: SHA-256 of its task.json text.
inline std::string SpecKey(std::string_view task_json) {
  return Sha256Hex(task_json);
}

}  // namespace htam
