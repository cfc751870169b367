// SHA-256 through libsodium; see hash.h.
#include "base/hash.h"

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

}  // namespace htam
