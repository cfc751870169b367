// SHA-256 through libsodium, and the 64-bit checksum; see hash.h.
#include "base/hash.h"

#include <cstring>

namespace htam {

Sha256::Sha256() {
  crypto_hash_sha256_init(&state_);
}

void Sha256::Update(std::string_view data) {
  crypto_hash_sha256_update(&state_, reinterpret_cast<const unsigned char*>(data.data()),
                            data.size());
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.HexDigest();
}

std::string Sha256::HexDigest() {
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state_, out);
  static const char kHex[] = "0123456789abcdef";
  std::string s(2 * sizeof out, '0');
  for (size_t i = 0; i < sizeof out; ++i) {
    s[2 * i] = kHex[out[i] >> 4];
    s[2 * i + 1] = kHex[out[i] & 15];
  }
  return s;
}

std::string CandidateKey(std::string_view language, std::string_view source) {
  Sha256 h;
  h.Update(language);
  h.Update("\n");
  h.Update(source);
  return h.HexDigest();
}

bool IsContentKey(std::string_view key) {
  if (key.size() != 2 * crypto_hash_sha256_BYTES) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

uint64_t Checksum64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const uint64_t k = 0x9E3779B97F4A7C15ull;
  uint64_t l[4] = {seed ^ 0x243F6A8885A308D3ull, seed ^ 0x13198A2E03707344ull,
                   seed ^ 0xA4093822299F31D0ull, seed ^ 0x082EFA98EC4E6C89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * j, 8);
      l[j] = (l[j] ^ w) * k;
      l[j] ^= l[j] >> 29;
    }
  }
  uint64_t h =
      l[0] ^ (l[1] << 1 | l[1] >> 63) ^ (l[2] << 2 | l[2] >> 62) ^ (l[3] << 3 | l[3] >> 61);
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  h ^= n;
  h *= k;
  h ^= h >> 31;
  return h;
}

}  // namespace htam
