// Seed taxonomy loader: JSON -> directions and strategies, validated field by field.
#include "daemon/memory/seed.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace htam::memory {
namespace {

using nlohmann::json;

Status Need(bool ok, const std::string& where, const std::string& what) {
  if (ok) return Status::OK();
  return Status::InvalidArgument(where + ": " + what);
}

Status Str(const json& j, const char* key, bool required, const std::string& where,
           std::string* out) {
  if (!j.contains(key)) return Need(!required, where, std::string("missing \"") + key + "\"");
  HTAM_RETURN_IF_ERROR(
      Need(j[key].is_string(), where, std::string("\"") + key + "\" must be a string"));
  *out = j[key].get<std::string>();
  return Need(!required || !out->empty(), where, std::string("\"") + key + "\" is empty");
}

Status StrList(const json& j, const char* key, const std::string& where,
               std::vector<std::string>* out) {
  out->clear();
  if (!j.contains(key)) return Status::OK();
  HTAM_RETURN_IF_ERROR(
      Need(j[key].is_array(), where, std::string("\"") + key + "\" must be a list"));
  for (const auto& e : j[key]) {
    HTAM_RETURN_IF_ERROR(
        Need(e.is_string(), where, std::string("\"") + key + "\" holds a non-string"));
    out->push_back(e.get<std::string>());
  }
  return Status::OK();
}

Status Targets(const json& j, const std::string& where, std::vector<fb::Bottleneck>* out) {
  std::vector<std::string> words;
  HTAM_RETURN_IF_ERROR(StrList(j, "targets", where, &words));
  out->clear();
  for (const auto& w : words) {
    fb::Bottleneck b;
    HTAM_RETURN_IF_ERROR(Need(ParseBottleneck(w, &b), where,
                              "unknown target \"" + w + "\" (memory, compute, latency, launch)"));
    out->push_back(b);
  }
  return Status::OK();
}

Status Backends(const json& j, const std::string& where, std::vector<std::string>* out) {
  HTAM_RETURN_IF_ERROR(StrList(j, "backends", where, out));
  for (const auto& b : *out)
    HTAM_RETURN_IF_ERROR(
        Need(b == "cuda" || b == "hip" || b == "cpu", where, "unknown backend \"" + b + "\""));
  return Status::OK();
}

bool IsSlug(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

Status ParseStrategy(const json& j, const std::string& where, fb::StrategyT* s) {
  HTAM_RETURN_IF_ERROR(Need(j.is_object(), where, "a strategy must be an object"));
  HTAM_RETURN_IF_ERROR(Str(j, "name", true, where, &s->name));
  HTAM_RETURN_IF_ERROR(Need(IsSlug(s->name), where, "name \"" + s->name + "\" is not a slug"));
  std::string w = where + "/" + s->name;
  HTAM_RETURN_IF_ERROR(Str(j, "title", true, w, &s->title));
  HTAM_RETURN_IF_ERROR(Str(j, "description", true, w, &s->description));
  HTAM_RETURN_IF_ERROR(Str(j, "code_pattern", false, w, &s->code_pattern));
  HTAM_RETURN_IF_ERROR(StrList(j, "preconditions", w, &s->preconditions));
  HTAM_RETURN_IF_ERROR(StrList(j, "failure_modes", w, &s->failure_modes));
  HTAM_RETURN_IF_ERROR(Backends(j, w, &s->backends));
  HTAM_RETURN_IF_ERROR(Str(j, "min_arch", false, w, &s->min_arch));
  HTAM_RETURN_IF_ERROR(Targets(j, w, &s->targets));
  // Backend notes (warp vs wavefront, shared memory vs LDS, ...) are part of what the agent reads.
  if (j.contains("backend_notes")) {
    HTAM_RETURN_IF_ERROR(
        Need(j["backend_notes"].is_object(), w, "\"backend_notes\" must be an object"));
    for (const auto& [backend, note] : j["backend_notes"].items()) {
      HTAM_RETURN_IF_ERROR(Need(note.is_string(), w, "backend note must be a string"));
      s->description += "\n" + backend + ": " + note.get<std::string>();
    }
  }
  s->provenance = std::make_unique<fb::ProvenanceT>();
  s->provenance->source = "seed";
  s->stats = std::make_unique<fb::GainStats>();
  return Status::OK();
}

}  // namespace

const std::vector<std::string>& SeedDirectionSlugs() {
  static const std::vector<std::string> k = {"global-memory-access", "on-chip-reuse-tiling",
                                             "shared-memory-banks",  "fusion",
                                             "reductions-scans",     "parallel-mapping-occupancy",
                                             "latency-hiding",       "compute-throughput-precision",
                                             "control-flow",         "algorithmic",
                                             "launch-overhead",      "architecture-specific",
                                             "parameter-tuning"};
  return k;
}

bool ParseBottleneck(const std::string& w, fb::Bottleneck* out) {
  if (w == "memory")
    *out = fb::Bottleneck::Memory;
  else if (w == "compute")
    *out = fb::Bottleneck::Compute;
  else if (w == "latency")
    *out = fb::Bottleneck::Latency;
  else if (w == "launch")
    *out = fb::Bottleneck::Launch;
  else if (w == "unknown")
    *out = fb::Bottleneck::Unknown;
  else
    return false;
  return true;
}

Result<std::vector<SeedDirection>> ParseSeed(const std::string& text, const std::string& origin) {
  json root;
  try {
    root = json::parse(text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(origin + ": not valid JSON: " + e.what());
  }
  if (!root.is_object() || !root.contains("directions") || !root["directions"].is_array())
    return Status::InvalidArgument(origin + ": expected an object with a \"directions\" list");
  std::vector<SeedDirection> out;
  std::set<std::string> names;
  for (const auto& jd : root["directions"]) {
    SeedDirection sd;
    fb::DirectionT& d = sd.direction;
    HTAM_RETURN_IF_ERROR(Need(jd.is_object(), origin, "a direction must be an object"));
    HTAM_RETURN_IF_ERROR(Str(jd, "name", true, origin, &d.name));
    std::string where = origin + ": " + d.name;
    HTAM_RETURN_IF_ERROR(Need(IsSlug(d.name), where, "name is not a slug"));
    HTAM_RETURN_IF_ERROR(Need(names.insert(d.name).second, where, "direction defined twice"));
    HTAM_RETURN_IF_ERROR(Str(jd, "title", true, where, &d.title));
    HTAM_RETURN_IF_ERROR(Str(jd, "description", true, where, &d.description));
    HTAM_RETURN_IF_ERROR(Targets(jd, where, &d.targets));
    HTAM_RETURN_IF_ERROR(Backends(jd, where, &d.backends));
    HTAM_RETURN_IF_ERROR(Str(jd, "min_arch", false, where, &d.min_arch));
    if (jd.contains("prior")) {
      HTAM_RETURN_IF_ERROR(Need(jd["prior"].is_number(), where, "\"prior\" must be a number"));
      d.prior = jd["prior"].get<float>();
      HTAM_RETURN_IF_ERROR(
          Need(d.prior >= 0 && d.prior <= 1, where, "\"prior\" must be in [0, 1]"));
    }
    d.stats = std::make_unique<fb::GainStats>();
    HTAM_RETURN_IF_ERROR(
        Need(jd.contains("strategies") && jd["strategies"].is_array() && !jd["strategies"].empty(),
             where, "needs a non-empty \"strategies\" list"));
    std::set<std::string> snames;
    for (const auto& js : jd["strategies"]) {
      fb::StrategyT s;
      HTAM_RETURN_IF_ERROR(ParseStrategy(js, where, &s));
      HTAM_RETURN_IF_ERROR(
          Need(snames.insert(s.name).second, where, "strategy " + s.name + " defined twice"));
      sd.strategies.push_back(std::move(s));
    }
    out.push_back(std::move(sd));
  }
  for (const auto& slug : SeedDirectionSlugs())
    if (!names.count(slug))
      return Status::InvalidArgument(origin + ": direction " + slug + " is missing");
  return out;
}

Result<std::vector<SeedDirection>> LoadSeedFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read seed taxonomy " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseSeed(ss.str(), path);
}

}  // namespace htam::memory
