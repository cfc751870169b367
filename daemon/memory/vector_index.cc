// FAISS adapter: HNSW inner-product indexes with external ids, and atomic snapshot files.
#include "daemon/memory/vector_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/DistanceComputer.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/HNSW.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/utils/Heap.h>
#include <fcntl.h>
#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/file.h"
#include "base/hash.h"

namespace htam::memory {
namespace {

// ---- inner products for the HNSW graphs
// The distribution's FAISS computes inner products with its scalar reference loop (one
// dependent add per element); every search and every add of the memory is bound by it. The
// storage of our HNSW indexes is a FastFlat instead: the same flat codes (files read and written
// by FAISS as an IndexFlat), with a distance computer that uses AVX2/FMA where the CPU has them,
// four independent accumulators otherwise.

__attribute__((target("avx2,fma"))) float DotAvx2(const float* a, const float* b, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  s0 = _mm256_add_ps(s0, s1);
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
  x = _mm_hadd_ps(x, x);
  x = _mm_hadd_ps(x, x);
  float s = _mm_cvtss_f32(x);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

float DotPortable(const float* a, const float* b, size_t n) {
  float s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) s[j] += a[i + j] * b[i + j];
  float t = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}

const bool kHaveAvx2 = [] {
  __builtin_cpu_init();  // may run before libgcc's own initializer
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}();

inline float Dot(const float* a, const float* b, size_t n) {
  return kHaveAvx2 ? DotAvx2(a, b, n) : DotPortable(a, b, n);
}

struct FastIPDistance final : faiss::FlatCodesDistanceComputer {
  explicit FastIPDistance(const faiss::IndexFlat& s)
      : faiss::FlatCodesDistanceComputer(s.codes.data(), s.code_size),
        d(static_cast<size_t>(s.d)),
        base(reinterpret_cast<const float*>(s.codes.data())) {}
  void set_query(const float* x) override { q = x; }
  float distance_to_code(const uint8_t* code) override {
    return Dot(q, reinterpret_cast<const float*>(code), d);
  }
  float symmetric_dis(idx_t i, idx_t j) override { return Dot(base + i * d, base + j * d, d); }
  size_t d;
  const float* base;
  const float* q = nullptr;
};

struct FastFlat final : faiss::IndexFlat {
  FastFlat(idx_t d, faiss::MetricType metric) : faiss::IndexFlat(d, metric) {}
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override {
    if (metric_type == faiss::METRIC_INNER_PRODUCT) return new FastIPDistance(*this);
    return faiss::IndexFlat::get_FlatCodesDistanceComputer();
  }
};

// Replaces the HNSW storage (created or read from a file) by a FastFlat holding the same codes.
void UseFastStorage(faiss::IndexHNSWFlat* h) {
  auto* old = dynamic_cast<faiss::IndexFlat*>(h->storage);
  if (!old || dynamic_cast<FastFlat*>(old)) return;
  auto* fast = new FastFlat(old->d, old->metric_type);
  fast->codes.swap(old->codes);
  fast->ntotal = old->ntotal;
  fast->is_trained = old->is_trained;
  if (h->own_fields) delete old;
  h->storage = fast;
  h->own_fields = true;
}

constexpr char kMagic[8] = {'H', 'T', 'A', 'M', 'I', 'D', 'X', '1'};
constexpr uint32_t kFormat = 2;  // 1: no extra bytes (still read)
// magic, format, dim, store tag, covered_id, sections, payload bytes, payload hash
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8 + 4 + 8 + 8;

struct File {
  FILE* f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

template <typename T>
bool WriteRaw(FILE* f, T v) {
  return std::fwrite(&v, sizeof v, 1, f) == 1;
}
template <typename T>
bool ReadRaw(FILE* f, T* v) {
  return std::fread(v, sizeof *v, 1, f) == 1;
}

Status HashFileRegion(FILE* f, long offset, uint64_t length, uint64_t* hash) {
  if (std::fseek(f, offset, SEEK_SET) != 0) return Status::IOError("seek");
  std::vector<char> buf(1 << 20);
  uint64_t h = 0, left = length;
  while (left > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    if (std::fread(buf.data(), 1, want, f) != want) return Status::Corruption("snapshot truncated");
    h = Checksum64(buf.data(), want, h);
    left -= want;
  }
  *hash = h;
  return Status::OK();
}

}  // namespace

VectorIndex::VectorIndex(const IndexOptions& options) : options_(options) {
  hnsw_ = new faiss::IndexHNSWFlat(options.dim, options.hnsw_m, faiss::METRIC_INNER_PRODUCT);
  hnsw_->hnsw.efConstruction = options.ef_construction;
  hnsw_->hnsw.efSearch = options.ef_search;
  UseFastStorage(hnsw_);
  index_ = new faiss::IndexIDMap2(hnsw_);
  index_->own_fields = true;
}

VectorIndex::VectorIndex(const IndexOptions& options, faiss::IndexIDMap2* adopted)
    : options_(options), index_(adopted) {
  hnsw_ = dynamic_cast<faiss::IndexHNSWFlat*>(index_->index);
  index_->own_fields = true;
  if (hnsw_) {
    UseFastStorage(hnsw_);
    hnsw_->hnsw.efSearch = options.ef_search;
    hnsw_->hnsw.efConstruction = options.ef_construction;  // the graph degree stays the file's
  }
}

VectorIndex::~VectorIndex() {
  delete index_;
}

Status VectorIndex::Add(size_t n, const uint64_t* ids, const float* vectors) {
  if (n == 0) return Status::OK();
  // Small adds (the commits of a moment) run without an OpenMP team: its barriers wait for
  // descheduled threads on a loaded machine, as in Search. Bulk adds (rebuilds) keep the team.
  constexpr size_t kTeamFrom = 8192;
  int threads = omp_get_max_threads();
  if (n < kTeamFrom) omp_set_num_threads(1);
  Status st;
  try {
    static_assert(sizeof(faiss::Index::idx_t) == sizeof(uint64_t));
    index_->add_with_ids(static_cast<faiss::Index::idx_t>(n), vectors,
                         reinterpret_cast<const faiss::Index::idx_t*>(ids));
  } catch (const std::exception& e) {
    st = Status::Internal(std::string("faiss add: ") + e.what());
  }
  omp_set_num_threads(threads);
  return st;
}

namespace {

// One query over an HNSW graph whose storage is a FastFlat with inner products: the same walk as
// faiss::IndexHNSW::search (FAISS 1.7: greedy descent through the upper levels, then the bounded
// candidate search of level 0 with the relative-distance stop) on negated inner products, so the
// same vectors are visited in the same order and the answer is the same. What it saves, per query:
// the visited table FAISS allocates and clears for every search (ntotal bytes: 1 MB at a million
// transitions; here one per thread, reused, cleared every 250 searches as FAISS's own), the
// OpenMP region, three virtual calls per distance; and it prefetches the vectors of a node's
// unvisited neighbours before computing their distances (the HNSW walk is bound by memory).
struct GraphWalk {
  const faiss::HNSW& g;
  const float* base;
  size_t d;
  const float* q;
  faiss::VisitedTable& vt;

  float Dis(int v) const { return -Dot(q, base + static_cast<size_t>(v) * d, d); }

  void Prefetch(int v) const {
    const char* p = reinterpret_cast<const char*>(base + static_cast<size_t>(v) * d);
    for (size_t off = 0; off < d * sizeof(float); off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  }

  void GreedyUpdateNearest(int level, int* nearest, float* d_nearest) const {
    while (true) {
      int prev = *nearest;
      size_t begin = g.offsets[prev] + g.cum_nneighbor_per_level[level];
      size_t end = g.offsets[prev] + g.cum_nneighbor_per_level[level + 1];
      for (size_t i = begin; i < end; ++i) {
        int v = g.neighbors[i];
        if (v < 0) break;
        float dis = Dis(v);
        if (dis < *d_nearest) {
          *nearest = v;
          *d_nearest = dis;
        }
      }
      if (*nearest == prev) return;
    }
  }

  // Level 0 from the candidates; D/I: a max-heap of k (negated similarity, storage index).
  // ef: the relative-distance stop (efSearch; the candidate heap may be larger).
  int SearchLevel0(int k, int ef, faiss::HNSW::MinimaxHeap& candidates, float* D,
                   faiss::Index::idx_t* I) const {
    int nres = 0;
    for (int i = 0; i < candidates.size(); ++i) {
      int v1 = candidates.ids[i];
      float dis = candidates.dis[i];
      if (nres < k) {
        faiss::maxheap_push(++nres, D, I, dis, faiss::Index::idx_t{v1});
      } else if (dis < D[0]) {
        faiss::maxheap_replace_top(nres, D, I, dis, faiss::Index::idx_t{v1});
      }
      vt.set(v1);
    }
    const size_t width = static_cast<size_t>(g.cum_nneighbor_per_level[1]);
    int fresh_buf[64];
    std::vector<int> fresh_big;
    int* fresh = width <= 64 ? fresh_buf : (fresh_big.resize(width), fresh_big.data());
    while (candidates.size() > 0) {
      float d0 = 0;
      int v0 = candidates.pop_min(&d0);
      if (g.check_relative_distance && candidates.count_below(d0) >= ef) break;
      size_t begin = g.offsets[v0], end = begin + width;
      int n = 0;
      for (size_t j = begin; j < end; ++j) {
        int v1 = g.neighbors[j];
        if (v1 < 0) break;
        if (vt.get(v1)) continue;
        vt.set(v1);
        fresh[n++] = v1;
        Prefetch(v1);
      }
      for (int j = 0; j < n; ++j) {
        int v1 = fresh[j];
        float dis = Dis(v1);
        if (nres < k) {
          faiss::maxheap_push(++nres, D, I, dis, faiss::Index::idx_t{v1});
        } else if (dis < D[0]) {
          faiss::maxheap_replace_top(nres, D, I, dis, faiss::Index::idx_t{v1});
        }
        candidates.push(v1, dis);
      }
    }
    return nres;
  }
};

faiss::VisitedTable& ThreadVisitedTable(size_t n) {
  thread_local std::unique_ptr<faiss::VisitedTable> vt;
  if (!vt) {
    vt = std::make_unique<faiss::VisitedTable>(static_cast<int>(n));
  } else if (vt->visited.size() < n) {
    // New marks are 0, never the current visno (>= 1): nothing reads as visited.
    vt->visited.resize(n, 0);
  }
  return *vt;
}

}  // namespace

bool VectorIndex::FastSearchable() const {
  return hnsw_ && hnsw_->metric_type == faiss::METRIC_INNER_PRODUCT &&
         dynamic_cast<const FastFlat*>(hnsw_->storage) != nullptr && hnsw_->hnsw.upper_beam == 1 &&
         hnsw_->hnsw.search_bounded_queue && !hnsw_->reconstruct_from_neighbors &&
         hnsw_->ntotal == index_->ntotal && index_->id_map.size() == size_t(index_->ntotal);
}

std::vector<Hit> VectorIndex::Search(const float* query, int k,
                                     std::vector<const float*>* vectors) const {
  std::vector<Hit> out;
  if (vectors) vectors->clear();
  if (k <= 0 || index_->ntotal == 0) return out;
  if (!FastSearchable()) {
    out = SearchFaiss(query, k);
    if (vectors) vectors->assign(out.size(), nullptr);
    return out;
  }
  k = static_cast<int>(std::min<int64_t>(k, index_->ntotal));
  const faiss::HNSW& g = hnsw_->hnsw;
  if (g.entry_point < 0) return out;
  const auto* storage = static_cast<const FastFlat*>(hnsw_->storage);
  faiss::VisitedTable& vt = ThreadVisitedTable(static_cast<size_t>(hnsw_->ntotal));
  GraphWalk w{g, reinterpret_cast<const float*>(storage->codes.data()),
              static_cast<size_t>(hnsw_->d), query, vt};
  thread_local std::vector<float> D;
  thread_local std::vector<faiss::Index::idx_t> I;
  D.resize(k);
  I.resize(k);
  faiss::maxheap_heapify(k, D.data(), I.data());
  int nearest = g.entry_point;
  float d_nearest = w.Dis(nearest);
  for (int level = g.max_level; level >= 1; --level)
    w.GreedyUpdateNearest(level, &nearest, &d_nearest);
  faiss::HNSW::MinimaxHeap candidates(std::max(g.efSearch, k));
  candidates.push(nearest, d_nearest);
  w.SearchLevel0(k, g.efSearch, candidates, D.data(), I.data());
  vt.advance();
  faiss::maxheap_reorder(k, D.data(), I.data());
  out.reserve(k);
  for (int i = 0; i < k; ++i) {
    if (I[i] < 0) continue;
    out.push_back(Hit{static_cast<uint64_t>(index_->id_map[I[i]]), -D[i]});
    if (vectors) vectors->push_back(w.base + static_cast<size_t>(I[i]) * w.d);
  }
  return out;
}

std::vector<Hit> VectorIndex::SearchFaiss(const float* query, int k) const {
  std::vector<Hit> out;
  if (k <= 0 || index_->ntotal == 0) return out;
  k = static_cast<int>(std::min<int64_t>(k, index_->ntotal));
  std::vector<float> d(k);
  std::vector<faiss::Index::idx_t> l(k);
  // One query: no OpenMP team. A team per query waits at its barrier for a descheduled thread
  // on a loaded machine (100 ms tails); the setting is per calling thread and restored.
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    index_->search(1, query, k, d.data(), l.data());
  } catch (const std::exception&) {
    omp_set_num_threads(threads);
    return out;
  }
  omp_set_num_threads(threads);
  for (int i = 0; i < k; ++i)
    if (l[i] >= 0) out.push_back(Hit{static_cast<uint64_t>(l[i]), d[i]});
  return out;
}

bool VectorIndex::Reconstruct(uint64_t id, std::vector<float>* out) const {
  out->assign(options_.dim, 0.0f);
  try {
    index_->reconstruct(static_cast<faiss::Index::idx_t>(id), out->data());
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

size_t VectorIndex::size() const {
  return static_cast<size_t>(index_->ntotal);
}

void VectorIndex::set_ef_search(int ef) {
  options_.ef_search = ef;
  if (hnsw_) hnsw_->hnsw.efSearch = ef;
}

Status SaveSnapshot(const std::string& path, uint64_t store_tag, uint64_t covered_id,
                    const std::map<uint64_t, const VectorIndex*>& sections,
                    std::string_view extra) {
  // Written beside, fsynced, renamed over the old snapshot, the folder fsynced.
  return PublishFile(
      path,
      [&](const std::string& tmp) -> Status {
        File out;
        out.f = std::fopen(tmp.c_str(), "w+b");
        if (!out.f) return Status::IOError("create " + tmp + ": " + std::strerror(errno));
        uint32_t dim =
            sections.empty() ? 0 : static_cast<uint32_t>(sections.begin()->second->dim());
        // Header with the hash left zero; patched once the payload is on disk.
        bool ok = std::fwrite(kMagic, 8, 1, out.f) == 1 && WriteRaw(out.f, kFormat) &&
                  WriteRaw(out.f, dim) && WriteRaw(out.f, store_tag) &&
                  WriteRaw(out.f, covered_id) &&
                  WriteRaw(out.f, static_cast<uint32_t>(sections.size())) &&
                  WriteRaw(out.f, uint64_t{0}) && WriteRaw(out.f, uint64_t{0});
        if (!ok) return Status::IOError("write " + tmp);
        try {
          for (const auto& [key, index] : sections) {
            long len_at = std::ftell(out.f) + 8;
            if (!WriteRaw(out.f, key) || !WriteRaw(out.f, uint64_t{0}))
              return Status::IOError("write");
            faiss::FileIOWriter w(out.f);
            faiss::write_index(index->index_, &w);
            long end = std::ftell(out.f);
            uint64_t len = static_cast<uint64_t>(end - len_at - 8);
            if (std::fseek(out.f, len_at, SEEK_SET) != 0 || !WriteRaw(out.f, len) ||
                std::fseek(out.f, end, SEEK_SET) != 0)
              return Status::IOError("write " + tmp);
          }
        } catch (const std::exception& e) {
          return Status::IOError(std::string("faiss write_index: ") + e.what());
        }
        if (!WriteRaw(out.f, static_cast<uint64_t>(extra.size())) ||
            (!extra.empty() && std::fwrite(extra.data(), extra.size(), 1, out.f) != 1))
          return Status::IOError("write " + tmp);
        if (std::fflush(out.f) != 0) return Status::IOError("flush " + tmp);
        long end = std::ftell(out.f);
        uint64_t payload = static_cast<uint64_t>(end) - kHeaderSize, hash = 0;
        HTAM_RETURN_IF_ERROR(HashFileRegion(out.f, kHeaderSize, payload, &hash));
        if (std::fseek(out.f, kHeaderSize - 16, SEEK_SET) != 0 || !WriteRaw(out.f, payload) ||
            !WriteRaw(out.f, hash) || std::fflush(out.f) != 0)
          return Status::IOError("write " + tmp);
        FILE* f = out.f;
        out.f = nullptr;
        const bool closed = std::fclose(f) == 0;
        return closed ? Status::OK()
                      : Status::IOError("close " + tmp + ": " + std::strerror(errno));
      },
      /*durable=*/true);
}

Status LoadSnapshot(const std::string& path, const IndexOptions& options, uint64_t store_tag,
                    uint64_t* covered_id,
                    std::map<uint64_t, std::unique_ptr<VectorIndex>>* sections,
                    std::optional<std::string>* extra) {
  sections->clear();
  if (extra) extra->reset();
  File in;
  in.f = std::fopen(path.c_str(), "rb");
  if (!in.f) return Status::NotFound("no snapshot " + path);
  char magic[8];
  uint32_t format = 0, dim = 0, count = 0;
  uint64_t tag = 0, covered = 0, payload = 0, hash = 0;
  if (std::fread(magic, 8, 1, in.f) != 1 || std::memcmp(magic, kMagic, 8) != 0)
    return Status::Corruption(path + ": not an htam index snapshot");
  if (!ReadRaw(in.f, &format) || !ReadRaw(in.f, &dim) || !ReadRaw(in.f, &tag) ||
      !ReadRaw(in.f, &covered) || !ReadRaw(in.f, &count) || !ReadRaw(in.f, &payload) ||
      !ReadRaw(in.f, &hash))
    return Status::Corruption(path + ": truncated header");
  if (format != kFormat && format != 1)
    return Status::Corruption(path + ": unknown snapshot format");
  if (tag != store_tag) return Status::Corruption(path + ": snapshot of another store");
  if (count > 0 && dim != static_cast<uint32_t>(options.dim))
    return Status::Corruption(path + ": dimension " + std::to_string(dim) + " differs from " +
                              std::to_string(options.dim));
  std::fseek(in.f, 0, SEEK_END);
  if (static_cast<uint64_t>(std::ftell(in.f)) != kHeaderSize + payload)
    return Status::Corruption(path + ": size does not match its header");
  uint64_t actual = 0;
  HTAM_RETURN_IF_ERROR(HashFileRegion(in.f, kHeaderSize, payload, &actual));
  if (actual != hash) return Status::Corruption(path + ": checksum mismatch");
  std::fseek(in.f, kHeaderSize, SEEK_SET);
  std::map<uint64_t, std::unique_ptr<VectorIndex>> out;
  try {
    for (uint32_t i = 0; i < count; ++i) {
      uint64_t key = 0, len = 0;
      if (!ReadRaw(in.f, &key) || !ReadRaw(in.f, &len))
        return Status::Corruption(path + ": truncated");
      long start = std::ftell(in.f);
      faiss::FileIOReader r(in.f);
      std::unique_ptr<faiss::Index> idx(faiss::read_index(&r));
      auto* map = dynamic_cast<faiss::IndexIDMap2*>(idx.get());
      if (!map || !dynamic_cast<faiss::IndexHNSWFlat*>(map->index) || map->d != options.dim ||
          static_cast<uint64_t>(std::ftell(in.f) - start) != len)
        return Status::Corruption(path + ": unexpected index in section " + std::to_string(i));
      idx.release();
      out[key] = std::unique_ptr<VectorIndex>(new VectorIndex(options, map));
    }
  } catch (const std::exception& e) {
    return Status::Corruption(path + ": " + e.what());
  }
  std::optional<std::string> bytes;
  if (format >= 2) {
    uint64_t len = 0;
    long at = std::ftell(in.f);
    if (!ReadRaw(in.f, &len) || len != kHeaderSize + payload - static_cast<uint64_t>(at) - 8)
      return Status::Corruption(path + ": extra section does not match the payload");
    bytes.emplace(len, '\0');
    if (len && std::fread(bytes->data(), len, 1, in.f) != 1)
      return Status::Corruption(path + ": truncated extra section");
  }
  if (extra) *extra = std::move(bytes);
  *covered_id = covered;
  *sections = std::move(out);
  return Status::OK();
}

}  // namespace htam::memory
