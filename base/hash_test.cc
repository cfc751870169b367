// The hashes: known SHA-256 vectors, incremental = one-shot, the candidate key; the two 64-bit
// hashes pinned to the values stores already hold.
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

TEST(Hash, ContentKeysHaveOneForm) {
  EXPECT_TRUE(IsContentKey(CandidateKey("cpp", "x")));
  EXPECT_TRUE(IsContentKey(Sha256Hex("")));
  EXPECT_FALSE(IsContentKey(""));
  EXPECT_FALSE(IsContentKey(Sha256Hex("").substr(1)));  // too short
  EXPECT_FALSE(IsContentKey(Sha256Hex("") + "0"));      // too long
  std::string upper = Sha256Hex("x");
  for (char& c : upper) c = char(toupper(c));
  EXPECT_FALSE(IsContentKey(upper));  // not the form Sha256Hex writes
  EXPECT_FALSE(IsContentKey("../" + Sha256Hex("").substr(3)));
}

// Stored embeddings and transition keys hold IndexKey64's values: these may never change.
TEST(Hash, IndexKeysAreTheStoredOnes) {
  EXPECT_EQ(IndexKey64(""), 0x14650fb0739d0383ull);
  EXPECT_EQ(IndexKey64("a"), 0x44bd8ad473cd9906ull);
  EXPECT_EQ(IndexKey64("foobar"), 0x88fad7c0a8ff07f2ull);
  EXPECT_EQ(IndexKey64("coalesced", IndexKey64("w:")), 0x6f2be2cacd346f53ull);
  EXPECT_EQ(IndexKey64("coalesced", IndexKey64("w:")), IndexKey64("w:coalesced"));
  static_assert(IndexKey64("reduction") % 8 == 4);
}

// Index snapshots on disk carry Checksum64 of their payload: an existing snapshot verifies only
// while these stay.
TEST(Hash, SnapshotChecksumsAreTheStoredOnes) {
  std::string b;
  for (int i = 0; i < 100; ++i) b += static_cast<char>(i * 7 + 3);
  EXPECT_EQ(Checksum64("", 0), 0x494bf438c5887bd5ull);
  EXPECT_EQ(Checksum64(b.data(), b.size()), 0x7540c6fe70de2f10ull);
  EXPECT_EQ(Checksum64(b.data() + 64, 36, Checksum64(b.data(), 64)), 0x5b8e4bac2199239full);
  EXPECT_EQ(Checksum64(b.data(), b.size(), 42), 0x5d7ee32f247aebe3ull);
}

}  // namespace
}  // namespace htam
