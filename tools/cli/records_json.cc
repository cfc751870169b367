// HTG records <-> JSON. Field names are the schema's; enums are written by name.
#include "tools/cli/records_json.h"

#include <cmath>

namespace htam::cli {
namespace {

template <typename E>
Json EnumList(const std::vector<E>& v, std::string (*name)(E)) {
  Json a = Json::array();
  for (E e : v) a.push_back(name(e));
  return a;
}

Json ToJson(const fb::ProvenanceT& p) {
  return Json{{"source", p.source},   {"task_ids", p.task_ids}, {"session_ids", p.session_ids},
              {"backend", p.backend}, {"arch", p.arch},         {"model", p.model},
              {"site", p.site}};
}

Json ToJson(const fb::ProfileT& p) {
  return Json{{"registers", p.registers},         {"shared_bytes", p.shared_bytes},
              {"spill_bytes", p.spill_bytes},     {"dram_throughput", p.dram_throughput},
              {"sm_throughput", p.sm_throughput}, {"occupancy", p.occupancy},
              {"sol_fraction", p.sol_fraction},   {"sm_clock_mhz", p.sm_clock_mhz},
              {"mem_clock_mhz", p.mem_clock_mhz}};
}

Json ToJson(const fb::StateT& s, bool with_vector) {
  Json j{{"category", s.category},   {"log_size", s.log_size},
         {"intensity", s.intensity}, {"bottleneck", BottleneckName(s.bottleneck)},
         {"speedup", s.speedup},     {"step", s.step},
         {"backend", s.backend},     {"arch", s.arch}};
  if (with_vector) j["vector"] = s.vector;
  return j;
}

bool ParseStatus(const std::string& n, fb::OutcomeStatus* out) {
  for (int i = 0; i <= static_cast<int>(fb::OutcomeStatus::MAX); ++i)
    if (n == fb::EnumNamesOutcomeStatus()[i]) return *out = static_cast<fb::OutcomeStatus>(i), true;
  return false;
}
bool ParseBottleneck(const std::string& n, fb::Bottleneck* out) {
  for (int i = 0; i <= static_cast<int>(fb::Bottleneck::MAX); ++i)
    if (n == fb::EnumNamesBottleneck()[i]) return *out = static_cast<fb::Bottleneck>(i), true;
  return false;
}

// Typed optional field readers; a missing field keeps the default, a wrong type throws (caught
// in Guard and turned into InvalidArgument).
template <typename T>
void Get(const Json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) *out = it->template get<T>();
}
void GetBottlenecks(const Json& j, const char* key, std::vector<fb::Bottleneck>* out) {
  std::vector<std::string> names;
  Get(j, key, &names);
  out->clear();
  for (const auto& n : names) {
    fb::Bottleneck b;
    if (!ParseBottleneck(n, &b)) throw std::invalid_argument("unknown bottleneck \"" + n + "\"");
    out->push_back(b);
  }
}
fb::OutcomeStatus GetStatus(const Json& j, const char* key) {
  std::string n = "Unverified";
  Get(j, key, &n);
  fb::OutcomeStatus s;
  if (!ParseStatus(n, &s)) throw std::invalid_argument("unknown outcome status \"" + n + "\"");
  return s;
}
std::unique_ptr<fb::GainStats> GetStats(const Json& j) {
  auto it = j.find("stats");
  if (it == j.end() || it->is_null()) return std::make_unique<fb::GainStats>();
  const Json& s = *it;
  return std::make_unique<fb::GainStats>(s.value("uses", 0u), s.value("successes", 0u),
                                         s.value("compile_failures", 0u), s.value("incorrect", 0u),
                                         s.value("other_failures", 0u), s.value("sum_gain", 0.0),
                                         s.value("sum_gain_sq", 0.0), s.value("max_gain", 0.0));
}

template <typename F>
Status Guard(const char* what, const Json& j, F&& body) {
  if (!j.is_object()) return Status::InvalidArgument(std::string(what) + " must be a JSON object");
  try {
    body();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("bad ") + what + " record: " + e.what());
  }
  return Status::OK();
}

}  // namespace

std::string StatusName(fb::OutcomeStatus s) {
  const char* n = fb::EnumNameOutcomeStatus(s);
  return n && *n ? n : "Status" + std::to_string(static_cast<int>(s));
}
std::string BottleneckName(fb::Bottleneck b) {
  const char* n = fb::EnumNameBottleneck(b);
  return n && *n ? n : "Bottleneck" + std::to_string(static_cast<int>(b));
}

double SuccessRate(const fb::GainStats& s) {
  return s.uses() ? double(s.successes()) / s.uses() : 0.0;
}
double MeanGain(const fb::GainStats& s) {
  return s.uses() ? s.sum_gain() / s.uses() : 0.0;
}

Json ToJson(const fb::GainStats& s) {
  return Json{{"uses", s.uses()},
              {"successes", s.successes()},
              {"compile_failures", s.compile_failures()},
              {"incorrect", s.incorrect()},
              {"other_failures", s.other_failures()},
              {"sum_gain", s.sum_gain()},
              {"sum_gain_sq", s.sum_gain_sq()},
              {"max_gain", s.max_gain()}};
}

Json ToJson(const fb::DirectionT& d) {
  return Json{{"id", d.id},
              {"name", d.name},
              {"title", d.title},
              {"description", d.description},
              {"targets", EnumList(d.targets, BottleneckName)},
              {"backends", d.backends},
              {"min_arch", d.min_arch},
              {"prior", d.prior},
              {"stats", ToJson(d.stats ? *d.stats : fb::GainStats())},
              {"created_ns", d.created_ns}};
}

Json ToJson(const fb::StrategyT& s, bool with_embedding) {
  Json j{{"id", s.id},
         {"direction_id", s.direction_id},
         {"name", s.name},
         {"title", s.title},
         {"description", s.description},
         {"code_pattern", s.code_pattern},
         {"preconditions", s.preconditions},
         {"failure_modes", s.failure_modes},
         {"backends", s.backends},
         {"min_arch", s.min_arch},
         {"targets", EnumList(s.targets, BottleneckName)},
         {"provenance", s.provenance ? ToJson(*s.provenance) : Json(nullptr)},
         {"stats", ToJson(s.stats ? *s.stats : fb::GainStats())},
         {"example_candidate", s.example_candidate},
         {"merged_into", s.merged_into},
         {"created_ns", s.created_ns},
         {"updated_ns", s.updated_ns}};
  if (with_embedding) j["embedding"] = s.embedding;
  return j;
}

Json ToJson(const fb::TransitionRecordT& r, bool with_vector) {
  return Json{{"id", r.id},
              {"session_id", r.session_id},
              {"task_id", r.task_id},
              {"backend", r.backend},
              {"arch", r.arch},
              {"step", r.step},
              {"state", r.state ? ToJson(*r.state, with_vector) : Json(nullptr)},
              {"history", r.history},
              {"direction_id", r.direction_id},
              {"strategy_ids", r.strategy_ids},
              {"summary", r.summary},
              {"status", StatusName(r.status)},
              {"speedup_before", r.speedup_before},
              {"speedup_after", r.speedup_after},
              {"median_us", r.median_us},
              {"spread_us", r.spread_us},
              {"profile", r.profile ? ToJson(*r.profile) : Json(nullptr)},
              {"verified", r.verified},
              {"candidate_hash", r.candidate_hash},
              {"diagnostics", r.diagnostics},
              {"model", r.model},
              {"created_ns", r.created_ns},
              {"learned_strategy_id", r.learned_strategy_id},
              {"learned_merged", r.learned_merged},
              {"passed_over_ids", r.passed_over_ids}};
}

Json ToJson(const fb::TransitionEdgeT& e) {
  return Json{{"from_direction", e.from_direction},
              {"to_direction", e.to_direction},
              {"cluster", e.cluster},
              {"stats", ToJson(e.stats ? *e.stats : fb::GainStats())}};
}

Json ToJson(const fb::TaskT& t) {
  Json b = Json::array();
  for (const auto& x : t.baselines)
    if (x)
      b.push_back(Json{{"backend", x->backend}, {"arch", x->arch}, {"median_us", x->median_us}});
  return Json{{"id", t.id},
              {"name", t.name},
              {"category", t.category},
              {"description", t.description},
              {"spec_hash", t.spec_hash},
              {"rtol", t.rtol},
              {"atol", t.atol},
              {"bad_budget", t.bad_budget},
              {"flops", t.flops},
              {"bytes", t.bytes},
              {"baselines", b},
              {"created_ns", t.created_ns}};
}

Json ToJson(const fb::CandidateT& c) {
  return Json{{"hash", c.hash},
              {"language", c.language},
              {"source", c.source},
              {"compile_log", c.compile_log},
              {"transition_ids", c.transition_ids},
              {"created_ns", c.created_ns}};
}

Json ToJson(const fb::SessionT& s) {
  Json st = Json::array();
  for (auto x : s.last_status) st.push_back(StatusName(x));
  return Json{{"id", s.id},
              {"task_id", s.task_id},
              {"task_name", s.task_name},
              {"backend", s.backend},
              {"arch", s.arch},
              {"client", s.client},
              {"model", s.model},
              {"budget", s.budget},
              {"steps", s.steps},
              {"state", s.state == fb::SessionState::Closed ? "Closed" : "Open"},
              {"best_candidate", s.best_candidate},
              {"best_speedup", s.best_speedup},
              {"history", s.history},
              {"last_status", st},
              {"created_ns", s.created_ns},
              {"updated_ns", s.updated_ns}};
}

Json ToJson(const fb::StoreMetaT& m) {
  return Json{{"magic", m.magic},
              {"schema_version", m.schema_version},
              {"embedder_model", m.embedder_model},
              {"embedder_dim", m.embedder_dim},
              {"created_ns", m.created_ns},
              {"writer_version", m.writer_version}};
}

Status FromJson(const Json& j, fb::DirectionT* d) {
  return Guard("direction", j, [&] {
    *d = fb::DirectionT();
    Get(j, "id", &d->id);
    Get(j, "name", &d->name);
    Get(j, "title", &d->title);
    Get(j, "description", &d->description);
    GetBottlenecks(j, "targets", &d->targets);
    Get(j, "backends", &d->backends);
    Get(j, "min_arch", &d->min_arch);
    Get(j, "prior", &d->prior);
    d->stats = GetStats(j);
    Get(j, "created_ns", &d->created_ns);
    if (d->name.empty()) throw std::invalid_argument("a direction needs a name");
  });
}

Status FromJson(const Json& j, fb::StrategyT* s) {
  return Guard("strategy", j, [&] {
    *s = fb::StrategyT();
    Get(j, "id", &s->id);
    Get(j, "direction_id", &s->direction_id);
    Get(j, "name", &s->name);
    Get(j, "title", &s->title);
    Get(j, "description", &s->description);
    Get(j, "code_pattern", &s->code_pattern);
    Get(j, "preconditions", &s->preconditions);
    Get(j, "failure_modes", &s->failure_modes);
    Get(j, "backends", &s->backends);
    Get(j, "min_arch", &s->min_arch);
    GetBottlenecks(j, "targets", &s->targets);
    auto p = j.find("provenance");
    if (p != j.end() && p->is_object()) {
      s->provenance = std::make_unique<fb::ProvenanceT>();
      Get(*p, "source", &s->provenance->source);
      Get(*p, "task_ids", &s->provenance->task_ids);
      Get(*p, "session_ids", &s->provenance->session_ids);
      Get(*p, "backend", &s->provenance->backend);
      Get(*p, "arch", &s->provenance->arch);
      Get(*p, "model", &s->provenance->model);
      Get(*p, "site", &s->provenance->site);
    }
    Get(j, "embedding", &s->embedding);
    s->stats = GetStats(j);
    Get(j, "example_candidate", &s->example_candidate);
    Get(j, "merged_into", &s->merged_into);
    Get(j, "created_ns", &s->created_ns);
    Get(j, "updated_ns", &s->updated_ns);
    if (s->name.empty()) throw std::invalid_argument("a strategy needs a name");
  });
}

Status FromJson(const Json& j, fb::TransitionRecordT* r) {
  return Guard("transition", j, [&] {
    *r = fb::TransitionRecordT();
    Get(j, "id", &r->id);
    Get(j, "session_id", &r->session_id);
    Get(j, "task_id", &r->task_id);
    Get(j, "backend", &r->backend);
    Get(j, "arch", &r->arch);
    Get(j, "step", &r->step);
    auto st = j.find("state");
    if (st != j.end() && st->is_object()) {
      r->state = std::make_unique<fb::StateT>();
      Get(*st, "category", &r->state->category);
      Get(*st, "log_size", &r->state->log_size);
      Get(*st, "intensity", &r->state->intensity);
      std::string b = "Unknown";
      Get(*st, "bottleneck", &b);
      if (!ParseBottleneck(b, &r->state->bottleneck))
        throw std::invalid_argument("unknown bottleneck \"" + b + "\"");
      Get(*st, "speedup", &r->state->speedup);
      Get(*st, "step", &r->state->step);
      Get(*st, "backend", &r->state->backend);
      Get(*st, "arch", &r->state->arch);
      Get(*st, "vector", &r->state->vector);
    }
    Get(j, "history", &r->history);
    Get(j, "direction_id", &r->direction_id);
    Get(j, "strategy_ids", &r->strategy_ids);
    Get(j, "summary", &r->summary);
    r->status = GetStatus(j, "status");
    Get(j, "speedup_before", &r->speedup_before);
    Get(j, "speedup_after", &r->speedup_after);
    Get(j, "median_us", &r->median_us);
    Get(j, "spread_us", &r->spread_us);
    auto p = j.find("profile");
    if (p != j.end() && p->is_object()) {
      r->profile = std::make_unique<fb::ProfileT>();
      Get(*p, "registers", &r->profile->registers);
      Get(*p, "shared_bytes", &r->profile->shared_bytes);
      Get(*p, "spill_bytes", &r->profile->spill_bytes);
      Get(*p, "dram_throughput", &r->profile->dram_throughput);
      Get(*p, "sm_throughput", &r->profile->sm_throughput);
      Get(*p, "occupancy", &r->profile->occupancy);
      Get(*p, "sol_fraction", &r->profile->sol_fraction);
      Get(*p, "sm_clock_mhz", &r->profile->sm_clock_mhz);
      Get(*p, "mem_clock_mhz", &r->profile->mem_clock_mhz);
    }
    Get(j, "verified", &r->verified);
    Get(j, "candidate_hash", &r->candidate_hash);
    Get(j, "diagnostics", &r->diagnostics);
    Get(j, "model", &r->model);
    Get(j, "created_ns", &r->created_ns);
    Get(j, "learned_strategy_id", &r->learned_strategy_id);
    Get(j, "learned_merged", &r->learned_merged);
    Get(j, "passed_over_ids", &r->passed_over_ids);  // absent in older exports: none
  });
}

Status FromJson(const Json& j, fb::TaskT* t) {
  return Guard("task", j, [&] {
    *t = fb::TaskT();
    Get(j, "id", &t->id);
    Get(j, "name", &t->name);
    Get(j, "category", &t->category);
    Get(j, "description", &t->description);
    Get(j, "spec_hash", &t->spec_hash);
    Get(j, "rtol", &t->rtol);
    Get(j, "atol", &t->atol);
    Get(j, "bad_budget", &t->bad_budget);
    Get(j, "flops", &t->flops);
    Get(j, "bytes", &t->bytes);
    auto b = j.find("baselines");
    if (b != j.end() && b->is_array())
      for (const auto& x : *b) {
        auto bl = std::make_unique<fb::BaselineT>();
        Get(x, "backend", &bl->backend);
        Get(x, "arch", &bl->arch);
        Get(x, "median_us", &bl->median_us);
        t->baselines.push_back(std::move(bl));
      }
    Get(j, "created_ns", &t->created_ns);
    if (t->name.empty()) throw std::invalid_argument("a task needs a name");
  });
}

Status FromJson(const Json& j, fb::CandidateT* c) {
  return Guard("candidate", j, [&] {
    *c = fb::CandidateT();
    Get(j, "hash", &c->hash);
    Get(j, "language", &c->language);
    Get(j, "source", &c->source);
    Get(j, "compile_log", &c->compile_log);
    Get(j, "transition_ids", &c->transition_ids);
    Get(j, "created_ns", &c->created_ns);
    if (c->hash.empty()) throw std::invalid_argument("a candidate needs a hash");
  });
}

Status FromJson(const Json& j, fb::SessionT* s) {
  return Guard("session", j, [&] {
    *s = fb::SessionT();
    Get(j, "id", &s->id);
    Get(j, "task_id", &s->task_id);
    Get(j, "task_name", &s->task_name);
    Get(j, "backend", &s->backend);
    Get(j, "arch", &s->arch);
    Get(j, "client", &s->client);
    Get(j, "model", &s->model);
    Get(j, "budget", &s->budget);
    Get(j, "steps", &s->steps);
    std::string state = "Open";
    Get(j, "state", &state);
    s->state = state == "Closed" ? fb::SessionState::Closed : fb::SessionState::Open;
    Get(j, "best_candidate", &s->best_candidate);
    Get(j, "best_speedup", &s->best_speedup);
    Get(j, "history", &s->history);
    std::vector<std::string> st;
    Get(j, "last_status", &st);
    for (const auto& n : st) {
      fb::OutcomeStatus x;
      if (!ParseStatus(n, &x)) throw std::invalid_argument("unknown outcome status \"" + n + "\"");
      s->last_status.push_back(x);
    }
    Get(j, "created_ns", &s->created_ns);
    Get(j, "updated_ns", &s->updated_ns);
  });
}

}  // namespace htam::cli
