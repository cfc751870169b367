// The codec accepts well-formed requests and refuses every malformed one without reading out of
// bounds (the fuzz target in tests/fuzz/ explores the rest).
#include "daemon/server/codec.h"

#include <gtest/gtest.h>

#include <random>

namespace htam::server {
namespace {

std::string HelloFrame(uint64_t rid, uint16_t version = 1) {
  fb::HelloT hello;
  hello.client = "test";
  fb::EnvelopeT env;
  env.version = version;
  env.request_id = rid;
  env.body.Set(std::move(hello));
  return Encode(env);
}

// The decoded envelope points into the frame: it stays valid until the next call.
Decoded DecodeBytes(const std::string& bytes, CodecLimits limits = {}) {
  static AlignedFrame f;
  f.Assign(bytes.data(), bytes.size());
  return DecodeRequest(f, limits);
}

TEST(CodecTest, AcceptsAWellFormedRequest) {
  Decoded d = DecodeBytes(HelloFrame(42));
  ASSERT_TRUE(d.ok) << d.message;
  EXPECT_EQ(d.request_id, 42u);
  EXPECT_EQ(d.envelope->body_type(), fb::Body::Hello);
  EXPECT_EQ(d.envelope->body_as_Hello()->client()->str(), "test");
}

TEST(CodecTest, RefusesGarbageEmptyAndForeignBuffers) {
  EXPECT_EQ(DecodeBytes("").error, fb::ErrorCode::Malformed);
  EXPECT_EQ(DecodeBytes("hello world, not a flatbuffer").error, fb::ErrorCode::Malformed);
  std::string other = HelloFrame(1);
  other[4] = 'X';  // file identifier
  EXPECT_EQ(DecodeBytes(other).error, fb::ErrorCode::Malformed);
}

TEST(CodecTest, TruncationsAreRefusedOrLoseOnlyPadding) {
  std::string full = HelloFrame(7);
  size_t refused = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    Decoded d = DecodeBytes(full.substr(0, n));
    if (!d.ok) {
      refused++;
      continue;
    }
    // Only trailing alignment padding may go: the content must be intact.
    EXPECT_EQ(d.envelope->body_as_Hello()->client()->str(), "test") << "prefix " << n;
  }
  EXPECT_GE(refused, full.size() - 4);
}

TEST(CodecTest, WrongVersionIsNamedAndKeepsTheRequestId) {
  Decoded d = DecodeBytes(HelloFrame(9, 2));
  EXPECT_EQ(d.error, fb::ErrorCode::UnsupportedVersion);
  EXPECT_EQ(d.request_id, 9u);
  EXPECT_NE(d.message.find("speaks 1"), std::string::npos);
}

TEST(CodecTest, RepliesAreNotRequests) {
  fb::StatusReplyT reply;
  reply.text = "x";
  Decoded d = DecodeBytes(EncodeReply(5, std::move(reply)));
  EXPECT_EQ(d.error, fb::ErrorCode::UnknownMessage);
  EXPECT_EQ(d.request_id, 5u);
}

TEST(CodecTest, EnforcesSizeLimits) {
  CodecLimits limits;
  limits.max_message_bytes = 16;
  EXPECT_EQ(DecodeBytes(HelloFrame(1), limits).error, fb::ErrorCode::Malformed);
  limits = CodecLimits{};
  limits.max_source_bytes = 10;
  fb::SubmitT submit;
  submit.source = std::string(11, 'x');
  Decoded d = DecodeBytes(EncodeReply(3, std::move(submit)), limits);
  EXPECT_EQ(d.error, fb::ErrorCode::InvalidArgument);
  EXPECT_NE(d.message.find("source"), std::string::npos);
}

// A hand-made frame can point strategy_ids at 8-byte ids that are only 4-byte aligned (the
// FlatBuffers verifier checks the length prefix alone): refused, never read.
TEST(CodecTest, MisalignedIdsAreRefused) {
  bool seen_misaligned = false;
  for (int pad = 0; pad < 2 && !seen_misaligned; ++pad) {
    flatbuffers::FlatBufferBuilder fbb;
    // Words: [count 1][id low][id high] as a uint32 vector; its second word, taken as the length
    // prefix of a ulong vector, gives one id right behind it, 4 bytes off the builder's grid.
    std::vector<uint32_t> words(4, 0);
    words[pad] = 1;
    words[pad + 1] = 7;
    auto carrier = fbb.CreateVector(words);
    flatbuffers::Offset<flatbuffers::Vector<uint64_t>> ids(carrier.o - 4 * (pad + 1));
    fb::SubmitBuilder sb(fbb);
    sb.add_strategy_ids(ids);
    auto submit = sb.Finish();
    fb::EnvelopeBuilder eb(fbb);
    eb.add_request_id(9);
    eb.add_body_type(fb::Body::Submit);
    eb.add_body(submit.Union());
    fb::FinishEnvelopeBuffer(fbb, eb.Finish());
    std::string bytes(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
    Decoded d = DecodeBytes(bytes);
    auto* env = fb::GetEnvelope(bytes.data());
    const void* first = env->body_as_Submit()->strategy_ids()->Data();
    // The decoder reads its own aligned copy: the same offsets, so the same remainder mod 8.
    const bool misaligned =
        (reinterpret_cast<uintptr_t>(first) - reinterpret_cast<uintptr_t>(bytes.data())) % 8 != 0;
    if (!misaligned) continue;
    seen_misaligned = true;
    EXPECT_FALSE(d.ok);
    EXPECT_EQ(d.error, fb::ErrorCode::InvalidArgument);
    EXPECT_NE(d.message.find("strategy_ids"), std::string::npos) << d.message;
  }
  EXPECT_TRUE(seen_misaligned);
}

TEST(CodecTest, RandomMutationsNeverCrash) {
  std::mt19937 rng(1234);
  std::string base = HelloFrame(77);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string m = base;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) m[rng() % m.size()] = static_cast<char>(rng());
    Decoded d = DecodeBytes(m);
    if (d.ok) {
      accepted++;
      // A verified envelope is safe to read entirely.
      std::unique_ptr<fb::EnvelopeT> copy(d.envelope->UnPack());
      EXPECT_NE(copy, nullptr);
    }
  }
  EXPECT_LT(accepted, 20000);
}

TEST(CodecTest, ErrorsRoundTrip) {
  std::string e = EncodeError(11, fb::ErrorCode::Busy, "later");
  auto env = fb::GetEnvelope(e.data());
  ASSERT_EQ(env->body_type(), fb::Body::Error);
  EXPECT_EQ(env->request_id(), 11u);
  EXPECT_EQ(env->body_as_Error()->code(), fb::ErrorCode::Busy);
  EXPECT_EQ(ErrorCodeFor(Status::NotFound("x")), fb::ErrorCode::NotFound);
}

}  // namespace
}  // namespace htam::server
