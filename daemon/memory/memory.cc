// Memory: the implementation behind memory.h (work in progress).
#include "daemon/memory/memory.h"

#include "daemon/config/config.h"

namespace htam::memory {

MemoryOptions MemoryOptions::FromConfig(const Config& c) {
  MemoryOptions o;
  o.dir = c.GetString("general.data_dir") + "/store";
  o.map_size_mb = static_cast<size_t>(c.GetInt("memory.map_size_mb"));
  o.max_map_size_mb = static_cast<size_t>(c.GetInt("memory.max_map_size_mb"));
  o.embedder = c.GetString("memory.embedder");
  o.embedder_dim = static_cast<uint32_t>(c.GetInt("memory.embedder_dim"));
  o.seed_file = c.GetString("memory.seed_file");
  o.neighbors = static_cast<int>(c.GetInt("memory.neighbors"));
  o.hnsw_m = static_cast<int>(c.GetInt("memory.hnsw_m"));
  o.hnsw_ef_search = static_cast<int>(c.GetInt("memory.hnsw_ef_search"));
  o.hnsw_ef_construction = static_cast<int>(c.GetInt("memory.hnsw_ef_construction"));
  o.attention_temperature = c.GetDouble("memory.attention_temperature");
  o.history_weight = c.GetDouble("memory.history_weight");
  o.history_decay = c.GetDouble("memory.history_decay");
  o.history_length = static_cast<int>(c.GetInt("memory.history_length"));
  o.exploration = c.GetDouble("memory.exploration");
  o.failure_penalty = c.GetDouble("memory.failure_penalty");
  o.failure_memory = static_cast<int>(c.GetInt("memory.failure_memory"));
  o.prior_strength = c.GetDouble("memory.prior_strength");
  o.prior_gain = c.GetDouble("memory.prior_gain");
  o.cross_backend_discount = c.GetDouble("memory.cross_backend_discount");
  o.cpu_backend_discount = c.GetDouble("memory.cpu_backend_discount");
  o.policy_seed = static_cast<uint64_t>(c.GetInt("memory.policy_seed"));
  o.top_k_strategies = static_cast<int>(c.GetInt("memory.top_k_strategies"));
  o.retrieval_candidates = static_cast<int>(c.GetInt("memory.retrieval_candidates"));
  o.rerank_effect_weight = c.GetDouble("memory.rerank_effect_weight");
  o.rerank_precondition_weight = c.GetDouble("memory.rerank_precondition_weight");
  o.merge_threshold = c.GetDouble("memory.merge_threshold");
  o.snapshot_interval_s = static_cast<int>(c.GetInt("memory.snapshot_interval_s"));
  o.max_group_commit = static_cast<int>(c.GetInt("memory.max_group_commit"));
  return o;
}

Result<std::unique_ptr<Memory>> Memory::Open(const MemoryOptions&) {
  return Status::Unavailable("memory: not implemented yet");
}
Result<std::unique_ptr<Memory>> Memory::OpenReadOnly(const std::string&) {
  return Status::Unavailable("memory: not implemented yet");
}

}  // namespace htam::memory
