// The deterministic test store of the CLI's tests.
#include "tools/cli/test_store.h"

#include <cmath>

#include "daemon/memory/memory.h"

namespace htam::cli::testing {
namespace {

namespace fb = ::htam::fb;

const char* const kPlan[] = {"global-memory-access",
                             "parallel-mapping-occupancy",
                             "fusion",
                             "on-chip-reuse-tiling",
                             "latency-hiding",
                             "reductions-scans",
                             "global-memory-access",
                             "parameter-tuning"};

memory::MemoryOptions Options(const std::string& data_dir) {
  memory::MemoryOptions mo;
  mo.dir = data_dir + "/store";
  mo.seed_file = "tools/cli/testdata/seed_small.json";
  mo.snapshot_interval_s = 0;
  mo.sync_commits = false;
  mo.map_size_mb = 64;
  return mo;
}

fb::TaskT Task(const char* name, const char* category, double flops, double bytes) {
  fb::TaskT t;
  t.name = name;
  t.category = category;
  t.description = std::string("test task ") + name;
  t.flops = flops;
  t.bytes = bytes;
  t.rtol = 1e-5;
  t.atol = 1e-6;
  auto b = std::make_unique<fb::BaselineT>();
  b->backend = "cuda";
  b->arch = "sm_90";
  b->median_us = 100;
  t.baselines.push_back(std::move(b));
  return t;
}

Status RunSession(memory::Memory& m, uint64_t task, int index, int steps, int salt) {
  bool cpu = index % 4 == 3;
  HTAM_ASSIGN_OR_RETURN(fb::SessionT s,
                        m.OpenSession(task, cpu ? "cpu" : "cuda", cpu ? "" : "sm_90", "test",
                                      "model-a", static_cast<uint32_t>(steps)));
  double best = 1.0;
  for (int k = 0; k < steps; ++k) {
    memory::StateInput st;
    st.bottleneck = (index + k) % 3 == 0 ? fb::Bottleneck::Memory : fb::Bottleneck::Latency;
    HTAM_ASSIGN_OR_RETURN(memory::Decision d, m.NextStep(s.id, st));
    (void)d;
    const char* dname = kPlan[(index * 3 + k * 5 + salt) % 8];
    HTAM_ASSIGN_OR_RETURN(fb::DirectionT dir, m.FindDirection(dname));
    memory::StrategyFilter f;
    f.direction_id = dir.id;
    HTAM_ASSIGN_OR_RETURN(auto strategies, m.ListStrategies(f));
    memory::StepInput in;
    in.session_id = s.id;
    in.direction_id = dir.id;
    if (!strategies.empty()) in.strategy_ids.push_back(strategies[0].id);
    int roll = (index * 7 + k * 3 + salt) % 10;
    in.status = roll == 0   ? fb::OutcomeStatus::CompileError
                : roll == 1 ? fb::OutcomeStatus::Incorrect
                            : fb::OutcomeStatus::Ok;
    double factor = 0.85 + 0.1 * ((index + 2 * k + salt) % 6);
    in.speedup_after = in.status == fb::OutcomeStatus::Ok ? best * factor : 0;
    if (in.status == fb::OutcomeStatus::Ok) best = std::max(best, in.speedup_after);
    in.median_us = in.speedup_after > 0 ? 100 / in.speedup_after : 0;
    in.verified = true;
    in.summary = std::string(strategies.empty() ? dname : strategies[0].title.c_str()) +
                 " applied to step " + std::to_string(k % 2) + (salt ? " at site two" : "");
    in.language = "cuda";
    in.source = "// session " + std::to_string(index) + " step " + std::to_string(k) + " salt " +
                std::to_string(salt) + "\nHTAM_KERNEL_ENTRY int htam_kernel() { return 0; }\n";
    in.candidate_hash = memory::CandidateHash(in.language, in.source);
    in.state = st;
    HTAM_RETURN_IF_ERROR(m.RecordStep(in).status());
  }
  return m.CloseSession(s.id).status();
}

}  // namespace

Status BuildTestStore(const std::string& data_dir, const TestStoreOptions& o) {
  HTAM_ASSIGN_OR_RETURN(auto m, memory::Memory::Open(Options(data_dir)));
  std::vector<uint64_t> tasks;
  for (auto t : {Task("relu", "elementwise", 1 << 20, 8 << 20),
                 Task("rowsum", "reduction", 1 << 22, 1 << 24),
                 Task("sgemm", "matmul", 2.0 * 1024 * 1024 * 1024, 12.0 * 1024 * 1024)}) {
    HTAM_ASSIGN_OR_RETURN(uint64_t id, m->PutTask(t));
    tasks.push_back(id);
  }
  for (int i = 0; i < o.sessions; ++i)
    HTAM_RETURN_IF_ERROR(
        RunSession(*m, tasks[static_cast<size_t>(i) % tasks.size()], i, o.steps, o.salt));
  return m->Sync();
}

Status AppendSession(const std::string& data_dir, int steps, int salt) {
  auto mo = Options(data_dir);
  mo.sync_commits = true;
  HTAM_ASSIGN_OR_RETURN(auto m, memory::Memory::Open(mo));
  HTAM_ASSIGN_OR_RETURN(fb::TaskT t, m->FindTask("relu"));
  return RunSession(*m, t.id, salt, steps, salt);
}

}  // namespace htam::cli::testing
