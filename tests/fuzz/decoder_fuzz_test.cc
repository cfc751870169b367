// The fuzz body as a plain regression test (any compiler): the seed corpus, every file in
// tests/fuzz/corpus/decoder, and a few hundred thousand deterministic random and mutated frames.
// HTAM_WRITE_CORPUS=DIR writes the seeds there (how the corpus was made).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/fuzz/decoder_fuzz_body.h"

namespace htam::fuzz {
namespace {

int Feed(const std::string& s) {
  return FuzzDecoderOnce(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(DecoderFuzzTest, SeedsAreAccepted) {
  auto seeds = SeedRequests();
  ASSERT_GE(seeds.size(), 9u);
  for (const auto& s : seeds) EXPECT_EQ(Feed(s), 1);
  if (const char* dir = std::getenv("HTAM_WRITE_CORPUS")) {
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::ofstream f(std::string(dir) + "/seed_" + std::to_string(i), std::ios::binary);
      f << seeds[i];
    }
  }
}

TEST(DecoderFuzzTest, CorpusFilesNeverCrash) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("tests/fuzz/corpus/decoder")) {
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_GE(Feed(ss.str()), 0) << e.path();
    n++;
  }
  EXPECT_GT(n, 0u);
}

TEST(DecoderFuzzTest, RandomAndMutatedFramesNeverCrash) {
  std::mt19937_64 rng(20261122);
  auto seeds = SeedRequests();
  size_t accepted = 0, total = 0;
  for (int i = 0; i < 300000; ++i) {
    std::string m;
    switch (i % 5) {
      case 0: {  // pure noise, sometimes with the right identifier
        m.resize(rng() % 256);
        for (auto& c : m) c = static_cast<char>(rng());
        if (m.size() >= 8 && (rng() & 1)) m.replace(4, 4, "HTAM");
        break;
      }
      case 1: {  // truncated seed
        const std::string& s = seeds[rng() % seeds.size()];
        m = s.substr(0, rng() % s.size());
        break;
      }
      default: {  // seed with byte flips, inserted or deleted bytes
        m = seeds[rng() % seeds.size()];
        int edits = 1 + static_cast<int>(rng() % 8);
        for (int k = 0; k < edits && !m.empty(); ++k) {
          size_t pos = rng() % m.size();
          switch (rng() % 4) {
            case 0: m[pos] = static_cast<char>(rng()); break;
            case 1: m[pos] ^= static_cast<char>(1u << (rng() % 8)); break;
            case 2: m.insert(pos, 1, static_cast<char>(rng())); break;
            default: m.erase(pos, 1); break;
          }
        }
      }
    }
    int r = Feed(m);
    ASSERT_GE(r, 0);
    accepted += r;
    total++;
  }
  // Most mutations are refused; some (padding, values) stay valid, which is fine.
  EXPECT_LT(accepted, total);
}

// HTAM_FUZZ_FRAMES raises the count (the long run of docs/benchmarks.md).
TEST(DecoderFuzzTest, StructuredRequestsOfEveryTypeNeverCrash) {
  const char* env_frames = std::getenv("HTAM_FUZZ_FRAMES");
  const long frames = env_frames ? std::atol(env_frames) : 60000;
  std::mt19937_64 rng(20261128);
  KnownIds ids{{1, 2, 3}, {1, 2, 3, 4, 5}, {1, 2, 3}, {1}};
  size_t accepted = 0;
  for (long i = 0; i < frames; ++i) {
    std::string m = RandomRequest(rng, ids, /*mutate=*/i % 2 == 1);
    int r = Feed(m);
    ASSERT_GE(r, 0);
    accepted += static_cast<size_t>(r);
    if (const char* dir = std::getenv("HTAM_WRITE_CORPUS"); dir && i < 40) {
      std::ofstream f(std::string(dir) + "/structured_" + std::to_string(i), std::ios::binary);
      f << m;
    }
  }
  // The unmutated half reaches the field checks: many pass them, the hostile values do not.
  EXPECT_GT(accepted, static_cast<size_t>(frames / 60));
  EXPECT_LT(accepted, static_cast<size_t>(frames));
  std::fprintf(stderr, "structured decoder fuzz: %ld frames, %zu accepted\n", frames, accepted);
}

}  // namespace
}  // namespace htam::fuzz
