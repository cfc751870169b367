// HTG records <-> JSON: what `--json` prints and what export/import read and write. Every field of
// schema/htg.fbs is written, by one mapper that walks the embedded reflection schema (a new field
// needs no code here); reading checks types and fails with InvalidArgument, never throws.
// Thread-safety: plain functions; safe for concurrent use.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "htam/schema/htg_generated.h"

namespace htam::cli {

namespace fb = ::htam::fb;
using Json = nlohmann::ordered_json;

Json ToJson(const fb::GainStats& s);
Json ToJson(const fb::DirectionT& d);
Json ToJson(const fb::StrategyT& s, bool with_embedding = false);
Json ToJson(const fb::TransitionRecordT& r, bool with_vector = false);
Json ToJson(const fb::TransitionEdgeT& e);
Json ToJson(const fb::TaskT& t);
Json ToJson(const fb::CandidateT& c);
Json ToJson(const fb::SessionT& s);
Json ToJson(const fb::StoreMetaT& m);

Status FromJson(const Json& j, fb::DirectionT* out);
Status FromJson(const Json& j, fb::StrategyT* out);
Status FromJson(const Json& j, fb::TransitionRecordT* out);
Status FromJson(const Json& j, fb::TaskT* out);
Status FromJson(const Json& j, fb::CandidateT* out);
Status FromJson(const Json& j, fb::SessionT* out);

// Readable names of enums (the schema's own names: "Ok", "CompileError", "Memory", ...).
std::string StatusName(fb::OutcomeStatus s);
std::string BottleneckName(fb::Bottleneck b);

// Derived numbers of a GainStats: success rate, mean log gain, and exp(mean) as a speedup factor.
double SuccessRate(const fb::GainStats& s);
double MeanGain(const fb::GainStats& s);  // over Ok outcomes that counted (0 when none)

}  // namespace htam::cli
