// SHA-256 of byte strings, as lowercase hex: content hashes of candidates and compile-cache keys.
// Self-contained (no OpenSSL) so that plugins can link it without pulling host libraries.
// Thread-safety: stateless functions; a Sha256 object needs external synchronization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace htam {

class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  // Finishes and returns 64 hex characters; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string Sha256Hex(std::string_view data);

}  // namespace htam
