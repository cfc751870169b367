// See decoder_fuzz_body.h.
#include "tests/fuzz/decoder_fuzz_body.h"

#include <cmath>
#include <limits>
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
  hello.identity_secret.assign(16, 0x5a);
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

namespace {

std::string RandomText(std::mt19937_64& rng) {
  static const char* const kTexts[] = {
      "",         "cpu_relu", "cpu",         "cuda",        "cpp",       "kernelbench",
      "tiled",    "\xC3\x28", "a\xFF\xFEb",  "\xED\xA0\x80", "line\nbreak", "curve: on\n# x",
      "../../etc", "bad name!", "\x01\x02\x7f", "\xF0\x9F\x98\x80"};
  std::string s = kTexts[rng() % (sizeof kTexts / sizeof *kTexts)];
  switch (rng() % 6) {
    case 0: s.append(rng() % 5000, static_cast<char>('a' + rng() % 26)); break;
    case 1:
      for (int i = static_cast<int>(rng() % 64); i > 0; --i) s.push_back(static_cast<char>(rng()));
      break;
    case 2: s.append(70000, 'x'); break;  // past every name and summary limit
    default: break;
  }
  return s;
}

double RandomNumber(std::mt19937_64& rng) {
  static const double kValues[] = {0,
                                   1,
                                   -1,
                                   1.5,
                                   -3,
                                   3.4e38,
                                   1e300,
                                   std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::denorm_min()};
  return kValues[rng() % (sizeof kValues / sizeof *kValues)];
}

uint64_t RandomId(std::mt19937_64& rng, const std::vector<uint64_t>& known) {
  switch (rng() % 5) {
    case 0: return 0;
    case 1: return rng();
    case 2: return std::numeric_limits<uint64_t>::max();
    default: return known.empty() ? rng() % 100 : known[rng() % known.size()];
  }
}

std::vector<uint64_t> RandomIds(std::mt19937_64& rng, const std::vector<uint64_t>& known) {
  std::vector<uint64_t> v(rng() % 3 == 0 ? rng() % 6000 : rng() % 4);
  for (auto& x : v) x = RandomId(rng, known);
  return v;
}

}  // namespace

std::string RandomRequest(std::mt19937_64& rng, const KnownIds& ids, bool mutate) {
  fb::EnvelopeT env;
  env.version = static_cast<uint16_t>(fb::ProtocolVersion::Current);
  env.request_id = rng();
  switch (rng() % 9) {
    case 0: {
      fb::HelloT m;
      m.client = RandomText(rng);
      m.client_version = RandomText(rng);
      // Empty, or a length the door refuses (1-15, 65-100 bytes): a valid secret would make
      // the live fuzz socket another client, whose driving requests stop at the owner check.
      if (rng() % 2) {
        const size_t n = rng() % 2 ? 1 + rng() % 15 : 65 + rng() % 36;
        for (size_t i = 0; i < n; ++i) m.identity_secret.push_back(static_cast<uint8_t>(rng()));
      }
      env.body.Set(std::move(m));
      break;
    }
    case 1: {
      fb::OpenSessionT m;
      m.session_id = rng() % 2 ? RandomId(rng, ids.sessions) : 0;
      m.task = rng() % 2 ? "cpu_relu" : RandomText(rng);
      m.backend = rng() % 2 ? "cpu" : RandomText(rng);
      m.arch = RandomText(rng);
      m.client = RandomText(rng);
      m.model = RandomText(rng);
      m.budget = static_cast<uint32_t>(rng());
      env.body.Set(std::move(m));
      break;
    }
    case 2: {
      fb::NextStepT m;
      m.session_id = RandomId(rng, ids.sessions);
      m.embedding.resize(rng() % 3 == 0 ? rng() % 70000 : rng() % 8);
      for (auto& f : m.embedding) f = static_cast<float>(RandomNumber(rng));
      m.bottleneck = static_cast<fb::Bottleneck>(rng() % 256);
      env.body.Set(std::move(m));
      break;
    }
    case 3: {
      fb::SubmitT m;
      m.session_id = RandomId(rng, ids.sessions);
      m.source = rng() % 4 ? "extern \"C\" int htam_kernel() { return 0; }" : RandomText(rng);
      m.language = rng() % 2 ? "" : RandomText(rng);
      m.direction_id = RandomId(rng, ids.directions);
      m.strategy_ids = RandomIds(rng, ids.strategies);
      m.summary = RandomText(rng);
      m.wait = false;  // a fuzzer never waits on an evaluation
      m.progress = rng() % 2;
      m.profile = rng() % 2;
      env.body.Set(std::move(m));
      break;
    }
    case 4: {
      fb::PollT m;
      m.job_id = RandomId(rng, ids.jobs);
      m.wait_ms = rng() % 4 == 0 ? static_cast<uint32_t>(rng() % 50) : 0;
      env.body.Set(std::move(m));
      break;
    }
    case 5: {
      fb::RecordT m;
      m.session_id = RandomId(rng, ids.sessions);
      m.direction_id = RandomId(rng, ids.directions);
      m.strategy_ids = RandomIds(rng, ids.strategies);
      m.summary = RandomText(rng);
      m.status = static_cast<fb::OutcomeStatus>(rng() % 256);
      m.speedup_after = static_cast<float>(RandomNumber(rng));
      m.median_us = RandomNumber(rng);
      m.source = rng() % 2 ? "" : RandomText(rng);
      env.body.Set(std::move(m));
      break;
    }
    case 6: {
      fb::CloseSessionT m;
      // Mostly unknown ids: a fuzzer that closes the live session only ends its own run early.
      m.session_id = rng() % 8 == 0 ? RandomId(rng, ids.sessions) : rng() | 1ull << 63;
      env.body.Set(std::move(m));
      break;
    }
    case 7: {
      fb::QueryT m;
      m.kind = static_cast<fb::QueryKind>(rng() % 256);
      m.id = RandomId(rng, rng() % 2 ? ids.strategies : ids.sessions);
      m.direction_id = RandomId(rng, ids.directions);
      m.session_id = RandomId(rng, ids.sessions);
      m.task = rng() % 2 ? "" : RandomText(rng);
      m.backend = rng() % 2 ? "" : RandomText(rng);
      m.limit = static_cast<uint32_t>(rng() % 3 ? rng() % 200 : rng());
      m.cursor = rng() % 3 ? 0 : rng() % 1000;
      m.with_sources = rng() % 2;
      env.body.Set(std::move(m));
      break;
    }
    default: {
      fb::StatusRequestT m;
      m.section = rng() % 2 ? "" : RandomText(rng);
      env.body.Set(std::move(m));
      break;
    }
  }
  std::string frame = server::Encode(env);
  if (mutate && !frame.empty()) {
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0 && !frame.empty(); --k) {
      size_t pos = 8 + rng() % (frame.size() > 8 ? frame.size() - 8 : 1);  // keeps the header
      pos = std::min(pos, frame.size() - 1);
      switch (rng() % 3) {
        case 0: frame[pos] = static_cast<char>(rng()); break;
        case 1: frame[pos] ^= static_cast<char>(1u << (rng() % 8)); break;
        default: frame.insert(pos, 1, static_cast<char>(rng())); break;
      }
    }
  }
  return frame;
}

}  // namespace htam::fuzz
