// Hostile requests against a running htamd, sent as raw envelopes from a DEALER socket as any
// client could: each must get a clear error naming what is wrong, the daemon must stay up, and
// nothing already stored may change.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <zmq.hpp>

#include "flatbuffers/flatbuffers.h"
#include "htam/schema/protocol_generated.h"
#include "tests/integration/daemon_harness.h"

namespace htam {
namespace {

using htam::testing::DaemonProcess;
using htam::testing::MakeTempDir;
using namespace std::chrono_literals;

std::string Pack(fb::EnvelopeT env) {
  env.version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
  flatbuffers::FlatBufferBuilder b;
  b.Finish(fb::Envelope::Pack(b, &env), fb::EnvelopeIdentifier());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

// Sends one raw envelope and returns the reply's error (code None when the reply is no error).
struct RawReply {
  bool answered = false;
  fb::ErrorCode code = fb::ErrorCode::None;
  std::string message;
};
RawReply SendRaw(const std::string& endpoint, const std::string& frame) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 10000);
  s.connect(endpoint);
  s.send(zmq::buffer(frame), zmq::send_flags::none);
  RawReply r;
  zmq::message_t reply;
  if (!s.recv(reply)) return r;
  r.answered = true;
  std::vector<uint8_t> aligned(static_cast<const uint8_t*>(reply.data()),
                               static_cast<const uint8_t*>(reply.data()) + reply.size());
  auto* env = fb::GetEnvelope(aligned.data());
  if (env->body_type() == fb::Body::Error) {
    r.code = env->body_as_Error()->code();
    r.message = env->body_as_Error()->message()->str();
  }
  return r;
}

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("htamd-hostile");
    daemon_ = std::make_unique<DaemonProcess>(
        dir_, std::map<std::string, std::string>{{"general.log_level", "info"}});
    ASSERT_TRUE(daemon_->Start());
    client_ = daemon_->Connect(10s);
    ASSERT_NE(client_, nullptr);
    OpenSessionArgs open;
    open.task = "cpu_relu";
    auto info = client_->OpenSession(open);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    session_ = info->session->id;
    auto step = client_->NextStep(session_);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    direction_ = step->direction->id;
  }

  // The daemon is alive and still answers a well-formed request.
  void ExpectAlive() {
    EXPECT_FALSE(daemon_->Exited()) << "htamd died; its log:\n" << daemon_->Log();
    auto step = client_->NextStep(session_);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  uint64_t session_ = 0;
  uint64_t direction_ = 0;
};

TEST_F(HostileTest, SubmitWithInvalidUtf8IsRefusedNamingTheFieldAndTheDaemonLives) {
  for (const char* field : {"summary", "language"}) {
    fb::SubmitT submit;
    submit.session_id = session_;
    submit.direction_id = direction_;
    submit.language = "cpp";
    submit.source = "extern \"C\" int x;";
    submit.summary = "tiled";
    (std::string(field) == "summary" ? submit.summary : submit.language) = "bad \xC3\x28 byte";
    fb::EnvelopeT env;
    env.request_id = 7;
    env.body.Set(std::move(submit));
    RawReply r = SendRaw(daemon_->endpoint(), Pack(std::move(env)));
    ASSERT_TRUE(r.answered) << "no reply to a Submit with invalid UTF-8 in " << field;
    EXPECT_EQ(r.code, fb::ErrorCode::InvalidArgument) << r.message;
    EXPECT_NE(r.message.find(std::string("Submit.") + field), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("UTF-8"), std::string::npos) << r.message;
  }
  ExpectAlive();
}

TEST_F(HostileTest, RecordWithInvalidUtf8OrNonFiniteTimeStoresNothing) {
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.limit = 1000;
  auto before = client_->Query(q);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const size_t stored = before->transitions.size();
  auto record = [&](std::string summary, std::string source, double median_us) {
    fb::RecordT rec;
    rec.session_id = session_;
    rec.direction_id = direction_;
    rec.status = fb::OutcomeStatus::Ok;
    rec.speedup_after = 1.5f;
    rec.median_us = median_us;
    rec.summary = std::move(summary);
    rec.source = std::move(source);
    fb::EnvelopeT env;
    env.request_id = 9;
    env.body.Set(std::move(rec));
    return SendRaw(daemon_->endpoint(), Pack(std::move(env)));
  };
  RawReply bad_summary = record("fast \xFF", "int k;", 10.0);
  EXPECT_EQ(bad_summary.code, fb::ErrorCode::InvalidArgument) << bad_summary.message;
  EXPECT_NE(bad_summary.message.find("Record.summary"), std::string::npos) << bad_summary.message;
  RawReply bad_source = record("fast", "int k; // \xED\xA0\x80", 10.0);
  EXPECT_EQ(bad_source.code, fb::ErrorCode::InvalidArgument) << bad_source.message;
  EXPECT_NE(bad_source.message.find("Record.source"), std::string::npos) << bad_source.message;
  RawReply nan_time = record("fast", "int k;", std::nan(""));
  EXPECT_EQ(nan_time.code, fb::ErrorCode::InvalidArgument) << nan_time.message;
  EXPECT_NE(nan_time.message.find("Record.median_us"), std::string::npos) << nan_time.message;
  ExpectAlive();
  auto after = client_->Query(q);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->transitions.size(), stored);
}

TEST_F(HostileTest, AClientNameCannotForgeStatusLines) {
  fb::HelloT hello;
  hello.client = "evil\ncurve: on\n# memory";
  fb::EnvelopeT env;
  env.request_id = 3;
  env.body.Set(std::move(hello));
  RawReply r = SendRaw(daemon_->endpoint(), Pack(std::move(env)));
  ASSERT_TRUE(r.answered);
  EXPECT_EQ(r.code, fb::ErrorCode::None) << r.message;
  auto status = client_->ServerStatus("");
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->find("\ncurve: on"), std::string::npos) << *status;
  EXPECT_NE(status->find("evil\\ncurve: on"), std::string::npos) << *status;
  EXPECT_EQ(daemon_->Log().find("evil\ncurve"), std::string::npos);
  ExpectAlive();
}

}  // namespace
}  // namespace htam
