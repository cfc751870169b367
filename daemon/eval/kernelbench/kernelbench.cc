// Golden data of KernelBench tasks; see kernelbench.h.
#include "daemon/eval/kernelbench/kernelbench.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file.h"
#include "base/hash.h"
#include "base/paths.h"
#include "base/process.h"
#include "base/wait_report.h"
#include "daemon/eval/gate/timing_lock.h"

namespace htam {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'H', 'T', 'A', 'M', 'G', 'L', 'D', '1'};
constexpr uint64_t kMaxTensorBytes = uint64_t(16) << 30;
// The precision baseline.json's figures are timed in: a candidate's (kb_runner.py, TF32 off);
// kb_helper.py BASELINE_PRECISION writes it.
constexpr char kBaselinePrecision[] = "fp32";

// A little-endian reader over a byte string; every read checks the bounds.
class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <typename T>
  bool Get(T* v) {
    if (s_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, s_.data() + pos_, sizeof(T));  // the hosts htam runs on are little-endian
    pos_ += sizeof(T);
    return true;
  }
  bool Bytes(uint64_t n, std::string* out) {
    if (s_.size() - pos_ < n) return false;
    out->assign(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Raw(uint64_t n, std::vector<uint8_t>* out) {
    if (s_.size() - pos_ < n) return false;
    out->assign(s_.data() + pos_, s_.data() + pos_ + n);
    pos_ += n;
    return true;
  }
  bool AtEnd() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

std::string SeedFile(const std::string& dir, uint64_t seed) {
  return dir + "/seed_" + std::to_string(seed) + ".bin";
}

std::string Join(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The helper's own error line ("kernelbench: ..."), else the log's last lines.
std::string HelperError(const std::string& log) {
  std::string last, line;
  std::istringstream in(log);
  while (std::getline(in, line)) {
    if (line.rfind("kernelbench: ", 0) == 0) return line;
    if (!line.empty()) last = line;
  }
  return last.empty() ? "no output" : last;
}

}  // namespace

std::string DefaultKernelBenchHelper() {
  if (const char* e = getenv("HTAM_KERNELBENCH_HELPER"); e && *e) return e;
  // Installed: <prefix>/share/htam/kernelbench/kb_helper.py (a build tree links it there).
  return ShippedPath("", "kernelbench/kb_helper.py");
}

Status ReadGoldenFile(const std::string& path, GoldenCase* out) {
  std::string data;
  if (!ReadWholeFile(path, &data)) return Status::NotFound(path + ": cannot open");
  Reader r(data);
  std::string magic;
  uint32_t count = 0;
  if (!r.Bytes(8, &magic) || std::memcmp(magic.data(), kMagic, 8) != 0 || !r.Get(&count))
    return Status::Corruption(path + ": not a golden file (bad magic)");
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t role = 0, name_len = 0, dtype_len = 0, ndim = 0;
    std::string name, dtype;
    HostTensor t;
    if (!r.Get(&role) || role > 1 || !r.Get(&name_len) || name_len > 4096 ||
        !r.Bytes(name_len, &name) || !r.Get(&dtype_len) || dtype_len > 16 ||
        !r.Bytes(dtype_len, &dtype) || !r.Get(&ndim) || ndim < 1 || ndim > HTAM_MAX_DIMS)
      return Status::Corruption(path + ": tensor " + std::to_string(i) + ": bad header");
    if (!ParseDtype(dtype, &t.dtype))
      return Status::Corruption(path + ": tensor '" + name + "': unknown dtype '" + dtype + "'");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < ndim; ++d) {
      int64_t v = 0;
      if (!r.Get(&v) || v < 0) return Status::Corruption(path + ": tensor '" + name + "': dims");
      t.shape.push_back(v);
      numel *= uint64_t(v);
    }
    uint64_t nbytes = 0;
    if (!r.Get(&nbytes) || nbytes > kMaxTensorBytes ||
        nbytes != numel * uint64_t(htam_dtype_size(t.dtype)) || !r.Raw(nbytes, &t.bytes))
      return Status::Corruption(path + ": tensor '" + name + "': byte count");
    t.name = name;
    (role == 0 ? out->inputs : out->outputs).push_back(std::move(t));
  }
  if (!r.AtEnd()) return Status::Corruption(path + ": trailing bytes");
  return Status::OK();
}

KernelBenchGolden::KernelBenchGolden(const TaskSpec& task, GoldenOptions options)
    : task_(task), opt_(std::move(options)) {
  if (opt_.helper.empty()) opt_.helper = DefaultKernelBenchHelper();
  std::string problem;
  if (task_.kernelbench.empty()) {
    init_ = Status::InvalidArgument("task '" + task_.name + "' is not a KernelBench task");
  } else if (!ReadWholeFile(task_.dir + "/" + task_.kernelbench, &problem)) {
    init_ = Status::NotFound("cannot read the problem file " + task_.dir + "/" + task_.kernelbench);
  } else if (opt_.cache_dir.empty()) {
    init_ = Status::InvalidArgument("no cache directory for golden data");
  } else {
    std::string key = Sha256Hex(task_.spec_hash + "\n" + Sha256Hex(problem)).substr(0, 24);
    dir_ = opt_.cache_dir + "/" + key + "/" + opt_.device;
    lock_path_ = opt_.cache_dir + "/" + key + "." + opt_.device + ".lock";
  }
}

KernelBenchGolden::~KernelBenchGolden() {
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the entry
  if (lock_fd_ >= 0 && opt_.cache_bytes > 0)
    EvictGoldenCache(opt_.cache_dir, opt_.cache_bytes, dir_);
}

Status KernelBenchGolden::Use() {
  if (lock_fd_ >= 0) return Status::OK();
  std::error_code ec;
  fs::create_directories(opt_.cache_dir, ec);
  if (ec) return Status::IOError("cannot create " + opt_.cache_dir + ": " + ec.message());
  // Lock files are never removed: every process locks the same inode.
  lock_fd_ = open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return Status::IOError("cannot open " + lock_path_ + ": " + strerror(errno));
  while (flock(lock_fd_, LOCK_SH) != 0 && errno == EINTR) {
  }
  return Status::OK();
}

uint64_t EvictGoldenCache(const std::string& root, uint64_t limit, const std::string& also_dir) {
  struct Entry {
    std::string dir, lock;
    fs::file_time_type used;
    uint64_t bytes = 0;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& key : fs::directory_iterator(root, ec)) {
    if (!key.is_directory(ec)) continue;
    for (const auto& dev : fs::directory_iterator(key.path(), ec)) {
      if (!dev.is_directory(ec)) continue;
      Entry e;
      e.dir = dev.path().string();
      e.lock = root + "/" + key.path().filename().string() + "." + dev.path().filename().string() +
               ".lock";
      e.used = fs::last_write_time(dev.path(), ec);
      for (const auto& f : fs::recursive_directory_iterator(dev.path(), ec))
        if (f.is_regular_file(ec)) e.bytes += f.file_size(ec);
      total += e.bytes;
      entries.push_back(std::move(e));
    }
  }
  if (total <= limit) return total;
  const std::string also = fs::path(also_dir).lexically_normal().string();
  std::stable_sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    const bool la = fs::path(a.dir).lexically_normal().string() == also;
    const bool lb = fs::path(b.dir).lexically_normal().string() == also;
    return la != lb ? lb : a.used < b.used;
  });
  for (const Entry& e : entries) {
    if (total <= limit) break;
    int fd = open(e.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {  // nobody uses it
      fs::remove_all(e.dir, ec);
      if (!ec) {
        total -= std::min(total, e.bytes);
        fs::remove(fs::path(e.dir).parent_path(), ec);  // the key's folder, once empty
      }
    }
    close(fd);
  }
  return total;
}

Status KernelBenchGolden::Prepare(const std::vector<uint64_t>& seeds,
                                  const std::vector<uint64_t>& time_seeds, bool with_baseline) {
  std::vector<uint64_t> all = seeds;
  all.insert(all.end(), time_seeds.begin(), time_seeds.end());
  return Fill(all, time_seeds, with_baseline);
}

Status KernelBenchGolden::PrepareBaseline(const std::vector<uint64_t>& time_seeds) {
  return Fill({}, time_seeds, true);
}

Status KernelBenchGolden::Fill(const std::vector<uint64_t>& seeds,
                               const std::vector<uint64_t>& time_seeds, bool with_baseline) {
  HTAM_RETURN_IF_ERROR(init_);
  HTAM_RETURN_IF_ERROR(Use());
  auto missing = [&] {
    std::vector<uint64_t> m;
    for (uint64_t s : seeds)
      if (!fs::exists(SeedFile(dir_, s))) m.push_back(s);
    return m;
  };
  auto need_baseline = [&] { return with_baseline && !HasCurrentBaseline(); };
  if (!missing().empty() || need_baseline()) {
    // One process fills an entry; the others wait (a wait, not their work) and find it filled.
    const std::string fill_path = lock_path_.substr(0, lock_path_.size() - 5) + ".fill";
    int fill = open(fill_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fill < 0) return Status::IOError("cannot open " + fill_path + ": " + strerror(errno));
    if (flock(fill, LOCK_EX | LOCK_NB) != 0) {
      ScopedWait wait;
      while (flock(fill, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
    std::vector<uint64_t> m = missing();
    Status st;
    const bool base = need_baseline();
    if (!m.empty() || base) {
      // Room on the disk for this job's golden files, else this job fails, nothing else.
      const uint64_t need =
          uint64_t(m.size()) * (task_.case_input_bytes + task_.case_output_bytes) + (1u << 20);
      struct statvfs v {};
      if (statvfs(opt_.cache_dir.c_str(), &v) == 0 && uint64_t(v.f_bavail) * v.f_frsize < need) {
        st = Status::IOError(
            "the golden cache's disk (" + opt_.cache_dir + ") has " +
            std::to_string(uint64_t(v.f_bavail) * v.f_frsize >> 20) + " MiB free; this task's " +
            "golden data needs about " + std::to_string(need >> 20) +
            " MiB: not computed (eval.cache_dir, eval.kernelbench_cache_mb)");
      } else {
        st = RunHelper(m, base ? time_seeds : std::vector<uint64_t>{}, base);
      }
    }
    close(fill);
    HTAM_RETURN_IF_ERROR(st);
  }
  // Used now: the last to be evicted.
  utimensat(AT_FDCWD, dir_.c_str(), nullptr, 0);
  if (opt_.cache_bytes > 0) EvictGoldenCache(opt_.cache_dir, opt_.cache_bytes, dir_);
  return Status::OK();
}

std::vector<std::string> KernelBenchGolden::DeviceLockArgs() const {
  if (opt_.device_lock.empty()) return {};
  return {"--device-lock", opt_.device_lock, "--device-lock-wait",
          FormatNumber(opt_.device_lock_wait_s)};
}

Status KernelBenchGolden::RunHelper(const std::vector<uint64_t>& seeds,
                                    const std::vector<uint64_t>& time_seeds, bool with_baseline) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Status::IOError("cannot create " + dir_ + ": " + ec.message());
  if (access(opt_.helper.c_str(), R_OK) != 0)
    return Status::NotFound("KernelBench helper " + opt_.helper +
                            " not found (set HTAM_KERNELBENCH_HELPER)");
  std::vector<std::string> args = {
      opt_.python, opt_.helper, "golden",   "--problem", task_.dir + "/" + task_.kernelbench,
      "--out",     dir_,        "--device", opt_.device, "--seeds",
      Join(seeds)};
  if (with_baseline) {
    for (std::string a : {std::string("--time-seeds"), Join(time_seeds), std::string("--reps"),
                          std::to_string(opt_.reps), std::string("--warmup"),
                          std::to_string(opt_.warmup), std::string("--flush-bytes"),
                          std::to_string(opt_.flush_bytes), std::string("--defer-compile")})
      args.push_back(a);
    for (const std::string& a : DeviceLockArgs()) args.push_back(a);
  }
  // Its "kernelbench: ..." error line ends its output: the tail is kept.
  ProcessOptions o;
  o.timeout_s = opt_.timeout_s;
  o.keep_tail = true;
  ++helper_runs_;
  auto run = RunProcess(args, o);
  if (!run.ok() && run.status().code() == Status::Code::kUnavailable)
    return Status::InvalidArgument("computing golden data with PyTorch failed: kernelbench: " +
                                   run.status().message());
  if (!run.ok()) return run.status().WithContext("running the KernelBench helper");
  if (run->timed_out)
    return Status::Timeout("the KernelBench helper ran past " + std::to_string(opt_.timeout_s) +
                           " s computing golden data");
  if (run->signaled || run->exit_code != 0) {
    std::string why = run->signaled ? "killed by signal " + std::to_string(run->signal)
                                    : "exit status " + std::to_string(run->exit_code);
    return Status::InvalidArgument("computing golden data with PyTorch failed (" + why +
                                   "): " + HelperError(run->output));
  }
  for (uint64_t s : seeds)
    if (!fs::exists(SeedFile(dir_, s)))
      return Status::Internal("the KernelBench helper wrote no golden file for seed " +
                              std::to_string(s));
  return Status::OK();
}

// The torch.compile figure, measured by a process detached from this one (base/process.h
// StartDetached: out of the worker's process group, which is killed with it; nobody waits for it;
// a parent reading the worker's pipes to EOF does not wait for it either). That process holds
// compile.lock (flock, dropped by the kernel when it dies, so a crash never blocks a later try),
// runs `kb_helper.py baseline --compile-only`, whose process group is killed at
// GoldenOptions::timeout_s, and then leaves the reason in baseline.json (`baseline-note`).
bool KernelBenchGolden::MeasureCompileInBackground(const std::vector<uint64_t>& time_seeds,
                                                   int memory_fd) {
  auto b = Baseline();
  if (!b.ok() || !b->compile_pending) return false;
  int lock = open((dir_ + "/compile.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return false;
  if (flock(lock, LOCK_EX | LOCK_NB) != 0) {  // held by the process measuring now
    close(lock);
    return false;
  }
  b = Baseline();  // one that just finished may have cleared "pending"
  if (!b.ok() || !b->compile_pending) {
    close(lock);
    return false;
  }
  const std::string problem = task_.dir + "/" + task_.kernelbench;
  const std::string log = dir_ + "/compile.log";
  char limit[32];
  snprintf(limit, sizeof limit, "%g", opt_.timeout_s);
  std::vector<std::string> measure = {
      opt_.python,     opt_.helper,
      "baseline",      "--compile-only",
      "--problem",     problem,
      "--out",         dir_,
      "--device",      opt_.device,
      "--time-seeds",  Join(time_seeds),
      "--reps",        std::to_string(opt_.reps),
      "--warmup",      std::to_string(opt_.warmup),
      "--flush-bytes", std::to_string(opt_.flush_bytes),
      "--timing-lock", TimingLockPath(opt_.lock_dir.empty() ? opt_.cache_dir : opt_.lock_dir)};
  for (const std::string& a : DeviceLockArgs()) measure.push_back(a);
  auto note = [&](const std::string& text) {
    return std::vector<std::string>{opt_.python, opt_.helper, "baseline-note", "--out", dir_,
                                    "--note",    text};
  };
  DetachedOptions d;
  d.log_path = log;
  d.timeout_s = opt_.timeout_s;
  d.on_timeout = note("torch.compile: not measured (the background run passed its limit of " +
                      std::string(limit) + " s)");
  d.on_failure = note("torch.compile: the background measurement failed (see " + log + ")");
  d.keep_fd = lock;  // the measurement holds the lock too
  d.also_keep_fd = memory_fd;  // and the job's memory reservation
  // Lowest CPU priority: torch.compile's compile is CPU-heavy and runs outside the timing lock;
  // candidates whose time includes host work (a ModelNew's forward) must not pay for it: on an
  // H200, with it at normal priority the ModelNew timings of the candidates after it read 20-45 %
  // slower (honest_triton 48.5 us against 35.3 without a background run); at this priority they
  // came back (35.1 us).
  d.nice = 19;
  const bool started = StartDetached(measure, d).ok();
  close(lock);
  return started;
}

Result<GoldenCase> KernelBenchGolden::Load(uint64_t seed) const {
  HTAM_RETURN_IF_ERROR(init_);
  GoldenCase g;
  HTAM_RETURN_IF_ERROR(ReadGoldenFile(SeedFile(dir_, seed), &g));
  const DimBinding& dims = task_.seen_shapes.front();
  auto check = [&](const std::vector<TensorSpec>& specs, const std::vector<HostTensor>& got,
                   const char* what) -> Status {
    if (specs.size() != got.size())
      return Status::InvalidArgument(
          "the problem file gives " + std::to_string(got.size()) + " " + what +
          " where task.json "
          "lists " +
          std::to_string(specs.size()) + " (re-run kb_helper.py import)");
    for (size_t i = 0; i < specs.size(); ++i) {
      std::vector<int64_t> want = task_.Shape(specs[i], dims);
      if (specs[i].name != got[i].name || specs[i].dtype != got[i].dtype || want != got[i].shape)
        return Status::InvalidArgument(std::string("the problem file and task.json disagree on ") +
                                       what + " " + std::to_string(i) + ": '" + got[i].name + "' " +
                                       DtypeName(got[i].dtype) + " " + ShapeText(got[i].shape) +
                                       " vs '" + specs[i].name + "' " + DtypeName(specs[i].dtype) +
                                       " " + ShapeText(want) + " (re-run kb_helper.py import)");
    }
    return Status::OK();
  };
  HTAM_RETURN_IF_ERROR(check(task_.inputs, g.inputs, "inputs"));
  HTAM_RETURN_IF_ERROR(check(task_.outputs, g.outputs, "outputs"));
  return g;
}

bool KernelBenchGolden::HasCurrentBaseline() const {
  std::string text;
  if (!init_.ok() || !ReadWholeFile(dir_ + "/baseline.json", &text)) return false;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("precision", std::string()) == kBaselinePrecision;
}

Result<TorchBaseline> KernelBenchGolden::Baseline() const {
  HTAM_RETURN_IF_ERROR(init_);
  std::string text;
  if (!ReadWholeFile(dir_ + "/baseline.json", &text))
    return Status::NotFound("no PyTorch baseline in " + dir_);
  TorchBaseline b;
  try {
    auto j = nlohmann::json::parse(text);
    b.eager_us = j.value("eager_us", 0.0);
    b.eager_spread_us = j.value("eager_spread_us", 0.0);
    b.compile_us = j.value("compile_us", 0.0);
    b.compile_pending = j.value("compile_pending", false);
    b.note = j.value("compile_note", std::string());
    b.eager_note = j.value("eager_note", std::string());
  } catch (const std::exception& e) {
    return Status::Corruption(dir_ + "/baseline.json: " + e.what());
  }
  return b;
}

}  // namespace htam
