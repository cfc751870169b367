// Key files and the allowed-keys file: what htam-keygen writes, htamd reads back.
#include "daemon/common/auth.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace htam::auth {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/htam-auth-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(AuthTest, KeyPairRoundTripsThroughFiles) {
  std::string dir = TempDir();
  auto keys = GenerateKeyPair();
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_TRUE(WriteKeyPair(dir, "server", *keys).ok());
  auto back = ReadKeyFile(dir + "/server.key");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->public_key, keys->public_key);
  EXPECT_EQ(back->secret_key, keys->secret_key);
  auto pub = ReadKeyFile(dir + "/server.pub");
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(pub->public_key, keys->public_key);
  EXPECT_TRUE(pub->secret_key.empty());
  auto perms = std::filesystem::status(dir + "/server.key").permissions();
  EXPECT_EQ(perms & std::filesystem::perms::others_read, std::filesystem::perms::none);
  std::filesystem::remove_all(dir);
}

TEST(AuthTest, AuthorizedKeysFileSkipsCommentsAndRefusesBadKeys) {
  std::string dir = TempDir();
  auto a = GenerateKeyPair(), b = GenerateKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  {
    std::ofstream f(dir + "/keys");
    f << "# team A\n" << a->public_key << " alice laptop\n\npublic = " << b->public_key << "\n";
  }
  auto keys = LoadAuthorizedKeys(dir + "/keys");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->count(a->public_key));
  EXPECT_TRUE(keys->count(b->public_key));
  {
    std::ofstream f(dir + "/bad");
    f << a->public_key << "\nnot-a-key\n";
  }
  auto bad = LoadAuthorizedKeys(dir + "/bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":2:"), std::string::npos);
  EXPECT_FALSE(LoadAuthorizedKeys(dir + "/missing").ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace htam::auth
