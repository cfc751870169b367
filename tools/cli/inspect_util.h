// Building blocks of the read-only subcommands: status sections, edge summaries, record lookup,
// trajectories and the per-category ranking of strategies. Pure functions over a Source.
// Thread-safety: plain functions; a Source is not shared between threads.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tools/cli/records_json.h"
#include "tools/cli/source.h"

namespace htam::cli {

// ---- status ----
// "# section" / "key:value" (or "key: value") text -> {"section": {"key": value}}; numbers parsed.
Json ParseInfo(const std::string& text);
std::string FormatInfo(const Json& sections);
// The status of a store read directly: store, records, indexes (snapshot coverage), daemon.
Result<Json> LocalStatus(const std::string& data_dir);

// ---- edges ----
struct EdgeSummary {
  uint64_t from = 0, to = 0;
  uint32_t cluster = 0;  // meaningful when split by cluster
  fb::GainStats stats;
};
// Sums clusters unless by_cluster; sorted by from, then count (descending), then to.
std::vector<EdgeSummary> SummarizeEdges(const std::vector<fb::TransitionEdgeT>& edges,
                                        bool by_cluster);
fb::GainStats AddStats(const fb::GainStats& a, const fb::GainStats& b);
Json EdgeJson(const EdgeSummary& e, const std::vector<fb::DirectionT>& dirs);

// ---- strategies ----
Result<uint64_t> ResolveDirection(const std::vector<fb::DirectionT>& dirs,
                                  const std::string& name_or_id);
// min_arch empty, or arch of the same family and at least min_arch (sm_90 >= sm_80; gfx by name).
bool ArchApplies(const std::string& arch, const std::string& min_arch);
// Strategies credited by steps on tasks of this category or born from such tasks.
Result<std::set<uint64_t>> StrategiesOfCategory(Source& src, const std::string& category);
void SortStrategies(std::vector<fb::StrategyT>* v, const std::string& by);  // id | effect | uses

// ---- records ----
Result<uint64_t> ParseId(const std::string& text, const char* what);
// "kind:id", a bare id (every kind that has it), a direction or task name, or a candidate hash.
// Each result is {"kind": ..., "record": {...}}.
Result<std::vector<Json>> FindRecords(Source& src, const std::string& what);
void PrintRecord(std::ostream& out, const Json& rec);

// ---- trajectories ----
struct TrajectoryStep {
  uint32_t step = 0;
  uint64_t transition_id = 0;
  std::string direction, strategies, status, summary;
  double before = 1, after = 0, best = 1;
  bool verified = false;
};
struct Trajectory {
  fb::SessionT session;
  std::vector<TrajectoryStep> steps;
};
Result<Trajectory> LoadTrajectory(Source& src, uint64_t session_id);
Json TrajectoryJson(const Trajectory& t);
std::string Bar(double value, double top, int width);
Status WriteTextFile(const std::string& path, const std::string& text);

// ---- top ----
struct TopRow {
  std::string category, backend;
  int rank = 0;
  uint64_t strategy_id = 0;
  std::string strategy, direction;
  fb::GainStats stats;      // over verified (or vouched) steps: what ranks the row
  double best_speedup = 0;  // of those steps
  uint32_t unverified_uses = 0;  // client-reported steps crediting it, not in stats
  double best_unverified = 0;    // the best speedup those reported
};
// Per (category, backend): the strategies credited by evaluated steps, best mean gain of the
// verified ones first; client-reported steps are counted apart and never rank a row.
Result<std::vector<TopRow>> TopStrategies(Source& src, size_t per_group, uint32_t min_uses);

// log(after / before) of an Ok step with positive speedups; 0 otherwise (as the memory counts it).
double StepGain(fb::OutcomeStatus status, double before, double after);

}  // namespace htam::cli
