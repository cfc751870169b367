// FAISS adapter of the memory: inner-product HNSW indexes with external ids (IndexIDMap2 over
// IndexHNSWFlat) and their snapshot files. No FAISS exception leaves this adapter.
// Thread-safety: Search and Reconstruct may run concurrently; Add needs external exclusion
// from every other call (Memory guards its indexes with a shared mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace faiss {
struct Index;
template <typename IndexT>
struct IndexIDMap2Template;
using IndexIDMap2 = IndexIDMap2Template<Index>;
struct IndexHNSWFlat;
}  // namespace faiss

namespace htam::memory {

struct IndexOptions {
  int dim = 0;
  int hnsw_m = 16;
  int ef_search = 64;
  int ef_construction = 40;
};

struct Hit {
  uint64_t id;
  float similarity;  // inner product; cosine for normalized vectors
};

class VectorIndex {
 public:
  explicit VectorIndex(const IndexOptions& options);
  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;
  VectorIndex& operator=(const VectorIndex&) = delete;

  // Adds n vectors (n * dim floats) with their ids.
  Status Add(size_t n, const uint64_t* ids, const float* vectors);
  // The k most similar, best first (fewer when the index is smaller).
  // Same walk and answer as FAISS's IndexHNSW search (SearchFaiss), without its per-query
  // allocations; safe from several threads at once (each keeps its own visited marks).
  // vectors (optional): per hit, the stored vector (dim floats), valid until the next Add; null
  // where the index cannot lend it (Reconstruct then copies it).
  std::vector<Hit> Search(const float* query, int k,
                          std::vector<const float*>* vectors = nullptr) const;
  // FAISS's own search of the same index (the reference Search is checked against).
  std::vector<Hit> SearchFaiss(const float* query, int k) const;
  bool Reconstruct(uint64_t id, std::vector<float>* out) const;
  size_t size() const;
  int dim() const { return options_.dim; }
  void set_ef_search(int ef);

 private:
  friend Status SaveSnapshot(const std::string&, uint64_t, uint64_t,
                             const std::map<uint64_t, const VectorIndex*>&, std::string_view);
  friend Status LoadSnapshot(const std::string&, const IndexOptions&, uint64_t, uint64_t*,
                             std::map<uint64_t, std::unique_ptr<VectorIndex>>*,
                             std::optional<std::string>*);
  VectorIndex(const IndexOptions& options, faiss::IndexIDMap2* adopted);
  bool FastSearchable() const;
  IndexOptions options_;
  faiss::IndexIDMap2* index_ = nullptr;  // owns its HNSW
  faiss::IndexHNSWFlat* hnsw_ = nullptr;
};

// A snapshot file holds several indexes (keyed, e.g. by direction id) and the largest record id
// they cover. Written atomically: temp file, fsync, rename over the old one, directory fsync.
// Layout: magic "HTAMIDX1", u32 format, u32 dim, u64 store tag, u64 covered_id, u32 sections, u64
// payload bytes, u64 payload hash; then per section u64 key + u64 length + FAISS bytes; then
// (format 2) u64 length + `extra` bytes (derived data covering the same ids, e.g. the transition
// table), inside the hashed payload.
Status SaveSnapshot(const std::string& path, uint64_t store_tag, uint64_t covered_id,
                    const std::map<uint64_t, const VectorIndex*>& sections,
                    std::string_view extra = {});
// Corruption when the file is truncated, fails its hash, has another dimension or does not parse;
// NotFound when absent. Nothing from a bad file is returned.
// `store_tag` names the store the snapshot belongs to: a snapshot of another store is Corruption.
// `extra` (optional) receives the extra bytes; nullopt for a format-1 file, which has none.
Status LoadSnapshot(const std::string& path, const IndexOptions& options, uint64_t store_tag,
                    uint64_t* covered_id,
                    std::map<uint64_t, std::unique_ptr<VectorIndex>>* sections,
                    std::optional<std::string>* extra = nullptr);

}  // namespace htam::memory
