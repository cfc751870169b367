// The generated code round-trips records and the verifier rejects damaged buffers.
#include <gtest/gtest.h>

#include "htam/schema/protocol_generated.h"

namespace htam::fb {
namespace {

TEST(SchemaTest, EnvelopeRoundTripsAndVerifies) {
  EnvelopeT env;
  env.request_id = 42;
  auto hello = std::make_unique<HelloT>();
  hello->client = "test";
  env.body.Set(std::move(*hello));
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(Envelope::Pack(fbb, &env), EnvelopeIdentifier());
  flatbuffers::Verifier v(fbb.GetBufferPointer(), fbb.GetSize());
  ASSERT_TRUE(VerifyEnvelopeBuffer(v));
  const Envelope* e = GetEnvelope(fbb.GetBufferPointer());
  EXPECT_EQ(e->version(), 1);
  EXPECT_EQ(e->request_id(), 42u);
  ASSERT_EQ(e->body_type(), Body::Hello);
  EXPECT_EQ(e->body_as_Hello()->client()->str(), "test");
}

TEST(SchemaTest, VerifierRejectsTruncatedBuffers) {
  DirectionT d;
  d.id = 7;
  d.name = "global-memory-access";
  d.targets = {Bottleneck::Memory};
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(Direction::Pack(fbb, &d));
  // Cutting into the data is always caught; only trailing alignment padding may be dropped, and a
  // buffer that still verifies must decode to the same record.
  int rejected = 0;
  for (size_t n = 0; n < fbb.GetSize(); ++n) {
    flatbuffers::Verifier v(fbb.GetBufferPointer(), n);
    if (!v.VerifyBuffer<Direction>(nullptr)) {
      ++rejected;
    } else {
      EXPECT_EQ(flatbuffers::GetRoot<Direction>(fbb.GetBufferPointer())->name()->str(),
                "global-memory-access");
    }
  }
  EXPECT_GE(rejected, static_cast<int>(fbb.GetSize()) - 8);
  std::unique_ptr<DirectionT> back(
      flatbuffers::GetRoot<Direction>(fbb.GetBufferPointer())->UnPack());
  EXPECT_EQ(back->name, "global-memory-access");
  EXPECT_FLOAT_EQ(back->prior, 0.5f);
}

}  // namespace
}  // namespace htam::fb
