// CUPTI activity API through dlopen: register buffer callbacks, enable CONCURRENT_KERNEL, MEMCPY,
// MEMSET; per call, flush and take min(start)..max(end) of the records that ended after Begin().
#include "backends/cuda/cupti_spans.h"

#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

namespace htam::cuda {
namespace {

struct Api {
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*timestamp)(uint64_t*) = nullptr;  // optional
};
Api g_api;
std::atomic<bool> g_in_use{false};  // one CuptiSpans per process

std::mutex g_mu;
uint64_t g_begin = 0;                                         // guarded by g_mu
uint64_t g_min_start = std::numeric_limits<uint64_t>::max();  // guarded by g_mu
uint64_t g_max_end = 0;                                       // guarded by g_mu
int g_records = 0;                                            // guarded by g_mu
// Batch mode (BeginBatch .. EndBatch): every record is kept, to be assigned to its window later.
bool g_batch = false;                                         // guarded by g_mu
std::vector<std::pair<uint64_t, uint64_t>> g_kept;            // guarded by g_mu

constexpr size_t kBufferBytes = 4 << 20;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

// Caller holds g_mu. Incomplete records (zero timestamps) and records that ended before the span
// began (work of the preparation, delivered late) are not counted.
void Take(uint64_t start, uint64_t end) {
  if (g_batch) {
    if (start != 0 && end >= start) g_kept.emplace_back(start, end);
    return;
  }
  if (start == 0 || end < start || end <= g_begin) return;
  g_min_start = std::min(g_min_start, start);
  g_max_end = std::max(g_max_end, end);
  ++g_records;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> l(g_mu);
    CUpti_Activity* rec = nullptr;
    while (valid > 0 && g_api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
          Take(k->start, k->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
          Take(m->start, m->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
          Take(m->start, m->end);
          break;
        }
        default: break;
      }
    }
  }
  free(buffer);
}

template <typename F>
bool Sym(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

std::vector<std::string> Candidates() {
  std::vector<std::string> c;
  if (const char* e = getenv("HTAM_CUPTI_LIBRARY"); e && *e) c.push_back(e);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) && info.dli_fname) {
    std::string p = info.dli_fname;
    size_t slash = p.find_last_of('/');
    if (slash != std::string::npos) {
      c.push_back(p.substr(0, slash + 1) + "libcupti.so.13");
      c.push_back(p.substr(0, slash + 1) + "libcupti.so");
    }
  }
  for (const char* p :
       {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so",
        "/usr/local/cuda/lib/libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
        "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so"}) {
    c.push_back(p);
  }
  return c;
}

}  // namespace

Result<std::unique_ptr<CuptiSpans>> CuptiSpans::Open() {
  if (g_in_use.exchange(true)) return Status::Unavailable("CUPTI spans already in use here");
  void* lib = nullptr;
  std::string path;
  for (const std::string& name : Candidates()) {
    if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      path = name;
      break;
    }
  }
  if (!lib) {
    g_in_use = false;
    return Status::Unavailable("libcupti not found");
  }
  if (!Sym(lib, "cuptiActivityRegisterCallbacks", &g_api.register_callbacks) ||
      !Sym(lib, "cuptiActivityEnable", &g_api.enable) ||
      !Sym(lib, "cuptiActivityDisable", &g_api.disable) ||
      !Sym(lib, "cuptiActivityFlushAll", &g_api.flush_all) ||
      !Sym(lib, "cuptiActivityGetNextRecord", &g_api.next_record)) {
    dlclose(lib);
    g_in_use = false;
    return Status::Unavailable("libcupti lacks the activity API");
  }
  Sym(lib, "cuptiGetTimestamp", &g_api.timestamp);
  // From here on CUPTI holds pointers to this library's callbacks (and may call them from its
  // exit handler): keep the library mapped even when the host dlcloses the plugin.
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&BufferRequested), &self) && self.dli_fname)
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  CUptiResult r = g_api.register_callbacks(BufferRequested, BufferCompleted);
  const char* step = "cuptiActivityRegisterCallbacks";
  for (auto [kind, name] : {std::pair{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
                            std::pair{CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
                            std::pair{CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"}}) {
    if (r != CUPTI_SUCCESS) break;
    r = g_api.enable(kind);
    step = name;
  }
  if (r != CUPTI_SUCCESS) {
    // libcupti stays loaded: callbacks may have been registered.
    const char* text = nullptr;
    CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
    if (Sym(lib, "cuptiGetResultString", &result_string)) result_string(r, &text);
    g_in_use = false;
    return Status::Unavailable(std::string("CUPTI activity collection could not be enabled (") +
                               step + ": " + (text ? text : std::to_string(int(r))) + ", " + path +
                               ")");
  }
  std::unique_ptr<CuptiSpans> s(new CuptiSpans());
  s->lib_ = lib;
  s->path_ = path;
  return s;
}

CuptiSpans::~CuptiSpans() {
  if (!lib_) return;
  g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  g_api.disable(CUPTI_ACTIVITY_KIND_MEMCPY);
  g_api.disable(CUPTI_ACTIVITY_KIND_MEMSET);
  g_in_use = false;
  // libcupti stays loaded: it may still hold callbacks into this library's code paths.
}

void CuptiSpans::Begin() {
  // Blocking: the completion callback has run for every buffer when it returns (cupti_activity.h).
  g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  uint64_t now = 0;
  if (g_api.timestamp) g_api.timestamp(&now);
  std::lock_guard<std::mutex> l(g_mu);
  g_begin = now;
  g_min_start = std::numeric_limits<uint64_t>::max();
  g_max_end = 0;
  g_records = 0;
}

bool CuptiSpans::CanBatch() const {
  return g_api.timestamp != nullptr;
}

uint64_t CuptiSpans::Now() const {
  uint64_t now = 0;
  if (g_api.timestamp) g_api.timestamp(&now);
  return now;
}

void CuptiSpans::BeginBatch() {
  g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // what came before is never counted
  std::lock_guard<std::mutex> l(g_mu);
  g_batch = true;
  g_kept.clear();
}

void CuptiSpans::EndBatch(const std::vector<uint64_t>& begin, const std::vector<uint64_t>& end,
                          double* spans_us, int* records) {
  g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<std::pair<uint64_t, uint64_t>> kept;
  {
    std::lock_guard<std::mutex> l(g_mu);
    g_batch = false;
    kept.swap(g_kept);
  }
  const size_t n = std::min(begin.size(), end.size());
  std::vector<uint64_t> lo(n, std::numeric_limits<uint64_t>::max()), hi(n, 0);
  std::vector<int> count(n, 0);
  for (const auto& [start, stop] : kept) {
    // The window that holds the record's start: the last one that began at or before it (windows
    // are in time order and do not overlap); work of the preparation between two windows and of
    // the warm-up before the first starts outside every window.
    auto it = std::upper_bound(begin.begin(), begin.begin() + static_cast<ptrdiff_t>(n), start);
    if (it == begin.begin()) continue;
    size_t r = static_cast<size_t>(it - begin.begin()) - 1;
    if (start > end[r]) continue;
    lo[r] = std::min(lo[r], start);
    hi[r] = std::max(hi[r], stop);
    ++count[r];
  }
  for (size_t r = 0; r < n; ++r) {
    if (records) records[r] = count[r];
    if (spans_us) spans_us[r] = count[r] && hi[r] > lo[r] ? double(hi[r] - lo[r]) / 1000.0 : 0.0;
  }
}

void CuptiSpans::AbortBatch() {
  std::lock_guard<std::mutex> l(g_mu);
  g_batch = false;
  g_kept.clear();
}

double CuptiSpans::EndUs(int* records) {
  g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> l(g_mu);
  if (records) *records = g_records;
  if (g_records == 0 || g_max_end <= g_min_start) return 0.0;
  return static_cast<double>(g_max_end - g_min_start) / 1000.0;
}

}  // namespace htam::cuda
