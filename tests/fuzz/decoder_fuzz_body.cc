// See decoder_fuzz_body.h.
#include "tests/fuzz/decoder_fuzz_body.h"

#include <memory>

#include "daemon/server/codec.h"

namespace htam::fuzz {

int FuzzDecoderOnce(const uint8_t* data, size_t size) {
  server::CodecLimits limits;
  limits.max_message_bytes = 1 << 20;
  limits.max_source_bytes = 1 << 16;
  server::AlignedFrame frame;
  frame.Assign(data, size);
  server::Decoded d = server::DecodeRequest(frame, limits);
  if (!d.ok) {
    // An error reply is always encodable.
    std::string reply = server::EncodeError(d.request_id, d.error, d.message);
    return reply.empty() ? -1 : 0;
  }
  std::unique_ptr<fb::EnvelopeT> env(d.envelope->UnPack());
  std::string again = server::Encode(*env);
  return again.empty() ? -1 : 1;
}

std::vector<std::string> SeedRequests() {
  // Ids far from those a test's own sessions get, so that a few flipped bits of a seed do not
  // turn it into a valid request on someone else's session during the live flood test.
  constexpr uint64_t kSession = 0x00F1F2F3F4F5F6F7ull;
  std::vector<std::string> out;
  auto add = [&out](auto body) {
    out.push_back(server::EncodeReply(static_cast<uint64_t>(out.size() + 1), std::move(body)));
  };
  fb::HelloT hello;
  hello.client = "seed";
  hello.client_version = "1";
  add(hello);
  fb::OpenSessionT open;
  open.task = "cpu_relu";
  open.backend = "cpu";
  open.budget = 6;
  add(open);
  fb::NextStepT next;
  next.session_id = kSession;
  next.embedding = {0.5f, -1.0f, 2.0f};
  add(next);
  fb::SubmitT submit;
  submit.session_id = kSession;
  submit.source = "extern \"C\" int htam_kernel() { return 0; }";
  submit.strategy_ids = {1, 2, 3};
  submit.summary = "vectorized";
  submit.wait = true;
  submit.progress = true;
  submit.profile = true;
  add(submit);
  fb::PollT poll;
  poll.job_id = kSession;
  poll.wait_ms = 100;
  add(poll);
  fb::RecordT record;
  record.session_id = kSession;
  record.direction_id = 2;
  record.strategy_ids = {4};
  record.summary = "tiling";
  record.speedup_after = 1.5f;
  add(record);
  fb::CloseSessionT close;
  close.session_id = kSession;
  add(close);
  fb::QueryT query;
  query.kind = fb::QueryKind::Strategies;
  query.task = "cpu_relu";
  add(query);
  fb::StatusRequestT status;
  status.section = "server";
  add(status);
  return out;
}

}  // namespace htam::fuzz
