// `htam explain`: replays the direction policy for a step of a session from the store. The
// recorded state and history of the step are scored against the experience that existed before
// it (transitions with smaller ids), with the policy functions of the memory (policy.h) and
// exact nearest neighbours (the daemon uses an approximate HNSW search, so a replay can differ
// slightly where neighbours tie). Without --step it explains what the policy would choose next.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "daemon/config/config.h"
#include "daemon/memory/policy.h"
#include "daemon/memory/scorer.h"
#include "tools/cli/cli.h"
#include "tools/cli/inspect_util.h"
#include "tools/cli/table.h"

namespace htam::cli {
namespace {

// How far a piece of evidence is trusted: evaluated by htamd's gate, reported by a vouched
// client, or reported by a client only; "no change" when inside the timing spread.
std::string Trust(const memory::Neighbor& n) {
  std::string t = n.verified ? "verified" : n.vouched ? "vouched" : "unverified";
  return n.no_change ? t + ", no change" : t;
}

struct Replay {
  memory::PolicyState state;
  std::vector<memory::Neighbor> neighbors;
  memory::PolicyResult result;
  uint64_t actual_direction = 0;  // what the session really did at that step (0 = next step)
  std::string actual_status;
  size_t experience = 0;  // transitions available to the policy
};

Result<memory::MemoryOptions> PolicyOptions(const std::string& config_file) {
  if (config_file.empty()) return memory::MemoryOptions();
  const char* argv[] = {"htam", "--config", config_file.c_str()};
  std::ostringstream sink;
  bool exit_now = false;
  auto cfg = Config::Parse(3, argv, ProgramInfo{"htam", "", ""}, sink, &exit_now);
  if (!cfg.ok()) return cfg.status().WithContext("reading " + config_file);
  return memory::MemoryOptions::FromConfig(*cfg);
}

Result<Replay> Run(memory::Memory& m, uint64_t session_id, std::optional<uint32_t> step,
                   const memory::MemoryOptions& o) {
  Replay rp;
  HTAM_ASSIGN_OR_RETURN(fb::SessionT s, m.GetSession(session_id));
  HTAM_ASSIGN_OR_RETURN(auto steps, m.ListTransitions(session_id, 0));
  std::sort(steps.begin(), steps.end(),
            [](const auto& a, const auto& b) { return a.step < b.step; });
  HTAM_ASSIGN_OR_RETURN(fb::TaskT task, m.GetTask(s.task_id));
  memory::PolicyState& ps = rp.state;
  ps.session_id = session_id;
  ps.backend = s.backend;
  ps.arch = s.arch;
  uint64_t horizon = UINT64_MAX;  // experience strictly before this transition id
  const fb::TransitionRecordT* rec = nullptr;
  if (step) {
    for (const auto& r : steps)
      if (r.step == *step) rec = &r;
    if (!rec)
      return Status::NotFound("session " + std::to_string(session_id) + " has no step " +
                              std::to_string(*step) + " (it has " + std::to_string(steps.size()) +
                              ")");
    horizon = rec->id;
    rp.actual_direction = rec->direction_id;
    rp.actual_status = StatusName(rec->status);
    ps.step = rec->step;
    ps.history = rec->history;
    if (rec->state) {
      ps.category = rec->state->category;
      ps.log_size = rec->state->log_size;
      ps.intensity = rec->state->intensity;
      ps.bottleneck = rec->state->bottleneck;
      ps.speedup = rec->state->speedup;
      if (!rec->state->backend.empty()) ps.backend = rec->state->backend;
      if (!rec->state->arch.empty()) ps.arch = rec->state->arch;
    }
  } else {
    ps.step = s.steps;
    ps.history = s.history;
    ps.speedup = s.best_speedup;
    ps.category = task.category;
    ps.log_size = task.bytes > 0 ? std::log10(task.bytes) : 0;
    ps.intensity = task.bytes > 0 ? task.flops / task.bytes : 0;
    if (!steps.empty() && steps.back().state) ps.bottleneck = steps.back().state->bottleneck;
  }
  for (const auto& r : steps) {
    if (r.id >= horizon) break;
    ps.outcomes.push_back(r.status);
    ps.gains.push_back(r.no_change ? 0.0 : StepGain(r.status, r.speedup_before, r.speedup_after));
  }
  ps.outcomes.resize(ps.history.size(), fb::OutcomeStatus::Ok);
  ps.gains.resize(ps.history.size(), 0.0);
  std::vector<float> key = rec && rec->state && rec->state->vector.size() == memory::kKeyDim
                               ? rec->state->vector
                               : memory::TransitionKey(ps, o);

  // Exact nearest neighbours among the earlier transitions (cosine of the normalized keys).
  HTAM_ASSIGN_OR_RETURN(auto all, m.ListTransitions(0, 0));
  std::vector<std::pair<double, const fb::TransitionRecordT*>> cand;
  for (const auto& r : all) {
    if (r.id >= horizon || r.status == fb::OutcomeStatus::InfraError) continue;
    if (!r.state || r.state->vector.size() != memory::kKeyDim) continue;
    ++rp.experience;
    double dot = 0;
    for (int i = 0; i < memory::kKeyDim; ++i) dot += double(key[i]) * r.state->vector[i];
    cand.emplace_back(dot, &r);
  }
  std::stable_sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second->id < b.second->id;
  });
  if (cand.size() > static_cast<size_t>(std::max(0, o.neighbors)))
    cand.resize(static_cast<size_t>(std::max(0, o.neighbors)));
  std::map<std::string, uint32_t> clients;
  for (const auto& [sim, r] : cand) {
    memory::Neighbor n;
    n.transition_id = r->id;
    n.session_id = r->session_id;
    n.state_similarity = memory::StateSimilarity(key.data(), r->state->vector.data());
    n.history_agreement =
        memory::HistoryAgreement(ps.history, r->history, o.history_decay, o.history_length);
    n.backend = r->backend;
    n.backend_factor = memory::BackendFactor(ps.backend, n.backend, o, &n.cross_backend);
    n.direction_id = r->direction_id;
    n.status = r->status;
    n.gain = r->no_change ? 0.0 : StepGain(r->status, r->speedup_before, r->speedup_after);
    n.verified = r->verified;
    n.vouched = r->vouched;
    n.no_change = r->no_change;
    // The client of its session, interned (the per-client bound of client-reported steps).
    if (auto sess = m.GetSession(r->session_id); sess.ok())
      n.client = clients.emplace(sess->client, static_cast<uint32_t>(clients.size() + 1))
                     .first->second;
    n.strategy_ids = r->strategy_ids;
    n.learned_strategy_id = r->learned_strategy_id;
    rp.neighbors.push_back(std::move(n));
  }
  memory::WeighNeighbors(&rp.neighbors, o);
  std::stable_sort(rp.neighbors.begin(), rp.neighbors.end(),
                   [](const auto& a, const auto& b) { return a.weight > b.weight; });
  HTAM_ASSIGN_OR_RETURN(auto dirs, m.ListDirections());
  // The learned scorer (memory.scorer), trained as the daemon trains it: on the earlier
  // verified or vouched records, in id order.
  std::map<uint64_t, memory::LearnedEstimate> learned;
  if (o.scorer) {
    std::vector<const fb::TransitionRecordT*> earlier;
    for (const auto& r : all)
      if (r.id < horizon && r.state && r.state->vector.size() == memory::kKeyDim)
        earlier.push_back(&r);
    std::sort(earlier.begin(), earlier.end(), [](auto* a, auto* b) { return a->id < b->id; });
    memory::Scorer scorer;
    for (const auto* r : earlier)
      scorer.MaybeTrain(r->state->vector.data(), r->direction_id, r->status,
                        r->no_change ? 0.0 : StepGain(r->status, r->speedup_before, r->speedup_after),
                        r->verified || r->vouched, o);
    if (scorer.Active(o))
      for (const auto& d : dirs) {
        memory::Scorer::Prediction p;
        if (!scorer.Predict(key.data(), d.id, &p, 3)) continue;
        learned[d.id] = {p.p_improve, p.expected_gain, p.records, std::move(p.top)};
      }
  }
  rp.result = memory::ScoreDirections(dirs, rp.neighbors, ps, o, learned.empty() ? nullptr : &learned);
  return rp;
}

}  // namespace

int CmdExplain(Context& c) {
  po::options_description o("explain options");
  int step = -1;
  size_t evidence = 10;
  std::string config;
  o.add_options()("step", po::value(&step), "the step to replay (0-based); default: the next step")(
      "evidence", po::value(&evidence)->default_value(10), "attended transitions to list")(
      "config", po::value(&config),
      "htamd.conf whose memory.* policy settings to use (default: built-in defaults)");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "<session> [--step N] [--config htamd.conf]", o, {{"session", 1}}, &vm, &done);
  if (done) return rc;
  auto sid = ParseId(vm["session"].as<std::vector<std::string>>()[0], "session");
  if (!sid.ok()) return Fail(c, sid.status());
  auto opts = PolicyOptions(config);
  if (!opts.ok()) return Fail(c, opts.status());
  auto src = OpenStore(c);
  if (!src.ok()) return Fail(c, src.status());
  memory::Memory& m = *(*src)->local();
  auto rp =
      Run(m, *sid, step >= 0 ? std::optional<uint32_t>(static_cast<uint32_t>(step)) : std::nullopt,
          *opts);
  if (!rp.ok()) return Fail(c, rp.status());
  auto dirs = m.ListDirections();
  if (!dirs.ok()) return Fail(c, dirs.status());
  const auto& r = rp->result;
  uint64_t chosen = r.scores.empty() ? 0 : r.scores[r.chosen].direction_id;
  std::string history;
  for (uint64_t h : rp->state.history)
    history += (history.empty() ? "" : " > ") + DirName(*dirs, h);

  if (c.g.json) {
    Json scores = Json::array(), ev = Json::array();
    for (const auto& s : r.scores)
      scores.push_back(Json{{"direction_id", s.direction_id},
                            {"name", s.name},
                            {"score", s.score},
                            {"p_success", s.p_success},
                            {"expected_gain", s.expected_gain},
                            {"exploration", s.exploration},
                            {"penalty", s.penalty},
                            {"effective_count", s.effective_count},
                            {"masked", s.masked},
                            {"mask_reason", s.mask_reason}});
    for (size_t i = 0; i < rp->neighbors.size() && i < evidence; ++i) {
      const auto& n = rp->neighbors[i];
      ev.push_back(Json{{"transition_id", n.transition_id},
                        {"session_id", n.session_id},
                        {"weight", n.weight},
                        {"similarity", n.state_similarity},
                        {"history_agreement", n.history_agreement},
                        {"direction", DirName(*dirs, n.direction_id)},
                        {"status", StatusName(n.status)},
                        {"gain", n.gain},
                        {"backend", n.backend},
                        {"cross_backend", n.cross_backend},
                        {"trust", Trust(n)}});
    }
    Json out{{"session_id", *sid},
             {"step", rp->state.step},
             {"replayed", step >= 0},
             {"state",
              {{"category", rp->state.category},
               {"bottleneck", BottleneckName(rp->state.bottleneck)},
               {"speedup", rp->state.speedup},
               {"backend", rp->state.backend},
               {"arch", rp->state.arch},
               {"history", history}}},
             {"experience", rp->experience},
             {"from_priors", r.from_priors},
             {"chosen", DirName(*dirs, chosen)},
             {"why", r.why},
             {"scores", scores},
             {"evidence", ev}};
    if (step >= 0) {
      out["actual"] = DirName(*dirs, rp->actual_direction);
      out["actual_status"] = rp->actual_status;
    }
    PrintJson(c, out);
    return kExitOk;
  }
  c.out << "session " << *sid << ", "
        << (step >= 0 ? "step " + std::to_string(rp->state.step) + " (replayed)"
                      : "next step " + std::to_string(rp->state.step))
        << "\n";
  c.out << "state: " << (rp->state.category.empty() ? "?" : rp->state.category) << ", "
        << BottleneckName(rp->state.bottleneck) << "-bound, speedup " << Speedup(rp->state.speedup)
        << ", " << rp->state.backend << (rp->state.arch.empty() ? "" : " " + rp->state.arch)
        << "\n";
  c.out << "history: " << (history.empty() ? "(session start)" : history) << "\n";
  c.out << "experience: " << rp->experience << " earlier transition(s), " << rp->neighbors.size()
        << " attended\n";
  c.out << "policy chooses: " << DirName(*dirs, chosen);
  if (step >= 0)
    c.out << "    session took: " << DirName(*dirs, rp->actual_direction) << " ("
          << rp->actual_status << ")";
  c.out << "\nwhy: " << r.why << "\n\nPer-direction estimates:\n";
  Table t({"direction", ">score", ">p(success)", ">E[gain]", ">explore", ">penalty", ">eff. n",
           "note"});
  for (const auto& s : r.scores)
    t.Add({s.name, Fixed(s.score, 3), Fixed(s.p_success, 2), Fixed(s.expected_gain, 3),
           Fixed(s.exploration, 3), Fixed(s.penalty, 3), Fixed(s.effective_count, 2),
           s.masked ? "masked: " + s.mask_reason : ""});
  t.Print(c.out);
  if (!rp->neighbors.empty()) {
    c.out << "\nEvidence (attended transitions, heaviest first):\n";
    Table e({">transition", ">session", ">weight", ">similarity", ">history", "direction", "status",
             ">gain", "backend", "trust"});
    for (size_t i = 0; i < rp->neighbors.size() && i < evidence; ++i) {
      const auto& n = rp->neighbors[i];
      e.Add({std::to_string(n.transition_id), std::to_string(n.session_id), Fixed(n.weight, 3),
             Fixed(n.state_similarity, 3), Fixed(n.history_agreement, 2),
             DirName(*dirs, n.direction_id), StatusName(n.status), Fixed(n.gain, 3),
             n.backend + (n.cross_backend ? " (cross)" : ""), Trust(n)});
    }
    e.Print(c.out);
  }
  return kExitOk;
}

}  // namespace htam::cli
