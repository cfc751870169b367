// The one job type: EvalJob / EvalResult through schema/job.fbs and back, field by field, and
// buffers that must be refused (truncated, of another type, failing the verifier).
#include "daemon/eval/job_codec.h"

#include <gtest/gtest.h>

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
  r.profile.registers = 64;
  r.profile.shared_bytes = 4096;
  r.profile.spill_bytes = 8;
  r.profile.dram_throughput = 0.5f;
  r.profile.sm_throughput = 0.25f;
  r.profile.occupancy = 0.125f;
  r.profile.sol_fraction = 0.625f;
  r.profile.sm_clock_mhz = 1980;
  r.profile.mem_clock_mhz = 2619;
  r.candidate_hash = "ab12";
  r.device = "NVIDIA H100";
  r.arch = "sm_90";
  r.wall_ms = 812.5;
  r.bottleneck = fb::Bottleneck::Latency;
  r.stage_ms = {{"compile candidate", 300}, {"verify (seen shape #1)", 20.5}};
  r.op_ms = {{"compare", 1.5}};
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
  return r;
}

TEST(JobCodec, EveryJobFieldRoundTrips) {
  const EvalJob in = FullJob();
  auto out = UnpackJob(PackJob(JobToSpec(in)), "test");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EvalJob back = JobFromSpec(*out);
  EXPECT_EQ(back.job_id, in.job_id);
  EXPECT_EQ(back.task_dir, in.task_dir);
  EXPECT_EQ(back.backend, in.backend);
  EXPECT_EQ(back.arch, in.arch);
  EXPECT_EQ(back.language, in.language);
  EXPECT_EQ(back.source, in.source);  // an embedded NUL survives
  EXPECT_EQ(back.session_id, in.session_id);
  EXPECT_EQ(back.context, in.context);
  EXPECT_EQ(back.profile, in.profile);
}

TEST(JobCodec, CarrierFieldsRoundTrip) {
  fb::JobSpecT s = JobToSpec(FullJob());
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
  fb::JobResultT spec = ResultToSpec(in);
  spec.runner_clean = true;
  spec.attempt = 3;
  auto out = UnpackResult(PackResult(spec), "test");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->runner_clean);
  EXPECT_EQ(out->attempt, 3u);
  EvalResult back = ResultFromSpec(*out);
  EXPECT_EQ(back.job_id, in.job_id);
  EXPECT_EQ(back.status, in.status);
  EXPECT_EQ(back.diagnostics, in.diagnostics);
  EXPECT_EQ(back.median_us, in.median_us);
  EXPECT_EQ(back.spread_us, in.spread_us);
  EXPECT_EQ(back.repetitions, in.repetitions);
  EXPECT_EQ(back.baseline_us, in.baseline_us);
  EXPECT_EQ(back.speedup, in.speedup);
  EXPECT_TRUE(back.profile == in.profile);
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
}

TEST(JobCodec, AnAbsentProfileIsUnknownAndUnknownEnumsAreNotTrusted) {
  fb::JobResultT spec;
  spec.status = fb::OutcomeStatus(100);  // from a newer peer
  spec.bottleneck = fb::Bottleneck(100);
  auto out = UnpackResult(PackResult(spec), "test");
  ASSERT_TRUE(out.ok());
  EvalResult r = ResultFromSpec(*out);
  EXPECT_EQ(r.status, fb::OutcomeStatus::InfraError);
  EXPECT_EQ(r.bottleneck, fb::Bottleneck::Unknown);
  EXPECT_EQ(r.profile.registers, -1);
  EXPECT_EQ(r.profile.sol_fraction, -1.0f);
}

TEST(JobCodec, MalformedBuffersAreRefusedWithAClearError) {
  const std::string job = PackJob(JobToSpec(FullJob()));
  const std::string result = PackResult(ResultToSpec(FullResult()));
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
  const std::string job = PackJob(JobToSpec(FullJob()));
  std::string shifted = "x" + job;
  auto out = UnpackJob(std::string_view(shifted).substr(1), "job");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->source, FullJob().source);
}

}  // namespace
}  // namespace htam::eval
