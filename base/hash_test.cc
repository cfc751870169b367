// The one content hash: known SHA-256 vectors, incremental = one-shot, and the candidate key.
#include "base/hash.h"

#include <gtest/gtest.h>

namespace htam {
namespace {

TEST(Hash, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Hash, IncrementalEqualsOneShot) {
  Sha256 h;
  h.Update("ab");
  h.Update("c");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("abc"));
}

TEST(Hash, CandidateKeyIsLanguageNewlineSource) {
  EXPECT_EQ(CandidateKey("cuda", "x"), Sha256Hex("cuda\nx"));
  EXPECT_NE(CandidateKey("cuda", "x"), CandidateKey("hip", "x"));
}

}  // namespace
}  // namespace htam
