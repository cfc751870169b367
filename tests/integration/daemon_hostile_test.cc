// Hostile requests against a running htamd, sent as raw envelopes from a DEALER socket as any
// client could: each must get a clear error naming what is wrong, the daemon must stay up, and
// nothing already stored may change.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "flatbuffers/flatbuffers.h"
#include "htam/schema/protocol_generated.h"
#include "tests/fuzz/decoder_fuzz_body.h"
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
  uint32_t retry_after_ms = 0;
  std::vector<uint8_t> bytes;  // the whole reply envelope
};
RawReply ParseRaw(const zmq::message_t& reply) {
  RawReply r;
  r.answered = true;
  r.bytes.assign(static_cast<const uint8_t*>(reply.data()),
                 static_cast<const uint8_t*>(reply.data()) + reply.size());
  auto* env = fb::GetEnvelope(r.bytes.data());
  if (env->body_type() == fb::Body::Error) {
    r.code = env->body_as_Error()->code();
    r.message = env->body_as_Error()->message()->str();
    r.retry_after_ms = env->body_as_Error()->retry_after_ms();
  }
  return r;
}
// Queues a Hello that makes socket `s` the test's own client (the owner of the fixture's
// session), so that what follows reaches the handlers past the owner check. Its reply is the
// first one on `s`.
void Introduce(zmq::socket_t& s) {
  fb::HelloT hello;
  hello.client = "hostile";
  const std::string secret = htam::testing::kTestIdentitySecret;
  hello.identity_secret.assign(secret.begin(), secret.end());
  fb::EnvelopeT env;
  env.request_id = 0xfeed;
  env.body.Set(std::move(hello));
  s.send(zmq::buffer(Pack(std::move(env))), zmq::send_flags::none);
}
RawReply SendRaw(const std::string& endpoint, const std::string& frame) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 10000);
  s.connect(endpoint);
  Introduce(s);
  zmq::message_t hello_reply;
  if (!s.recv(hello_reply)) return RawReply();
  s.send(zmq::buffer(frame), zmq::send_flags::none);
  zmq::message_t reply;
  if (!s.recv(reply)) return RawReply();
  return ParseRaw(reply);
}

class HostileTest : public ::testing::Test {
 protected:
  // htamd's options for this fixture.
  virtual std::map<std::string, std::string> Options() { return {{"general.log_level", "info"}}; }

  void SetUp() override {
    dir_ = MakeTempDir("htamd-hostile");
    daemon_ = std::make_unique<DaemonProcess>(dir_, Options());
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

  // Records one client-reported step of session `sid` (the ack's transition id, 0 on error).
  uint64_t RecordStep(uint64_t sid, const std::string& summary, float speedup,
                      const std::string& source = "") {
    RecordArgs r;
    r.session_id = sid;
    r.direction_id = direction_;
    r.summary = summary;
    r.status = fb::OutcomeStatus::Ok;
    r.speedup_after = speedup;
    r.median_us = 10;
    r.source = source;
    auto ack = client_->Record(r);
    EXPECT_TRUE(ack.ok()) << ack.status().ToString();
    return ack.ok() ? *ack : 0;
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

// A Submit whose ids do not exist is refused before any evaluation starts: nothing is queued,
// no device time is spent on a result that could never be recorded.
TEST_F(HostileTest, SubmitWithUnknownIdsIsRefusedBeforeEvaluation) {
  auto submit = [&](uint64_t session, uint64_t direction, std::vector<uint64_t> strategies) {
    fb::SubmitT m;
    m.session_id = session;
    m.direction_id = direction;
    m.strategy_ids = std::move(strategies);
    m.source = "extern \"C\" int x;";
    m.summary = "tiled";
    m.wait = false;
    fb::EnvelopeT env;
    env.request_id = 11;
    env.body.Set(std::move(m));
    return SendRaw(daemon_->endpoint(), Pack(std::move(env)));
  };
  RawReply no_direction = submit(session_, 0, {});
  EXPECT_EQ(no_direction.code, fb::ErrorCode::InvalidArgument) << no_direction.message;
  EXPECT_NE(no_direction.message.find("Submit.direction_id"), std::string::npos)
      << no_direction.message;
  RawReply unknown_direction = submit(session_, 987654321, {});
  EXPECT_EQ(unknown_direction.code, fb::ErrorCode::NotFound) << unknown_direction.message;
  EXPECT_NE(unknown_direction.message.find("Submit.direction_id"), std::string::npos)
      << unknown_direction.message;
  RawReply unknown_strategy = submit(session_, direction_, {123456789});
  EXPECT_EQ(unknown_strategy.code, fb::ErrorCode::NotFound) << unknown_strategy.message;
  EXPECT_NE(unknown_strategy.message.find("Submit.strategy_ids"), std::string::npos)
      << unknown_strategy.message;
  RawReply unknown_session = submit(session_ + 1000000, direction_, {});
  EXPECT_EQ(unknown_session.code, fb::ErrorCode::NotFound) << unknown_session.message;
  auto status = client_->ServerStatus("evaluation");
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_NE(status->find("jobs_total: 0\n"), std::string::npos) << *status;
  ExpectAlive();
}

TEST_F(HostileTest, RecordWithImpossibleNumbersIsRefusedAtTheDoor) {
  auto record = [&](float speedup, double median_us) {
    fb::RecordT rec;
    rec.session_id = session_;
    rec.direction_id = direction_;
    rec.status = fb::OutcomeStatus::Ok;
    rec.speedup_after = speedup;
    rec.median_us = median_us;
    rec.summary = "fast";
    fb::EnvelopeT env;
    env.request_id = 5;
    env.body.Set(std::move(rec));
    return SendRaw(daemon_->endpoint(), Pack(std::move(env)));
  };
  RawReply negative = record(1.5f, -3.0);
  EXPECT_EQ(negative.code, fb::ErrorCode::InvalidArgument) << negative.message;
  EXPECT_NE(negative.message.find("Record.median_us"), std::string::npos) << negative.message;
  RawReply huge = record(3.4e38f, 10.0);
  EXPECT_EQ(huge.code, fb::ErrorCode::InvalidArgument) << huge.message;
  EXPECT_NE(huge.message.find("Record.speedup_after"), std::string::npos) << huge.message;
  RawReply below = record(-2.0f, 10.0);
  EXPECT_EQ(below.code, fb::ErrorCode::InvalidArgument) << below.message;
  ExpectAlive();
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = session_;
  auto stored = client_->Query(q);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_TRUE(stored->transitions.empty()) << "an impossible outcome was stored";
}

// A small reply budget, so that pages are reached with a few hundred records.
class BoundedTest : public HostileTest {
 protected:
  std::map<std::string, std::string> Options() override {
    return {{"general.log_level", "info"}, {"server.reply_max_bytes", "65536"}};
  }
};

TEST_F(BoundedTest, QueryRepliesStayWithinTheBudgetAndPageOnACursor) {
  const std::string padding(300, 'p');
  std::set<uint64_t> recorded;
  for (int i = 0; i < 300; ++i)
    recorded.insert(RecordStep(session_, "step " + std::to_string(i) + " " + padding, 1.0f));
  std::set<uint64_t> seen;
  uint64_t cursor = 0;
  int pages = 0;
  do {
    fb::QueryT q;
    q.kind = fb::QueryKind::Transitions;
    q.limit = 0xFFFFFFFFu;
    q.cursor = cursor;
    fb::EnvelopeT env;
    env.request_id = 21;
    env.body.Set(std::move(q));
    RawReply r = SendRaw(daemon_->endpoint(), Pack(std::move(env)));
    ASSERT_TRUE(r.answered);
    ASSERT_EQ(r.code, fb::ErrorCode::None) << r.message;
    EXPECT_LE(r.bytes.size(), 65536u) << "page " << pages;
    auto* reply = fb::GetEnvelope(r.bytes.data())->body_as_QueryReply();
    ASSERT_NE(reply, nullptr);
    ASSERT_NE(reply->transitions(), nullptr);
    for (auto* t : *reply->transitions())
      EXPECT_TRUE(seen.insert(t->id()).second) << "transition " << t->id() << " on two pages";
    ASSERT_TRUE(reply->next_cursor() == 0 || reply->next_cursor() > cursor);
    cursor = reply->next_cursor();
    ++pages;
  } while (cursor != 0 && pages < 1000);
  EXPECT_GT(pages, 1) << "300 records of 300+ bytes fit no 64 KiB reply";
  for (uint64_t id : recorded) EXPECT_TRUE(seen.count(id)) << "transition " << id << " never paged";
  ExpectAlive();
}

TEST_F(HostileTest, ListRepliesCarrySourcesOnlyWhenAsked) {
  std::vector<uint64_t> sessions;
  for (int i = 0; i < 3; ++i) {
    OpenSessionArgs open;
    open.task = "cpu_relu";
    auto info = client_->OpenSession(open);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    sessions.push_back(info->session->id);
    RecordStep(sessions.back(), "variant " + std::to_string(i), 2.0f + static_cast<float>(i),
               "// candidate " + std::to_string(i) + "\n" + std::string(20000, 'x'));
  }
  fb::QueryT q;
  q.kind = fb::QueryKind::BestCandidates;
  q.task = "cpu_relu";
  auto list = client_->Query(q);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_GE(list->candidates.size(), 3u);
  for (auto& c : list->candidates) EXPECT_TRUE(c->source.empty()) << c->hash;
  q.with_sources = true;
  auto full = client_->Query(q);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_GE(full->candidates.size(), 3u);
  for (auto& c : full->candidates) EXPECT_FALSE(c->source.empty()) << c->hash;
  fb::QueryT one;
  one.kind = fb::QueryKind::BestCandidates;
  one.session_id = sessions[0];
  auto single = client_->Query(one);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  ASSERT_EQ(single->candidates.size(), 1u);
  EXPECT_NE(single->candidates[0]->source.find("// candidate 0"), std::string::npos);
}

// Records keep the history window the policy reads, not the session's whole path, so a long
// session's records do not grow with its length.
TEST_F(HostileTest, RecordsOfALongSessionKeepABoundedHistory) {
  for (int i = 0; i < 60; ++i) RecordStep(session_, "", 1.0f);
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = session_;
  q.limit = 100;
  auto all = client_->Query(q);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->transitions.size(), 60u);
  for (auto& t : all->transitions) {
    EXPECT_LE(t->history.size(), 8u) << "step " << t->step;
    EXPECT_EQ(t->history.size(), std::min<size_t>(t->step, 8)) << "step " << t->step;
  }
}

// One client floods without reading: it is answered Busy (with a retry hint) past its own
// bound, and another client's requests keep their turn.
TEST_F(HostileTest, OneClientsFloodIsRefusedBusyAndOthersKeepTheirTurn) {
  zmq::context_t ctx(1);
  zmq::socket_t flood(ctx, zmq::socket_type::dealer);
  flood.set(zmq::sockopt::linger, 0);
  flood.set(zmq::sockopt::sndhwm, 0);
  flood.connect(daemon_->endpoint());
  Introduce(flood);
  fb::NextStepT next;
  next.session_id = session_;
  fb::EnvelopeT env;
  env.request_id = 1;
  env.body.Set(std::move(next));
  const std::string frame = Pack(std::move(env));
  const int kFlood = 20000;
  for (int i = 0; i < kFlood; ++i) flood.send(zmq::buffer(frame), zmq::send_flags::none);
  double worst_ms = 0;
  for (int i = 0; i < 20; ++i) {
    auto a = std::chrono::steady_clock::now();
    auto step = client_->NextStep(session_);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    worst_ms = std::max(
        worst_ms,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  EXPECT_LT(worst_ms, 2000) << "another client's flood held this client's NextStep";
  // The flooder's own replies: the first ones answered, the rest Busy with a retry hint.
  flood.set(zmq::sockopt::rcvtimeo, 2000);
  zmq::message_t hello_reply;  // the first reply: Introduce's Hello
  ASSERT_TRUE(flood.recv(hello_reply));
  EXPECT_EQ(ParseRaw(hello_reply).code, fb::ErrorCode::None);
  int busy = 0, answered = 0;
  for (int i = 0; i < kFlood; ++i) {
    zmq::message_t reply;
    if (!flood.recv(reply)) break;
    RawReply r = ParseRaw(reply);
    if (r.code == fb::ErrorCode::Busy) {
      ++busy;
      EXPECT_GT(r.retry_after_ms, 0u);
    } else {
      EXPECT_EQ(r.code, fb::ErrorCode::None) << r.message;
      ++answered;
    }
  }
  EXPECT_GT(busy, 0);
  EXPECT_GT(answered, 0);
  auto status = client_->ServerStatus("server");
  ASSERT_TRUE(status.ok());
  EXPECT_NE(htam::testing::StatusValue(*status, "busy_total"), "0");
  ExpectAlive();
}

// A client that asks and never reads: its replies fill its ZeroMQ pipe (server.send_hwm of
// them), then htamd's outbox for it up to server.client_max_unread_bytes, and older ones are
// dropped past that, counted and logged; htamd's memory stays bounded and others are answered.
class UnreadTest : public HostileTest {};  // the default bounds

TEST_F(UnreadTest, RepliesAClientDoesNotReadStayBoundedInBytes) {
  // 600 records of ~1.1 KB: one Query of them all is a ~0.8 MB reply.
  const std::string padding(1000, 'p');
  for (int i = 0; i < 600; ++i)
    RecordStep(session_, "step " + std::to_string(i) + " " + padding, 1.0f);
  fb::QueryT q;
  q.kind = fb::QueryKind::Transitions;
  q.session_id = session_;
  q.limit = 0xFFFFFFFFu;
  fb::EnvelopeT env;
  env.request_id = 5;
  env.body.Set(std::move(q));
  const std::string frame = Pack(std::move(env));
  const long rss_before = daemon_->RssKb();
  // The hog reads nothing: a one-message receive queue and a small kernel buffer, so that the
  // replies stay on htamd's side.
  zmq::context_t ctx(1);
  zmq::socket_t hog(ctx, zmq::socket_type::dealer);
  hog.set(zmq::sockopt::linger, 0);
  hog.set(zmq::sockopt::rcvhwm, 1);
  hog.set(zmq::sockopt::rcvbuf, 4096);
  hog.connect(daemon_->endpoint());
  const int kAsks = 400;  // ~320 MB of replies
  for (int i = 0; i < kAsks; ++i) hog.send(zmq::buffer(frame), zmq::send_flags::none);
  // Until htamd has answered them all: its count of dropped replies, past 0, holds still.
  std::string status;
  long rss_peak = 0;
  uint64_t dropped = 0;
  int still = 0;
  auto count = [](const std::string& text, const char* key) -> uint64_t {
    const std::string v = htam::testing::StatusValue(text, key);
    return v.empty() ? 0 : std::stoull(v);
  };
  for (int i = 0; i < 600 && still < 20; ++i) {
    rss_peak = std::max(rss_peak, daemon_->RssKb());
    auto st = client_->ServerStatus("");
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    status = *st;
    const uint64_t now = count(status, "unread_dropped_total");
    still = now > 0 && now == dropped ? still + 1 : 0;
    dropped = now;
    std::this_thread::sleep_for(50ms);
  }
  rss_peak = std::max(rss_peak, daemon_->RssKb());
  EXPECT_GT(count(status, "unread_dropped_total"), 0u) << status;
  // 8 replies in ZeroMQ (~6.4 MB), 8 MiB held (server.client_max_unread_bytes), the kernel's
  // socket buffer, replies the reader threads are building, their allocator arenas' slack (all
  // of it unbounded, 400 replies of ~0.8 MB would be ~320 MB).
  EXPECT_LT(rss_peak - rss_before, 96 * 1024) << "htamd grew " << (rss_peak - rss_before) / 1024
                                              << " MiB holding replies a client does not read";
  std::printf("htamd RSS %ld -> peak %ld KiB; %s replies dropped\n", rss_before, rss_peak,
              htam::testing::StatusValue(status, "unread_dropped_total").c_str());
  // Another client is answered at once.
  auto a = std::chrono::steady_clock::now();
  auto step = client_->NextStep(session_);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count(), 2.0);
  EXPECT_NE(daemon_->Log().find("does not read its replies"), std::string::npos);
  // The hog, reading at last, gets what was kept whole: pages of the Query, and the Busy answers
  // of its requests past server.client_max_in_flight.
  hog.set(zmq::sockopt::rcvtimeo, 2000);
  int pages = 0, busy = 0;
  for (zmq::message_t reply; hog.recv(reply);) {
    RawReply r = ParseRaw(reply);
    if (r.code == fb::ErrorCode::Busy) {
      ++busy;
      continue;
    }
    ASSERT_EQ(r.code, fb::ErrorCode::None) << r.message;
    auto* page = fb::GetEnvelope(r.bytes.data())->body_as_QueryReply();
    ASSERT_NE(page, nullptr);
    ASSERT_NE(page->transitions(), nullptr);
    EXPECT_GT(page->transitions()->size(), 0u);
    ++pages;
  }
  EXPECT_GT(pages, 0);
  EXPECT_LT(pages + busy, kAsks) << "every reply was kept";
  ExpectAlive();
}

// Structure-aware fuzzing of a live daemon: valid envelopes of every request type whose fields
// hold hostile values and ids (known and unknown), half of them then mutated. htamd must answer
// and stay up. HTAM_FUZZ_FRAMES raises the count (the long run of docs/benchmarks.md).
class FuzzTest : public HostileTest {
 protected:
  std::map<std::string, std::string> Options() override {
    // Few evaluations at once: the fuzzer's Submits reach their checks without queuing work.
    return {{"general.log_level", "warn"}, {"server.max_pending_jobs", "2"}};
  }
};

TEST_F(FuzzTest, StructuredRequestsOfEveryTypeNeverCrashTheDaemon) {
  const char* env_frames = std::getenv("HTAM_FUZZ_FRAMES");
  const long frames = env_frames ? std::atol(env_frames) : 20000;
  fuzz::KnownIds ids;
  ids.sessions = {session_};
  ids.directions = {direction_};
  fb::QueryT q;
  q.kind = fb::QueryKind::Strategies;
  q.direction_id = direction_;
  q.limit = 10;
  auto strategies = client_->Query(q);
  ASSERT_TRUE(strategies.ok());
  for (auto& st : strategies->strategies) ids.strategies.push_back(st->id);
  std::mt19937_64 rng(31);
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 200);
  s.connect(daemon_->endpoint());
  Introduce(s);  // the fixture's session is its own: driving requests reach their handlers
  long sent = 0, replies = 0;
  while (sent < frames) {
    for (int k = 0; k < 32 && sent < frames; ++k, ++sent)
      s.send(zmq::buffer(fuzz::RandomRequest(rng, ids, rng() % 2 == 0)), zmq::send_flags::none);
    // Every request gets its answer (Progress events come on top): read until they are in.
    for (zmq::message_t reply; replies < sent && s.recv(reply, zmq::recv_flags::none);) replies++;
    ASSERT_FALSE(daemon_->Exited()) << "htamd died after " << sent << " frames:\n" << daemon_->Log();
  }
  std::fprintf(stderr, "structured fuzz: %ld frames sent, %ld replies\n", sent, replies);
  EXPECT_GT(replies, frames / 2);
  EXPECT_FALSE(daemon_->Exited());
  auto hello = client_->Hello();
  EXPECT_TRUE(hello.ok()) << hello.status().ToString();
}

// Loopback names that pass the bind check also bind: localhost (as 127.0.0.1) and [::1].
TEST(BindTest, LocalhostAndIpv6LoopbackBind) {
  const int port = 23000 + getpid() % 20000;
  std::vector<std::string> binds = {"tcp://localhost:" + std::to_string(port)};
  if (std::ifstream("/proc/net/if_inet6").peek() != EOF)  // the host has IPv6 at all
    binds.push_back("tcp://[::1]:" + std::to_string(port + 1));
  for (const std::string& bind : binds) {
    std::string dir = MakeTempDir("htamd-bind");
    DaemonProcess d(dir, {{"server.bind", bind}});
    ASSERT_TRUE(d.Start()) << bind << ":\n" << d.Log();
    auto c = d.Connect(10s);
    ASSERT_NE(c, nullptr) << bind;
    auto status = c->ServerStatus("server");
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    EXPECT_EQ(d.Terminate(), 0);
  }
}

// A full disk is its own error (DiskFull, not Internal), logged once with the data directory,
// shown in Status; nothing acknowledged is lost, and writes resume once space returns. Needs a
// small file system: a tmpfs mounted over the store (root only; skipped elsewhere).
TEST(DiskFullTest, AFullDiskIsNamedLoggedOnceAndWritesResume) {
  std::string dir = MakeTempDir("htamd-full");
  const std::string store = dir + "/store";
  std::filesystem::create_directories(store);
  if (::mount("tmpfs", store.c_str(), "tmpfs", 0, "size=6m") != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (not root)";
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{store};
  {
    DaemonProcess d(dir);
    ASSERT_TRUE(d.Start()) << d.Log();
    auto c = d.Connect(10s);
    ASSERT_NE(c, nullptr);
    OpenSessionArgs open;
    open.task = "cpu_relu";
    auto info = c->OpenSession(open);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    auto step = c->NextStep(info->session->id);
    ASSERT_TRUE(step.ok());
    std::mt19937_64 rng(6);
    std::vector<uint64_t> acked;
    Status refused;
    for (int i = 0; i < 200 && refused.ok(); ++i) {
      RecordArgs r;
      r.session_id = info->session->id;
      r.direction_id = step->direction->id;
      r.speedup_after = 1.0f;
      r.source = "// " + std::to_string(i) + "\n";
      for (int k = 0; k < 200000; ++k) r.source.push_back(static_cast<char>('!' + rng() % 90));
      auto ack = c->Record(r);
      if (ack.ok())
        acked.push_back(*ack);
      else
        refused = ack.status();
    }
    ASSERT_FALSE(refused.ok()) << "6 MB never filled";
    EXPECT_NE(refused.message().find("DiskFull"), std::string::npos) << refused.ToString();
    EXPECT_EQ(refused.code(), Status::Code::kResourceExhausted) << refused.ToString();
    // A second refusal is not logged again.
    RecordArgs small;
    small.session_id = info->session->id;
    small.direction_id = step->direction->id;
    small.speedup_after = 1.0f;
    small.source = std::string(300000, 'y');
    EXPECT_FALSE(c->Record(small).ok());
    auto status = c->ServerStatus("server");
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(htam::testing::StatusValue(*status, "store_fault"), "DiskFull") << *status;
    const std::string log = d.Log();
    const size_t first = log.find("store fault DiskFull in data dir " + dir);
    EXPECT_NE(first, std::string::npos) << log;
    EXPECT_EQ(log.find("store fault DiskFull", first + 1), std::string::npos) << log;
    // Space returns: writes resume, and everything acknowledged is there.
    ASSERT_EQ(::mount("tmpfs", store.c_str(), "tmpfs", MS_REMOUNT, "size=64m"), 0);
    small.source = "// after";
    auto after = c->Record(small);
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    fb::QueryT q;
    q.kind = fb::QueryKind::Transitions;
    q.session_id = info->session->id;
    q.limit = 1000;
    auto all = c->Query(q);
    ASSERT_TRUE(all.ok());
    std::set<uint64_t> stored;
    for (auto& t : all->transitions) stored.insert(t->id);
    for (uint64_t id : acked) EXPECT_TRUE(stored.count(id)) << "acknowledged record " << id << " lost";
    EXPECT_NE(d.Log().find("store writes succeed again"), std::string::npos);
    EXPECT_EQ(d.Terminate(), 0);
  }
}

}  // namespace
}  // namespace htam
