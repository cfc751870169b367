// The hashes of htam, each defined once and named for what it is for:
// - content keys: SHA-256 (libsodium) in hex. Every key that names stored content (a candidate, a
//   task specification, a compile-cache entry) comes from here, so the key a client is given is
//   the key the store uses;
// - index keys: IndexKey64, 64 bits, for the slot of a feature in an embedding, of a category in
//   a transition key, of a query in the retrieval cache;
// - file checksums: Checksum64, 64 bits, fast over large files (the index snapshots).
// The two 64-bit ones are stored (in embeddings, transition keys and snapshot files): a store
// opens and answers the same only while they stay bit for bit (hash_test.cc pins them).
// Thread-safety: functions are reentrant; a Sha256 object is used by one thread.
#pragma once

#include <sodium.h>

#include <cstddef>
#include <cstdint>
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

// Whether `key` has the form of a content key: 64 lowercase hex digits (what Sha256Hex and
// CandidateKey return). For keys that come from outside (a job from a peer).
bool IsContentKey(std::string_view key);

// The key of a task specification: SHA-256 of its task.json text.
inline std::string SpecKey(std::string_view task_json) {
  return Sha256Hex(task_json);
}

// The basis IndexKey64 starts from. FNV's published basis is 14695981039346656037; htam's
// stored embeddings were made with this one, so it stays.
inline constexpr uint64_t kIndexKeyBasis = 1469598103934665603ull;

// An index key: FNV-1a's byte step (xor, then times 1099511628211) over `bytes`, from `basis`.
// Passing a key as the basis continues it: IndexKey64(b, IndexKey64(a)) == IndexKey64(a + b).
// Not for content (SHA-256) and not for checksums of large files (Checksum64: faster).
constexpr uint64_t IndexKey64(std::string_view bytes, uint64_t basis = kIndexKeyBasis) {
  for (unsigned char c : bytes) basis = (basis ^ c) * 1099511628211ull;
  return basis;
}

// A checksum of `n` bytes: four multiply-xor lanes over 8-byte words, then the tail byte by byte
// and a final mix; `seed` chains a checksum over consecutive pieces of one file. Not
// cryptographic: it finds damage, not tampering.
uint64_t Checksum64(const void* data, size_t n, uint64_t seed = 0);

}  // namespace htam
