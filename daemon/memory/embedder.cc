// builtin-hash-v1: a deterministic text embedder from hashed word and character n-grams.
#include <cctype>
#include <cmath>
#include <cstdio>

#include "base/hash.h"
#include "daemon/memory/memory.h"

namespace htam::memory {
namespace {

// The hashed slot and signed weight of a feature (the "hashing trick").
void Slot(uint64_t h, size_t dim, float weight, size_t* slot, float* value) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  *slot = h % dim;
  *value = (h >> 63) ? -weight : weight;
}

// Adds `weight` at a hashed slot with a hashed sign.
void AddFeature(std::vector<float>* v, uint64_t h, float weight) {
  size_t slot;
  float value;
  Slot(h, v->size(), weight, &slot, &value);
  (*v)[slot] += value;
}

// Calls add(hash, weight) for every feature of `words` in order; `next` is the word that follows
// the last one (its bigram), or null.
template <typename Add>
void ForEachFeature(const std::vector<std::string>& words, const std::string* next, Add add) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    // Feature keys (base/hash.h): stable across platforms and runs (std::hash is not).
    add(IndexKey64(w, IndexKey64("w:")), 1.0f);
    const std::string* after = i + 1 < words.size() ? &words[i + 1] : next;
    if (after) add(IndexKey64(*after, IndexKey64(w, IndexKey64("b:"))), 0.7f);
    // Character trigrams of the padded word: robust to inflection ("coalesced" ~ "coalescing").
    std::string padded = "^" + w + "$";
    for (size_t j = 0; j + 3 <= padded.size(); ++j)
      add(IndexKey64(std::string_view(padded).substr(j, 3), IndexKey64("c:")), 0.35f);
  }
}

void Normalize(std::vector<float>* v) {
  double norm = 0;
  for (float x : *v) norm += double(x) * x;
  if (norm > 0) {
    float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (float& x : *v) x *= inv;
  }
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
  ForEachFeature(Words(text), nullptr, [&](uint64_t h, float w) { AddFeature(&v, h, w); });
  Normalize(&v);
  return v;
}

SuffixEmbedder::SuffixEmbedder(std::string_view suffix, uint32_t dim) : dim_(dim == 0 ? 1 : dim) {
  std::vector<std::string> words = Words(suffix);
  if (!words.empty()) first_word_ = words.front();
  ForEachFeature(words, nullptr, [&](uint64_t h, float w) {
    size_t slot;
    float value;
    Slot(h, dim_, w, &slot, &value);
    features_.push_back(Feature{static_cast<uint32_t>(slot), value});
  });
}

std::vector<float> SuffixEmbedder::Embed(std::string_view prefix) const {
  // The same additions in the same order as EmbedText over the joined text, so the same floats.
  std::vector<float> v(dim_, 0.0f);
  ForEachFeature(Words(prefix), first_word_.empty() ? nullptr : &first_word_,
                 [&](uint64_t h, float w) { AddFeature(&v, h, w); });
  for (const Feature& f : features_) v[f.slot] += f.value;
  Normalize(&v);
  return v;
}

std::string CandidateHash(std::string_view language, std::string_view source) {
  // The evaluator's key too (base/hash.h): the key a client is given names the stored candidate.
  return CandidateKey(language, source);
}

}  // namespace htam::memory
