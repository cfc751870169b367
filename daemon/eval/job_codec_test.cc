// The one job type: EvalJob / EvalResult through their buffers and back, field by field (by hand
// and, for every field the schema declares, through its reflection data), and buffers that must
// be refused (truncated, of another type, failing the verifier).
#include "daemon/eval/job_codec.h"

#include <flatbuffers/reflection.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "base/hash.h"
#include "daemon/eval/evaluator.h"
#include "htam/schema/bfbs.h"

namespace htam::eval {
namespace {

EvalJob FullJob() {
  EvalJob j;
  j.job_id = 0x1122334455667788ull;
  j.task_dir = "/srv/tasks/softmax";
  j.backend = "cuda";
  j.arch = "sm_90";
  j.language = "cuda";
  j.source = std::string("extern \"C\" int f();\0tail", 25);
  j.session_id = 77;
  j.context = "{\"session\":77,\"step\":3}";
  j.profile = true;
  j.candidate_hash = CandidateKey(j.language, j.source);
  return j;
}

EvalResult FullResult() {
  EvalResult r;
  r.job_id = 9;
  r.status = fb::OutcomeStatus::Nondeterministic;
  r.diagnostics = "second run differs at [3]";
  r.median_us = 12.5;
  r.spread_us = 0.75;
  r.repetitions = 31;
  r.baseline_us = 40;
  r.speedup = 3.2;
  fb::ProfileT& p = fb::MutableProfile(&r);
  p.registers = 64;
  p.shared_bytes = 4096;
  p.spill_bytes = 8;
  p.dram_throughput = 0.5f;
  p.sm_throughput = 0.25f;
  p.occupancy = 0.125f;
  p.sol_fraction = 0.625f;
  p.sm_clock_mhz = 1980;
  p.mem_clock_mhz = 2619;
  r.candidate_hash = "ab12";
  r.device = "NVIDIA H100";
  r.arch = "sm_90";
  r.wall_ms = 812.5;
  r.bottleneck = fb::Bottleneck::Latency;
  r.stage_ms = {fb::MakeStageTime("compile candidate", 300),
                fb::MakeStageTime("verify (seen shape #1)", 20.5)};
  r.op_ms = {fb::MakeStageTime("compare", 1.5)};
  r.compile_cached = true;
  r.compile_ms = 310.5;
  r.cases = 6;
  r.flops = 2e9;
  r.bytes = 3e8;
  r.sol_us = 101.5;
  r.floor_us = 91.25;
  r.copy_bytes_per_s = 2.95e12;
  r.fp32_flops = 6.45e13;
  r.tensor16_flops = 6.25e14;
  r.golden_computed = true;
  r.baseline_compile_us = 77.5;
  r.baseline_note = "PyTorch eager on cuda; torch.compile measured";
  r.profile_note = "ncu: Memory-bound";
  r.profiled_kernels = 2;
  r.profiled_us = 55.5;
  r.baseline_spread_us = 1.25;
  return r;
}

TEST(JobCodec, EveryJobFieldRoundTrips) {
  const EvalJob in = FullJob();
  auto out = UnpackJob(PackJob(in), "test");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EvalJob back(std::move(*out));
  EXPECT_EQ(back.job_id, in.job_id);
  EXPECT_EQ(back.task_dir, in.task_dir);
  EXPECT_EQ(back.backend, in.backend);
  EXPECT_EQ(back.arch, in.arch);
  EXPECT_EQ(back.language, in.language);
  EXPECT_EQ(back.source, in.source);  // an embedded NUL survives
  EXPECT_EQ(back.session_id, in.session_id);
  EXPECT_EQ(back.context, in.context);
  EXPECT_EQ(back.profile, in.profile);
  EXPECT_EQ(back.candidate_hash, in.candidate_hash);
  EXPECT_TRUE(static_cast<const fb::JobSpecT&>(back) == in);  // and every other field
}

// A job of a peer that does not know candidate_hash (a buffer without the field) still reads;
// its key is "" (the evaluator and the gate then compute it).
TEST(JobCodec, AJobWithoutACandidateHashReads) {
  flatbuffers::FlatBufferBuilder b;
  auto backend = b.CreateString("cpu");
  auto source = b.CreateString("int x;");
  fb::JobSpecBuilder jb(b);
  jb.add_job_id(5);
  jb.add_backend(backend);
  jb.add_source(source);
  b.Finish(jb.Finish(), kJobIdentifier);
  auto out =
      UnpackJob(std::string_view(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()),
                "old job");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->job_id, 5u);
  EXPECT_EQ(out->source, "int x;");
  EXPECT_TRUE(out->candidate_hash.empty());
}

TEST(JobCodec, CarrierFieldsRoundTrip) {
  fb::JobSpecT s = FullJob();
  s.attempt = 4;
  s.task_name = "softmax";
  auto f = std::make_unique<fb::TaskFileT>();
  f->name = "task.json";
  f->content = {'{', '}', 0, 0xff};
  s.task_files.push_back(std::move(f));
  s.reference_only = true;
  s.max_case_bytes = 1u << 30;
  s.gate = std::make_unique<fb::GateSpecT>();
  s.gate->seeds = 5;
  s.gate->seed_base = 123456789012345ull;
  s.gate->time_baseline = false;
  s.gate->golden_python = "/opt/py";
  s.gate->kernelbench_call_timeout_s = 7.5;
  s.profile_request = std::make_unique<fb::ProfileRequestT>();
  s.profile_request->tool = "/usr/bin/ncu";
  s.profile_request->memory_pct = 60;
  auto out = UnpackJob(PackJob(s), "test");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(*out == s);  // the generated comparison: every field, nested tables included
}

TEST(JobCodec, EveryResultFieldRoundTrips) {
  const EvalResult in = FullResult();
  EvalResult spec = in;
  spec.runner_clean = true;
  spec.attempt = 3;
  auto out = UnpackResult(PackResult(spec), "test");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->runner_clean);
  EXPECT_EQ(out->attempt, 3u);
  EXPECT_TRUE(*out == spec);  // the generated comparison: every field, nested tables included
  const EvalResult& back = *out;
  EXPECT_EQ(back.job_id, in.job_id);
  EXPECT_EQ(back.status, in.status);
  EXPECT_EQ(back.diagnostics, in.diagnostics);
  EXPECT_EQ(back.median_us, in.median_us);
  EXPECT_EQ(back.spread_us, in.spread_us);
  EXPECT_EQ(back.repetitions, in.repetitions);
  EXPECT_EQ(back.baseline_us, in.baseline_us);
  EXPECT_EQ(back.speedup, in.speedup);
  EXPECT_TRUE(fb::ProfileOf(back) == fb::ProfileOf(in));
  EXPECT_EQ(back.candidate_hash, in.candidate_hash);
  EXPECT_EQ(back.device, in.device);
  EXPECT_EQ(back.arch, in.arch);
  EXPECT_EQ(back.wall_ms, in.wall_ms);
  EXPECT_EQ(back.bottleneck, in.bottleneck);
  EXPECT_EQ(back.stage_ms, in.stage_ms);
  EXPECT_EQ(back.op_ms, in.op_ms);
  EXPECT_EQ(back.compile_ms, in.compile_ms);
  EXPECT_EQ(back.cases, in.cases);
  EXPECT_EQ(back.flops, in.flops);
  EXPECT_EQ(back.bytes, in.bytes);
  EXPECT_EQ(back.sol_us, in.sol_us);
  EXPECT_EQ(back.floor_us, in.floor_us);
  EXPECT_EQ(back.copy_bytes_per_s, in.copy_bytes_per_s);
  EXPECT_EQ(back.fp32_flops, in.fp32_flops);
  EXPECT_EQ(back.tensor16_flops, in.tensor16_flops);
  EXPECT_EQ(back.golden_computed, in.golden_computed);
  EXPECT_EQ(back.baseline_compile_us, in.baseline_compile_us);
  EXPECT_EQ(back.baseline_note, in.baseline_note);
  EXPECT_EQ(back.profile_note, in.profile_note);
  EXPECT_EQ(back.profiled_kernels, in.profiled_kernels);
  EXPECT_EQ(back.profiled_us, in.profiled_us);
  EXPECT_EQ(back.compile_cached, in.compile_cached);
  EXPECT_EQ(back.baseline_spread_us, in.baseline_spread_us);
}

TEST(JobCodec, AnAbsentProfileIsUnknownAndUnknownEnumsAreNotTrusted) {
  fb::JobResultT spec;
  spec.status = fb::OutcomeStatus(100);  // from a newer peer
  spec.bottleneck = fb::Bottleneck(100);
  auto out = UnpackResult(PackResult(spec), "test");
  ASSERT_TRUE(out.ok());
  const EvalResult& r = *out;
  EXPECT_EQ(r.status, fb::OutcomeStatus::InfraError);
  EXPECT_EQ(r.bottleneck, fb::Bottleneck::Unknown);
  EXPECT_EQ(fb::ProfileOf(r).registers, -1);
  EXPECT_EQ(fb::ProfileOf(r).sol_fraction, -1.0f);
}

// A result written before JobResult gained baseline_spread_us (its last field) reads, the new
// field at its default.
TEST(JobCodec, AResultOfThePreviousVersionReads) {
  flatbuffers::FlatBufferBuilder fbb;
  auto diagnostics = fbb.CreateString("ok");
  fb::JobResultBuilder b(fbb);
  b.add_job_id(7);
  b.add_status(fb::OutcomeStatus::Ok);
  b.add_diagnostics(diagnostics);
  b.add_median_us(2.5);
  b.add_runner_retired(true);
  fbb.Finish(b.Finish(), kResultIdentifier);
  auto out = UnpackResult(
      std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()),
      "test");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->job_id, 7u);
  EXPECT_EQ(out->status, fb::OutcomeStatus::Ok);
  EXPECT_EQ(out->diagnostics, "ok");
  EXPECT_EQ(out->median_us, 2.5);
  EXPECT_TRUE(out->runner_retired);
  EXPECT_EQ(out->baseline_spread_us, 0);
}

TEST(JobCodec, MalformedBuffersAreRefusedWithAClearError) {
  const std::string job = PackJob(FullJob());
  const std::string result = PackResult(FullResult());
  // Too short.
  auto r = UnpackJob(job.substr(0, 6), "queued job");
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r.status().message().find("queued job"), std::string::npos);
  EXPECT_NE(r.status().message().find("too short"), std::string::npos);
  // The wrong type: a result where a job is expected, and the other way round.
  r = UnpackJob(result, "job frame");
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r.status().message().find("HTJR"), std::string::npos) << r.status().message();
  EXPECT_FALSE(UnpackResult(job, "result").ok());
  EXPECT_FALSE(UnpackJob("{\"job_id\":1,\"backend\":\"cpu\"}", "job").ok());
  // Truncated: the identifier is there, the tables are cut.
  // (The last bytes of a buffer can be padding: cut into the first string written, task_dir.)
  for (size_t n : {size_t(12), job.size() / 2, job.size() - 16}) {
    auto t = UnpackJob(job.substr(0, n), "job");
    EXPECT_EQ(t.status().code(), Status::Code::kCorruption) << n;
  }
  // Offsets pointing out of the buffer: the verifier refuses it.
  std::string bad = job;
  bad[0] = char(0xf0);
  bad[1] = char(0xff);
  auto v = UnpackJob(bad, "job");
  EXPECT_EQ(v.status().code(), Status::Code::kCorruption);
  EXPECT_NE(v.status().message().find("verifier"), std::string::npos) << v.status().message();
  // Every single-byte corruption of a job is refused or read; never a crash.
  for (size_t i = 0; i < job.size(); ++i) {
    std::string c = job;
    c[i] = char(c[i] ^ 0x5a);
    (void)UnpackJob(c, "job");
  }
}

TEST(JobCodec, AnUnalignedBufferIsRead) {
  const std::string job = PackJob(FullJob());
  std::string shifted = "x" + job;
  auto out = UnpackJob(std::string_view(shifted).substr(1), "job");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->source, FullJob().source);
}

// Every field the schema declares, filled and compared through the schema's reflection data
// (schema/job.fbs, embedded): a field added to JobSpec or JobResult is covered by the two tests
// below without editing them, and one that a carrier loses fails them by name.
class SchemaWalk {
 public:
  SchemaWalk() {
    auto b = fb::JobBinarySchema();
    flatbuffers::Verifier v(b.data(), b.size());
    EXPECT_TRUE(reflection::VerifySchemaBuffer(v));
    schema_ = reflection::GetSchema(b.data());
  }

  const reflection::Object& Table(const char* name) const {
    const auto* o = schema_->objects()->LookupByKey((std::string("htam.fb.") + name).c_str());
    EXPECT_NE(o, nullptr) << name;
    return *o;
  }

  // A buffer of table `o` whose every field (nested tables and vectors too) holds a value other
  // than its default, distinct per field; enums take a declared value.
  std::string Full(const reflection::Object& o, const char* identifier) const {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(flatbuffers::Offset<flatbuffers::Table>(Fill(fbb, o, 0)), identifier);
    return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  }

  // Every field of `o` in buffer `sent` kept in buffer `back`, and none of the schema's skipped.
  void ExpectAllKept(const reflection::Object& o, const std::string& sent,
                     const std::string& back) const {
    auto root = [](const std::string& b) {
      return flatbuffers::GetAnyRoot(reinterpret_cast<const uint8_t*>(b.data()));
    };
    EXPECT_GE(ExpectSame(o, *root(sent), *root(back), o.name()->str()), Declared(o));
  }

  // Every field of `o` in `want` equals its value in `got` (absent = default, so a field that was
  // dropped differs). Returns the number of fields compared.
  int ExpectSame(const reflection::Object& o, const flatbuffers::Table& want,
                 const flatbuffers::Table& got, const std::string& path) const {
    int n = 0;
    for (const reflection::Field* f : *o.fields()) {
      if (f->deprecated()) continue;
      const std::string at = path + "." + f->name()->str();
      const reflection::BaseType bt = f->type()->base_type();
      ++n;
      if (bt == reflection::Float || bt == reflection::Double) {
        EXPECT_EQ(flatbuffers::GetAnyFieldF(want, *f), flatbuffers::GetAnyFieldF(got, *f)) << at;
      } else if (flatbuffers::IsScalar(bt)) {
        EXPECT_EQ(flatbuffers::GetAnyFieldI(want, *f), flatbuffers::GetAnyFieldI(got, *f)) << at;
      } else if (bt == reflection::String) {
        EXPECT_EQ(flatbuffers::GetAnyFieldS(want, *f, schema_),
                  flatbuffers::GetAnyFieldS(got, *f, schema_))
            << at;
      } else if (bt == reflection::Obj) {
        const auto* w = flatbuffers::GetFieldT(want, *f);
        const auto* g = flatbuffers::GetFieldT(got, *f);
        EXPECT_TRUE(w && g) << at << " missing";
        if (w && g) n += ExpectSame(Object(*f->type()), *w, *g, at);
      } else if (bt == reflection::Vector) {
        n += ExpectSameVector(*f, want, got, at);
      } else {
        ADD_FAILURE() << at << ": a field kind this test does not fill";
      }
    }
    return n;
  }

 private:
  const reflection::Object& Object(const reflection::Type& t) const {
    return *schema_->objects()->Get(t.index());
  }

  // A value of scalar field `f` (or vector element of type `t`) that is not the default.
  int64_t Integer(const reflection::Type& t, int64_t def, int salt) const {
    // An enum is an integer type (or a vector of one) with an index; a vector of tables also
    // has an index, into the objects.
    const reflection::BaseType k = t.base_type() == reflection::Vector ? t.element() : t.base_type();
    if (k >= reflection::UType && k <= reflection::ULong && t.index() >= 0) {
      // an enum: its last declared value that is not the default
      const auto* values = schema_->enums()->Get(t.index())->values();
      for (size_t i = values->size(); i-- > 0;)
        if (values->Get(flatbuffers::uoffset_t(i))->value() != def)
          return values->Get(flatbuffers::uoffset_t(i))->value();
    }
    return def + 1 + salt;
  }

  template <typename T>
  static flatbuffers::uoffset_t Scalars(flatbuffers::FlatBufferBuilder& fbb, T a, T b) {
    return fbb.CreateVector(std::vector<T>{a, b}).o;
  }

  flatbuffers::uoffset_t Vector(flatbuffers::FlatBufferBuilder& fbb, const reflection::Field& f,
                                int depth) const {
    const reflection::Type& t = *f.type();
    const int64_t i = Integer(t, 0, f.id());
    const double d = 2.5 + f.id();
    switch (t.element()) {
      case reflection::String: {
        std::vector<flatbuffers::Offset<flatbuffers::String>> v = {
            fbb.CreateString(f.name()->str() + " #1"), fbb.CreateString(f.name()->str() + " #2")};
        return fbb.CreateVector(v).o;
      }
      case reflection::Obj: {
        std::vector<flatbuffers::Offset<flatbuffers::Table>> v;
        for (int k = 0; k < 2; ++k) v.emplace_back(Fill(fbb, Object(t), depth + 1));
        return fbb.CreateVector(v).o;
      }
      case reflection::Bool: return Scalars<uint8_t>(fbb, 1, 0);
      case reflection::Byte: return Scalars<int8_t>(fbb, int8_t(i), 3);
      case reflection::UByte: return Scalars<uint8_t>(fbb, uint8_t(i), 0xff);
      case reflection::Short: return Scalars<int16_t>(fbb, int16_t(i), -3);
      case reflection::UShort: return Scalars<uint16_t>(fbb, uint16_t(i), 3);
      case reflection::Int: return Scalars<int32_t>(fbb, int32_t(i), -3);
      case reflection::UInt: return Scalars<uint32_t>(fbb, uint32_t(i), 3);
      case reflection::Long: return Scalars<int64_t>(fbb, i, -3);
      case reflection::ULong: return Scalars<uint64_t>(fbb, uint64_t(i), 3);
      case reflection::Float: return Scalars<float>(fbb, float(d), -0.5f);
      case reflection::Double: return Scalars<double>(fbb, d, -0.5);
      default:
        ADD_FAILURE() << f.name()->str() << ": a vector kind this test does not fill";
        return 0;
    }
  }

  flatbuffers::uoffset_t Fill(flatbuffers::FlatBufferBuilder& fbb, const reflection::Object& o,
                              int depth) const {
    EXPECT_FALSE(o.is_struct()) << o.name()->str() << ": a struct field this test does not fill";
    EXPECT_LT(depth, 8) << "the job tables nest deeper than expected";
    std::vector<const reflection::Field*> fields(o.fields()->begin(), o.fields()->end());
    std::vector<flatbuffers::uoffset_t> offsets(fields.size(), 0);
    for (size_t k = 0; k < fields.size(); ++k) {  // children first, outside the table
      const reflection::Field& f = *fields[k];
      const reflection::BaseType bt = f.type()->base_type();
      if (f.deprecated() || depth >= 8) continue;
      if (bt == reflection::String)
        offsets[k] = fbb.CreateString(f.name()->str() + " of " + o.name()->str()).o;
      else if (bt == reflection::Obj)
        offsets[k] = Fill(fbb, Object(*f.type()), depth + 1);
      else if (bt == reflection::Vector)
        offsets[k] = Vector(fbb, f, depth);
      else if (!flatbuffers::IsScalar(bt))
        ADD_FAILURE() << f.name()->str() << ": a field kind this test does not fill";
    }
    const flatbuffers::uoffset_t start = fbb.StartTable();
    for (size_t k = 0; k < fields.size(); ++k) {
      const reflection::Field& f = *fields[k];
      if (f.deprecated()) continue;
      const flatbuffers::voffset_t at = f.offset();
      const int64_t di = f.default_integer();
      const int64_t i = Integer(*f.type(), di, f.id());
      const double d = f.default_real() + 1.5 + f.id();
      switch (f.type()->base_type()) {
        case reflection::Bool: fbb.AddElement<uint8_t>(at, di ? 0 : 1, uint8_t(di)); break;
        case reflection::Byte: fbb.AddElement<int8_t>(at, int8_t(i), int8_t(di)); break;
        case reflection::UByte: fbb.AddElement<uint8_t>(at, uint8_t(i), uint8_t(di)); break;
        case reflection::Short: fbb.AddElement<int16_t>(at, int16_t(i), int16_t(di)); break;
        case reflection::UShort: fbb.AddElement<uint16_t>(at, uint16_t(i), uint16_t(di)); break;
        case reflection::Int: fbb.AddElement<int32_t>(at, int32_t(i), int32_t(di)); break;
        case reflection::UInt: fbb.AddElement<uint32_t>(at, uint32_t(i), uint32_t(di)); break;
        case reflection::Long: fbb.AddElement<int64_t>(at, i, di); break;
        case reflection::ULong: fbb.AddElement<uint64_t>(at, uint64_t(i), uint64_t(di)); break;
        case reflection::Float: fbb.AddElement<float>(at, float(d), float(f.default_real())); break;
        case reflection::Double: fbb.AddElement<double>(at, d, f.default_real()); break;
        default:
          if (offsets[k]) fbb.AddOffset(at, flatbuffers::Offset<void>(offsets[k]));
      }
    }
    return fbb.EndTable(start);
  }

  int ExpectSameVector(const reflection::Field& f, const flatbuffers::Table& want,
                       const flatbuffers::Table& got, const std::string& at) const {
    const auto* w = flatbuffers::GetFieldAnyV(want, f);
    const auto* g = flatbuffers::GetFieldAnyV(got, f);
    EXPECT_TRUE(w && g) << at << " missing";
    if (!w || !g) return 0;
    EXPECT_EQ(w->size(), g->size()) << at;
    if (w->size() != g->size()) return 0;
    int n = 0;
    const reflection::BaseType et = f.type()->element();
    for (flatbuffers::uoffset_t k = 0; k < w->size(); ++k) {
      const std::string item = at + "[" + std::to_string(k) + "]";
      if (et == reflection::Float || et == reflection::Double) {
        EXPECT_EQ(flatbuffers::GetAnyVectorElemF(w, et, k),
                  flatbuffers::GetAnyVectorElemF(g, et, k))
            << item;
      } else if (flatbuffers::IsScalar(et)) {
        EXPECT_EQ(flatbuffers::GetAnyVectorElemI(w, et, k),
                  flatbuffers::GetAnyVectorElemI(g, et, k))
            << item;
      } else if (et == reflection::String) {
        EXPECT_EQ(flatbuffers::GetAnyVectorElemPointer<const flatbuffers::String>(w, k)->str(),
                  flatbuffers::GetAnyVectorElemPointer<const flatbuffers::String>(g, k)->str())
            << item;
      } else if (et == reflection::Obj) {
        n +=
            ExpectSame(Object(*f.type()),
                       *flatbuffers::GetAnyVectorElemPointer<const flatbuffers::Table>(w, k),
                       *flatbuffers::GetAnyVectorElemPointer<const flatbuffers::Table>(g, k), item);
      }
    }
    return n;
  }

  // The number of fields a table declares, nested tables included once.
  int Declared(const reflection::Object& o) const {
    int n = 0;
    for (const reflection::Field* f : *o.fields()) {
      if (f->deprecated()) continue;
      ++n;
      const reflection::BaseType bt = f->type()->base_type();
      if (bt == reflection::Obj ||
          (bt == reflection::Vector && f->type()->element() == reflection::Obj))
        n += Declared(Object(*f->type()));
    }
    return n;
  }

  const reflection::Schema* schema_ = nullptr;
};

TEST(JobCodec, EverySchemaFieldOfAResultSurvivesTheEvaluatorsPath) {
  SchemaWalk walk;
  const reflection::Object& o = walk.Table("JobResult");
  const std::string sent = walk.Full(o, kResultIdentifier);
  // The worker's frame unpacked by the evaluator, kept as its EvalResult, packed again for a
  // remote answer or the next carrier.
  auto got = UnpackResult(sent, "test");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EvalResult r = std::move(*got);
  EvalResult copy = r;  // results are copied by value (callbacks, promises)
  walk.ExpectAllKept(o, sent, PackResult(copy));
}

TEST(JobCodec, EverySchemaFieldOfAJobSurvivesTheEvaluatorsPath) {
  SchemaWalk walk;
  const reflection::Object& o = walk.Table("JobSpec");
  const std::string sent = walk.Full(o, kJobIdentifier);
  // A job as the durable queue or the remote protocol hands it to the daemon (EvalJob), and as
  // the evaluator forwards it to its worker.
  auto got = UnpackJob(sent, "test");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const EvalJob job(std::move(*got));
  const fb::JobSpecT frame = job;
  walk.ExpectAllKept(o, sent, PackJob(frame));
}

}  // namespace
}  // namespace htam::eval
