// The profile part of an evaluation result as JSON and back, and its bottleneck class (worker
// frames and the remote-worker wire share it): absent fields keep the "unknown" value of
// fb::ProfileT (-1).
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "htam/schema/htg_generated.h"

namespace htam::eval {

inline nlohmann::json ProfileToJson(const fb::ProfileT& p) {
  return {{"registers", p.registers},         {"shared_bytes", p.shared_bytes},
          {"spill_bytes", p.spill_bytes},     {"dram_throughput", p.dram_throughput},
          {"sm_throughput", p.sm_throughput}, {"occupancy", p.occupancy},
          {"sol_fraction", p.sol_fraction},   {"sm_clock_mhz", p.sm_clock_mhz},
          {"mem_clock_mhz", p.mem_clock_mhz}};
}

inline fb::ProfileT ProfileFromJson(const nlohmann::json& p) {
  fb::ProfileT r;
  if (!p.is_object()) return r;
  r.registers = p.value("registers", -1);
  r.shared_bytes = p.value("shared_bytes", -1);
  r.spill_bytes = p.value("spill_bytes", -1);
  r.dram_throughput = p.value("dram_throughput", -1.0f);
  r.sm_throughput = p.value("sm_throughput", -1.0f);
  r.occupancy = p.value("occupancy", -1.0f);
  r.sol_fraction = p.value("sol_fraction", -1.0f);
  r.sm_clock_mhz = p.value("sm_clock_mhz", -1);
  r.mem_clock_mhz = p.value("mem_clock_mhz", -1);
  return r;
}

// The "bottleneck" field of a result frame (the schema's enum value); Unknown when absent or out
// of range.
inline fb::Bottleneck BottleneckFromJson(const nlohmann::json& frame) {
  if (!frame.is_object() || !frame.contains("bottleneck") ||
      !frame["bottleneck"].is_number_integer())
    return fb::Bottleneck::Unknown;
  int b = frame["bottleneck"].get<int>();
  return b >= 0 && b <= int(fb::Bottleneck::MAX) ? fb::Bottleneck(b) : fb::Bottleneck::Unknown;
}

}  // namespace htam::eval
