// CURVE authentication end to end: a daemon with server.curve accepts a client whose public key
// is in the authorized keys file and refuses (and logs) an unknown key and a plain client.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "daemon/common/auth.h"
#include "tests/integration/daemon_harness.h"

namespace htam {
namespace {

using htam::testing::DaemonProcess;
using htam::testing::MakeTempDir;
using htam::testing::StatusValue;
using namespace std::chrono_literals;

TEST(DaemonAuthTest, KnownKeyAcceptedUnknownKeyAndPlainClientRefused) {
  std::string dir = MakeTempDir("htamd-auth");
  std::string keys = dir + "/keys";
  auto server = auth::GenerateKeyPair(), alice = auth::GenerateKeyPair(),
       mallory = auth::GenerateKeyPair();
  ASSERT_TRUE(server.ok() && alice.ok() && mallory.ok());
  ASSERT_TRUE(auth::WriteKeyPair(keys, "server", *server).ok());
  ASSERT_TRUE(auth::WriteKeyPair(keys, "alice", *alice).ok());
  ASSERT_TRUE(auth::WriteKeyPair(keys, "mallory", *mallory).ok());
  {
    std::ofstream f(keys + "/authorized_keys");
    f << "# who may talk to htamd\n" << alice->public_key << " alice\n";
  }
  // CURVE also makes a non-loopback bind acceptable.
  DaemonProcess d(dir + "/data", {{"server.curve", "true"},
                                  {"server.curve_secret_key_file", keys + "/server.key"},
                                  {"server.curve_authorized_keys", keys + "/authorized_keys"},
                                  {"server.bind", "tcp://0.0.0.0:0"}});
  std::filesystem::create_directories(dir + "/data");
  ASSERT_TRUE(d.Start(false));
  // The wildcard port: read the bound endpoint from the log.
  std::string endpoint;
  for (int i = 0; i < 300 && endpoint.empty(); ++i) {
    std::string log = d.Log();
    auto p = log.find("listening on ");
    if (p != std::string::npos) {
      endpoint = log.substr(p + 13, log.find_first_of(" \n", p + 13) - p - 13);
      endpoint.replace(endpoint.find("0.0.0.0"), 7, "127.0.0.1");
    }
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(endpoint.empty()) << d.Log();

  ClientOptions good;
  good.endpoint = endpoint;
  good.server_public_key_file = keys + "/server.pub";
  good.client_key_file = keys + "/alice.key";
  good.connect_timeout = 10s;
  auto c = Client::Connect(good);
  ASSERT_TRUE(c.ok()) << c.status().ToString() << d.Log();
  auto hello = (*c)->Hello();
  ASSERT_TRUE(hello.ok());
  EXPECT_NE(std::find(hello->capabilities.begin(), hello->capabilities.end(), "curve"),
            hello->capabilities.end());

  // Many threads calling at once each get a CURVE connection of their own while they wait;
  // every one is authenticated and answered.
  {
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 10; ++i) {
          auto h = (*c)->Hello();
          auto s = (*c)->ServerStatus("clients");
          if (h.ok() && s.ok() && s->find("key=" + alice->public_key) != std::string::npos) ok++;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(ok.load(), 60);
  }

  ClientOptions bad = good;
  bad.client_key_file = keys + "/mallory.key";
  bad.connect_timeout = 1500ms;
  bad.retries = 0;
  auto refused = Client::Connect(bad);
  EXPECT_FALSE(refused.ok()) << "an unknown key was accepted";

  ClientOptions plain;
  plain.endpoint = endpoint;
  plain.connect_timeout = 1500ms;
  plain.retries = 0;
  EXPECT_FALSE(Client::Connect(plain).ok()) << "a client without CURVE was accepted";

  auto status = (*c)->ServerStatus("server");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(StatusValue(*status, "curve"), "on");
  EXPECT_GE(std::stoi(StatusValue(*status, "auth_refused")), 1);
  EXPECT_GE(std::stoi(StatusValue(*status, "auth_accepted")), 1);
  auto clients = (*c)->ServerStatus("clients");
  ASSERT_TRUE(clients.ok());
  EXPECT_NE(clients->find("key=" + alice->public_key), std::string::npos);
  EXPECT_NE(d.Log().find("unknown key " + mallory->public_key), std::string::npos);
  EXPECT_EQ(d.Terminate(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace htam
