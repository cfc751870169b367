// Owners and roles over real CURVE: a session belongs to the client key that opened it. Another
// agent key may read its records (server.others_read = records) but never resume, drive, record
// into, close or poll it, nor read its candidate sources; a read key reads only; an admin key
// may do everything and alone sees other clients' keys in Status. Also: refused handshakes are
// counted by reason, and session ids cannot be guessed from one another. Without CURVE the same
// rules hold per client identity (the identity_secret of its Hello).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <zmq.hpp>

#include "daemon/common/auth.h"
#include "tests/integration/daemon_harness.h"

namespace htam {
namespace {

using htam::testing::DaemonProcess;
using htam::testing::MakeTempDir;
using htam::testing::StatusValue;
using namespace std::chrono_literals;

class OwnersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("htamd-owners");
    keys_ = dir_ + "/keys";
    for (const char* name : {"server", "alice", "bob", "reader", "root"}) {
      auto k = auth::GenerateKeyPair();
      ASSERT_TRUE(k.ok());
      ASSERT_TRUE(auth::WriteKeyPair(keys_, name, *k).ok());
      pub_[name] = k->public_key;
    }
    {
      std::ofstream f(keys_ + "/authorized_keys");
      f << pub_["alice"] << " # alice, an agent by default\n"
        << pub_["bob"] << " role=agent\n"
        << pub_["reader"] << " role=read # dashboards\n"
        << pub_["root"] << " role=admin\n";
    }
    port_ = 21000 + getpid() % 20000;
    std::filesystem::create_directories(dir_ + "/data");
    daemon_ = std::make_unique<DaemonProcess>(
        dir_ + "/data",
        std::map<std::string, std::string>{
            {"server.curve", "true"},
            {"server.curve_secret_key_file", keys_ + "/server.key"},
            {"server.curve_authorized_keys", keys_ + "/authorized_keys"},
            {"server.bind", "tcp://127.0.0.1:" + std::to_string(port_)},
            {"server.auth_log_interval_s", "3600"}});
    ASSERT_TRUE(daemon_->Start(false));
    for (int i = 0; i < 300 && !alice_; ++i) {
      alice_ = As("alice");
      if (!alice_) std::this_thread::sleep_for(100ms);
    }
    ASSERT_NE(alice_, nullptr) << daemon_->Log();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Client> As(const std::string& name) {
    ClientOptions o;
    o.endpoint = "tcp://127.0.0.1:" + std::to_string(port_);
    o.server_public_key_file = keys_ + "/server.pub";
    o.client_key_file = keys_ + "/" + name + ".key";
    o.connect_timeout = 3s;
    o.retries = 0;
    auto c = Client::Connect(o);
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::string dir_, keys_;
  std::map<std::string, std::string> pub_;
  int port_ = 0;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> alice_;
};

TEST_F(OwnersTest, ASessionIsDrivenOnlyByItsOwnerOrAnAdmin) {
  OpenSessionArgs open;
  open.task = "cpu_relu";
  auto info = alice_->OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint64_t sid = info->session->id;
  auto step = alice_->NextStep(sid);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  RecordArgs rec;
  rec.session_id = sid;
  rec.direction_id = step->direction->id;
  rec.summary = "alice's trick";
  rec.speedup_after = 2.0f;
  rec.median_us = 5;
  rec.source = "// alice's secret kernel\n";
  ASSERT_TRUE(alice_->Record(rec).ok());
  SubmitArgs sub;
  sub.session_id = sid;
  sub.source = info->baseline_source;
  sub.direction_id = step->direction->id;
  sub.summary = "the reference";
  auto job = alice_->Submit(sub);
  ASSERT_TRUE(job.ok()) << job.status().ToString();

  auto bob = As("bob");
  ASSERT_NE(bob, nullptr);
  auto denied = [](const auto& r) {
    return !r.ok() && r.status().code() == Status::Code::kPermissionDenied;
  };
  OpenSessionArgs resume;
  resume.session_id = sid;
  EXPECT_TRUE(denied(bob->OpenSession(resume))) << "bob resumed alice's session";
  EXPECT_TRUE(denied(bob->NextStep(sid))) << "bob drove alice's session";
  rec.summary = "bob's noise";
  EXPECT_TRUE(denied(bob->Record(rec))) << "bob recorded into alice's session";
  EXPECT_TRUE(denied(bob->CloseSession(sid))) << "bob closed alice's session";
  EXPECT_TRUE(denied(bob->Poll(job->job_id))) << "bob polled alice's job";
  // Bob may read her records (server.others_read = records), not her candidate's source.
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = sid;
  auto records = bob->Query(q);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  EXPECT_FALSE(records->transitions.empty());
  fb::QueryT best;
  best.kind = fb::QueryKind::BestCandidates;
  best.session_id = sid;
  best.with_sources = true;
  auto theirs = bob->Query(best);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  ASSERT_FALSE(theirs->candidates.empty());
  EXPECT_TRUE(theirs->candidates[0]->source.empty()) << "bob read alice's candidate source";
  auto hers = alice_->Query(best);
  ASSERT_TRUE(hers.ok());
  ASSERT_FALSE(hers->candidates.empty());
  EXPECT_NE(hers->candidates[0]->source.find("alice's secret"), std::string::npos);

  // A read key reads, never opens or drives.
  auto reader = As("reader");
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(denied(reader->OpenSession(open))) << "a read key opened a session";
  EXPECT_TRUE(denied(reader->NextStep(sid)));
  EXPECT_TRUE(reader->Query(q).ok());

  // Keys in Status: each client sees its own, the admin sees all.
  auto bob_view = bob->ServerStatus("clients");
  ASSERT_TRUE(bob_view.ok());
  EXPECT_EQ(bob_view->find(pub_["alice"]), std::string::npos) << *bob_view;
  EXPECT_NE(bob_view->find(pub_["bob"]), std::string::npos) << *bob_view;
  auto root = As("root");
  ASSERT_NE(root, nullptr);
  auto root_view = root->ServerStatus("clients");
  ASSERT_TRUE(root_view.ok());
  EXPECT_NE(root_view->find(pub_["alice"]), std::string::npos) << *root_view;
  // The admin may close anyone's session; the owner still drives her own.
  EXPECT_TRUE(alice_->NextStep(sid).ok());
  EXPECT_TRUE(root->CloseSession(sid).ok());
}

TEST_F(OwnersTest, SessionIdsAreNotSequential) {
  OpenSessionArgs open;
  open.task = "cpu_relu";
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto info = alice_->OpenSession(open);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    ids.push_back(info->session->id);
  }
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_GT(ids[i], ids[i - 1]) << "ids no longer sort by age";
    EXPECT_GT(ids[i] - ids[i - 1], 1u << 20) << "session id " << ids[i] << " follows " << ids[i - 1];
    EXPECT_NE(ids[i] & 0xffffffffu, ids[i - 1] & 0xffffffffu);
  }
}

TEST_F(OwnersTest, RefusedHandshakesAreCountedAndLoggedByReason) {
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port_);
  zmq::context_t ctx(1);
  {  // a NULL client
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(endpoint);
    s.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait);
    std::this_thread::sleep_for(300ms);
  }
  {  // a CURVE client with the wrong server key
    auto wrong = auth::GenerateKeyPair(), mine = auth::GenerateKeyPair();
    ASSERT_TRUE(wrong.ok() && mine.ok());
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::curve_serverkey, wrong->public_key);
    s.set(zmq::sockopt::curve_publickey, mine->public_key);
    s.set(zmq::sockopt::curve_secretkey, mine->secret_key);
    s.connect(endpoint);
    s.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait);
    std::this_thread::sleep_for(300ms);
  }
  {  // garbage bytes over TCP
    zmq::socket_t s(ctx, zmq::socket_type::stream);
    s.set(zmq::sockopt::linger, 0);
    s.connect(endpoint);
    std::string id = s.get(zmq::sockopt::routing_id);
    std::this_thread::sleep_for(100ms);
    s.send(zmq::buffer(id), zmq::send_flags::sndmore);
    s.send(zmq::str_buffer("GET / HTTP/1.1\r\n\r\n\xff\xff\xff\xff"), zmq::send_flags::none);
    std::this_thread::sleep_for(300ms);
  }
  std::this_thread::sleep_for(500ms);
  auto status = alice_->ServerStatus("server");
  ASSERT_TRUE(status.ok());
  EXPECT_GE(std::stoi(StatusValue(*status, "handshakes_refused")), 3) << *status;
  // Garbage and a wrong server key are told apart.
  EXPECT_GE(std::stoi("0" + StatusValue(*status, "handshakes_refused_crypto")), 1) << *status;
  EXPECT_GE(std::stoi("0" + StatusValue(*status, "handshakes_refused_no_detail")) +
                std::stoi("0" + StatusValue(*status, "handshakes_refused_protocol")) +
                std::stoi("0" + StatusValue(*status, "handshakes_refused_mechanism")),
            1)
      << *status;
  const std::string log = daemon_->Log();
  EXPECT_NE(log.find("refused handshake"), std::string::npos) << log;
}

// Without CURVE (the default configuration), a session belongs to the client that opened it:
// the identity_secret its connections present in Hello. All of one Client's connections (its
// pool of sockets for concurrent calls, its I/O thread's socket) are that owner; another Client,
// or a connection that sends no secret, is not.
TEST(OwnersWithoutCurve, OneClientsConnectionsAreOneOwnerAndOthersAreNot) {
  const std::string dir = MakeTempDir("htamd-owners-nocurve");
  DaemonProcess daemon(dir);
  ASSERT_TRUE(daemon.Start()) << daemon.Log();
  auto connect = [&](const std::string& name) {
    ClientOptions o;
    o.endpoint = daemon.endpoint();
    o.client_name = name;
    o.retries = 0;
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  };
  auto alice = connect("alice");
  ASSERT_NE(alice, nullptr);
  OpenSessionArgs open;
  open.task = "cpu_relu";
  auto info = alice->OpenSession(open);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint64_t sid = info->session->id;

  // Eight threads at once: each synchronous call takes its own pooled socket.
  constexpr int kThreads = 8, kEach = 5;
  std::atomic<int> ok{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto step = alice->NextStep(sid);
        if (!step.ok()) {
          failures[t] = step.status().ToString();
          return;
        }
        RecordArgs rec;
        rec.session_id = sid;
        rec.direction_id = step->direction->id;
        rec.summary = "thread " + std::to_string(t) + " step " + std::to_string(i);
        rec.speedup_after = 1.1f;
        auto r = alice->Record(rec);
        if (!r.ok()) {
          failures[t] = r.status().ToString();
          return;
        }
        ok++;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_EQ(ok.load(), kThreads * kEach);
  auto async = alice->NextStepAsync(sid).get();  // the I/O thread's socket
  EXPECT_TRUE(async.ok()) << async.status().ToString();

  auto bob = connect("bob");
  ASSERT_NE(bob, nullptr);
  auto denied = [](const auto& r) {
    return !r.ok() && r.status().code() == Status::Code::kPermissionDenied;
  };
  OpenSessionArgs resume;
  resume.session_id = sid;
  EXPECT_TRUE(denied(bob->OpenSession(resume))) << "bob resumed alice's session";
  EXPECT_TRUE(denied(bob->NextStep(sid))) << "bob drove alice's session";
  RecordArgs noise;
  noise.session_id = sid;
  noise.direction_id = async.ok() ? async->direction->id : 1;
  noise.summary = "bob's noise";
  EXPECT_TRUE(denied(bob->Record(noise))) << "bob recorded into alice's session";
  EXPECT_TRUE(denied(bob->CloseSession(sid))) << "bob closed alice's session";
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = sid;
  auto records = bob->Query(q);  // server.others_read = records
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  EXPECT_EQ(records->transitions.size(), static_cast<size_t>(kThreads * kEach));

  // A connection that presents no secret is its own owner; a malformed secret is refused at the
  // door.
  zmq::context_t ctx(1);
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::rcvtimeo, 10000);
  raw.connect(daemon.endpoint());
  auto send = [&](fb::BodyUnion body) -> std::unique_ptr<fb::EnvelopeT> {
    fb::EnvelopeT env;
    env.version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
    env.request_id = 7;
    env.body = std::move(body);
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fb::Envelope::Pack(b, &env), fb::EnvelopeIdentifier());
    raw.send(zmq::buffer(b.GetBufferPointer(), b.GetSize()));
    zmq::message_t reply;
    if (!raw.recv(reply)) return nullptr;
    return fb::UnPackEnvelope(reply.data());
  };
  fb::CloseSessionT close;
  close.session_id = sid;
  fb::BodyUnion close_body;
  close_body.Set(close);
  auto reply = send(close_body);
  ASSERT_NE(reply, nullptr);
  ASSERT_EQ(reply->body.type, fb::Body::Error);
  EXPECT_EQ(reply->body.AsError()->code, fb::ErrorCode::Unauthorized);
  fb::HelloT short_secret;
  short_secret.identity_secret.assign(8, 1);
  fb::BodyUnion hello_body;
  hello_body.Set(short_secret);
  reply = send(hello_body);
  ASSERT_NE(reply, nullptr);
  ASSERT_EQ(reply->body.type, fb::Body::Error);
  EXPECT_EQ(reply->body.AsError()->code, fb::ErrorCode::InvalidArgument);
  EXPECT_NE(reply->body.AsError()->message.find("identity_secret"), std::string::npos);

  // The owner closes her session.
  auto closed = alice->CloseSession(sid);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->steps, static_cast<uint32_t>(kThreads * kEach));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace htam
