// builtin-hash-v1: a deterministic text embedder from hashed word and character n-grams.
#include <cctype>
#include <cmath>
#include <cstdio>

#include "base/hash.h"
#include "daemon/memory/memory.h"

namespace htam::memory {
namespace {

// FNV-1a 64: stable across platforms and runs (std::hash is not).
uint64_t Fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Adds `weight` at a hashed slot with a hashed sign (the "hashing trick").
void AddFeature(std::vector<float>* v, uint64_t h, float weight) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  size_t slot = h % v->size();
  (*v)[slot] += (h >> 63) ? -weight : weight;
}

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_') {
      cur.push_back(static_cast<char>(std::tolower(c)));
    } else if (!cur.empty()) {
      words.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

}  // namespace

std::vector<float> EmbedText(std::string_view text, uint32_t dim) {
  std::vector<float> v(dim == 0 ? 1 : dim, 0.0f);
  std::vector<std::string> words = Words(text);
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    AddFeature(&v, Fnv1a(w, Fnv1a("w:")), 1.0f);
    if (i + 1 < words.size()) AddFeature(&v, Fnv1a(words[i + 1], Fnv1a(w, Fnv1a("b:"))), 0.7f);
    // Character trigrams of the padded word: robust to inflection ("coalesced" ~ "coalescing").
    std::string padded = "^" + w + "$";
    for (size_t j = 0; j + 3 <= padded.size(); ++j)
      AddFeature(&v, Fnv1a(std::string_view(padded).substr(j, 3), Fnv1a("c:")), 0.35f);
  }
  double norm = 0;
  for (float x : v) norm += double(x) * x;
  if (norm > 0) {
    float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (float& x : v) x *= inv;
  }
  return v;
}

std::string CandidateHash(std::string_view language, std::string_view source) {
  // The evaluator's key too (base/hash.h): the key a client is given names the stored candidate.
  return CandidateKey(language, source);
}

}  // namespace htam::memory
