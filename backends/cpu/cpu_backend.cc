// The CPU backend plugin (libhtam_backend_cpu.so): C++ candidates compiled by g++ into a shared
// object (cached by content hash of source + flags + compiler), loaded with dlopen, run and timed
// on the host. Implements backends/include/htam/backend.h; exports only its symbols (plugin.map).
// Its C entry points are emitted by HTAM_BACKEND_PLUGIN (backends/common/plugin_base.h) over the
// objects below; this file holds the device logic.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/common/data_ops_host.h"
#include "backends/common/plugin_base.h"
#include "backends/common/plugin_error.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/process.h"
#include "htam/backend.h"

using htam::plugin::Error;
using htam::plugin::MakeError;

struct htam_backend : htam::plugin::Backend {
  explicit htam_backend(const htam::plugin::HostSettings& host);
  std::string cxx = "g++";
  std::string cxxflags = "-O3 -march=native -std=c++17";
  size_t max_diag_bytes = 16384;
  std::string compiler_version;
  std::string device_name, device_arch;
  bool device_open = false;
  const std::string& language() const { return description_.language; }
  const htam_device_info& device() const { return description_.devices[0]; }

  Error Compile(const htam_compile_request& req, std::string_view source, htam_artifact** out);
  Error OpenDevice(int32_t index, htam_device** out);
};

struct htam_artifact {
  std::string path, hash, diagnostics;
  bool from_cache = false;
  double compile_ms = 0;

  Error Info(htam_artifact_info* i) const;
};

struct htam_device {
  htam_backend* backend;
  std::vector<uint8_t> flush;  // scratch touched before every timed repetition

  explicit htam_device(htam_backend* b) : backend(b) { backend->device_open = true; }
  ~htam_device() { backend->device_open = false; }
  htam_stream Stream() { return nullptr; }
  Error Load(const htam_artifact& a, htam_module** out);
  Error Alloc(uint64_t bytes, htam_buffer** out);
  Error Import(const htam_buffer_handle& h, htam_buffer** out);
  Error Compare(const htam_compare_request& req, htam_compare_result* out);
};

struct htam_module {
  htam_device* device;
  void* handle;
  htam_kernel_fn fn;

  ~htam_module() { dlclose(handle); }
  Error Run(const htam_tensor* in, int32_t nin, htam_tensor* out, int32_t nout, int32_t* kernel_rc);
  Error Time(const htam_timing_request& req, htam_timing_result* res);
};

// Host memory in a memfd (MAP_SHARED), so that a runner process can map the same pages
// (buffer_export / buffer_import); `imported` buffers unmap only.
struct htam_buffer {
  void* data;
  uint64_t bytes;
  int fd = -1;
  uint64_t mapped = 0;  // mapping length (>= 1 page)

  ~htam_buffer() {
    munmap(data, mapped);
    if (fd >= 0) close(fd);
  }
  void* Address() { return data; }
  uint8_t* At(uint64_t offset) { return static_cast<uint8_t*>(data) + offset; }
  Error CopyToDevice(uint64_t offset, const void* src, uint64_t bytes) {
    std::memcpy(At(offset), src, bytes);
    return nullptr;
  }
  Error CopyToHost(void* dst, uint64_t offset, uint64_t bytes) {
    std::memcpy(dst, At(offset), bytes);
    return nullptr;
  }
  Error Memset(uint64_t offset, uint8_t value, uint64_t bytes) {
    std::memset(At(offset), value, bytes);
    return nullptr;
  }
  Error Fill(uint64_t offset, const htam_fill_request& req) {
    htam::data::Fill(At(offset), req);
    return nullptr;
  }
  Error CopyFrom(uint64_t offset, htam_buffer& src, uint64_t src_offset, uint64_t bytes) {
    std::memmove(At(offset), src.At(src_offset), bytes);
    return nullptr;
  }
  Error Export(htam_buffer_handle* out);
};

namespace {

void Log(htam_backend* b, int32_t level, const std::string& m) {
  b->Log(level, "cpu: " + m);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// The shell's view of how it ended: the exit code, or 128 + the signal that killed it.
int ExitStatus(const htam::ProcessResult& r) {
  return r.signaled ? 128 + r.signal : r.exit_code;
}

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(line.find_first_not_of(" \t", p + 1));
    }
  }
  return "unknown CPU";
}

int CpuMhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return std::atoi(line.c_str() + p + 1);
    }
  }
  return -1;
}

int CallKernel(htam_kernel_fn fn, const htam_tensor* in, int nin, htam_tensor* out, int nout,
               bool* threw) {
  *threw = false;
  try {
    return fn(in, nin, out, nout, nullptr);
  } catch (...) {
    *threw = true;
    return -1;
  }
}

htam_backend_error* KernelError(int rc, bool threw) {
  if (threw) return MakeError(HTAM_ERR_KERNEL_FAILED, "htam_kernel threw a C++ exception");
  return MakeError(HTAM_ERR_KERNEL_FAILED, "htam_kernel returned " + std::to_string(rc));
}

}  // namespace

// Options: cxx (a non-empty value), cxxflags, max_diag_bytes; the compiler is probed here, the
// device is the host CPU.
htam_backend::htam_backend(const htam::plugin::HostSettings& host) : Backend("cpu", host) {
  if (!host.Option("cxx", "").empty()) cxx = host.Option("cxx", "");
  if (host.Has("cxxflags")) cxxflags = host.Option("cxxflags", "");
  if (host.Has("max_diag_bytes"))
    max_diag_bytes = std::strtoul(host.Option("max_diag_bytes", "").c_str(), nullptr, 10);
  htam::ProcessOptions probe;
  probe.timeout_s = 10;
  probe.max_output = 4096;
  auto version = htam::RunProcess({cxx, "--version"}, probe);
  const std::string out_text = version.ok() ? version->output : version.status().message();
  compiler_version =
      version.ok() && ExitStatus(*version) == 0 ? out_text.substr(0, out_text.find('\n')) : "";
  description_.language = "cpp";
  description_.source_suffix = ".cpp";
  description_.version =
      "htam cpu backend; " + (compiler_version.empty() ? cxx + " (not found)" : compiler_version);
  if (compiler_version.empty())
    description_.notes = "compiler '" + cxx + "' cannot run here: " + out_text;
  description_.can_run = !compiler_version.empty();
  device_name = CpuModel();
  utsname u{};
  uname(&u);
  device_arch = u.machine;
  htam_device_info d{};
  d.index = 0;
  d.name = device_name.c_str();
  d.arch = device_arch.c_str();
  d.memory_bytes = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  d.sm_clock_mhz = CpuMhz();
  d.mem_clock_mhz = -1;
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  d.cache_bytes = llc > 0 ? uint64_t(llc) : 0;
  description_.devices = {d};
}

Error htam_backend::Compile(const htam_compile_request& req, std::string_view source_text,
                            htam_artifact** out) {
  if (compiler_version.empty()) return MakeError(HTAM_ERR_UNAVAILABLE, description().notes);
  std::string source(source_text);
  std::string extra = req.options ? req.options : "";
  htam::Sha256 h;
  for (const std::string& part :
       {language(), compiler_version, cxxflags, extra, host().sdk_include_dir, source}) {
    h.Update(part);
    h.Update(std::string_view("\0", 1));
  }
  auto art = std::make_unique<htam_artifact>();
  art->hash = h.HexDigest();
  std::string dir = host().cache_dir.empty() ? host().work_dir : host().cache_dir;
  art->path = dir + "/cpu-" + art->hash + ".so";
  if (!host().cache_dir.empty() && Exists(art->path)) {
    art->from_cache = true;
    *out = art.release();
    return nullptr;
  }
  // A cache this process may not write (a runner's compiled-ahead cache, sealed by the daemon) is
  // read only: a miss compiles into the work dir.
  if (!host().cache_dir.empty() && access(host().cache_dir.c_str(), W_OK) != 0) {
    dir = host().work_dir;
    art->path = dir + "/cpu-" + art->hash + ".so";
  }
  std::string label = req.name && *req.name ? req.name : "candidate";
  for (char& c : label)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  // Compiled from the work dir under a short name, so diagnostics read "candidate.cpp:12:3".
  std::string src_name = label + ".cpp";
  std::string src = host().work_dir + "/" + src_name;
  {
    std::ofstream f(src, std::ios::binary);
    f << source;
    if (!f) return MakeError(HTAM_ERR_INTERNAL, "cannot write " + src);
  }
  std::vector<std::string> argv{cxx};
  for (auto& f : Split(cxxflags)) argv.push_back(f);
  for (auto& f : Split(extra)) argv.push_back(f);
  argv.insert(argv.end(), {"-shared", "-fPIC", "-fvisibility=hidden", "-I" + host().sdk_include_dir,
                           "-o", "", src_name});
  const size_t output_at = argv.size() - 2;
  std::string diag;
  Error failed = nullptr;  // the compile's own error, when it has one
  auto t0 = std::chrono::steady_clock::now();
  // Compiled into a temporary beside the entry and renamed onto it (base/file.h): a reader sees
  // the whole library or none.
  htam::Status published = htam::PublishFile(art->path, [&](const std::string& tmp) {
    argv[output_at] = tmp;
    htam::ProcessOptions run;
    run.cwd = host().work_dir;
    run.timeout_s = req.timeout_s > 0 ? req.timeout_s : 60;
    run.max_output = max_diag_bytes;
    auto compiled = htam::RunProcess(argv, run);
    art->compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!compiled.ok()) {  // the compiler did not start
      failed = MakeError(HTAM_ERR_UNAVAILABLE, compiled.status().message());
    } else if (diag = compiled->output; compiled->timed_out) {
      failed = MakeError(HTAM_ERR_TIMEOUT,
                         "compiler timed out after " + std::to_string(req.timeout_s) + " s\n" + diag);
    } else if (const int rc = ExitStatus(*compiled); rc != 0) {
      failed = MakeError(HTAM_ERR_COMPILE,
                         diag.empty() ? "compiler exited with " + std::to_string(rc) : diag);
    }
    return failed ? htam::Status::Internal("not compiled") : htam::Status::OK();
  });
  if (failed) return failed;
  // A failed rename: another evaluation sharing the cache published the same artifact (same
  // content key) first, and its evaluator sealed it: that one serves.
  if (!published.ok() && access(art->path.c_str(), R_OK) != 0)
    return MakeError(HTAM_ERR_INTERNAL, "cannot move artifact into " + dir + ": " +
                                            published.message());
  art->diagnostics = diag;
  ::Log(this, HTAM_LOG_DEBUG,
        "compiled " + label + " in " + std::to_string(art->compile_ms) + " ms");
  *out = art.release();
  return nullptr;
}

Error htam_artifact::Info(htam_artifact_info* i) const {
  i->path = path.c_str();
  i->content_hash = hash.c_str();
  i->diagnostics = diagnostics.c_str();
  i->from_cache = from_cache ? 1 : 0;
  i->compile_ms = compile_ms;
  return nullptr;
}

Error htam_backend::OpenDevice(int32_t index, htam_device** out) {
  if (index != 0) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "cpu backend has only device 0");
  if (device_open) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "device 0 already open");
  *out = new htam_device(this);
  return nullptr;
}

Error htam_device::Load(const htam_artifact& a, htam_module** out) {
  dlerror();
  void* h = dlopen(a.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    std::string msg = e ? e : "dlopen failed";
    return MakeError(HTAM_ERR_LOAD, "cannot load " + a.path + ": " + msg);
  }
  void* fn = dlsym(h, "htam_kernel");
  if (!fn) {
    dlclose(h);
    return MakeError(HTAM_ERR_LOAD,
                     "candidate does not define the entry point htam_kernel (declare it with "
                     "HTAM_KERNEL_ENTRY from <htam/kernel_abi.h>)");
  }
  *out = new htam_module{this, h, reinterpret_cast<htam_kernel_fn>(fn)};
  return nullptr;
}

Error htam_device::Alloc(uint64_t bytes, htam_buffer** out) {
  const uint64_t len = bytes ? bytes : 1;
  int fd = memfd_create("htam-buffer", MFD_CLOEXEC);
  if (fd < 0)
    return MakeError(HTAM_ERR_OUT_OF_MEMORY, "memfd_create: " + std::string(strerror(errno)));
  if (ftruncate(fd, off_t(len)) != 0) {
    int e = errno;
    close(fd);
    return MakeError(HTAM_ERR_OUT_OF_MEMORY,
                     "cannot allocate " + std::to_string(bytes) + " bytes: " + strerror(e));
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return MakeError(HTAM_ERR_OUT_OF_MEMORY, "cannot map " + std::to_string(bytes) + " bytes");
  }
  *out = new htam_buffer{p, bytes, fd, len};
  return nullptr;
}

Error htam_buffer::Export(htam_buffer_handle* out) {
  if (fd < 0) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "an imported buffer is not exported");
  out->bytes = bytes;
  out->fd = fd;
  out->data_len = 0;
  return nullptr;
}

// The entry point closes h.fd afterwards; the mapping keeps the pages.
Error htam_device::Import(const htam_buffer_handle& h, htam_buffer** out) {
  if (h.fd < 0) return MakeError(HTAM_ERR_INVALID_ARGUMENT, "bad import arguments");
  const uint64_t len = h.bytes ? h.bytes : 1;
  struct stat st {};
  if (fstat(h.fd, &st) != 0 || uint64_t(st.st_size) < len)
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "imported buffer is smaller than announced");
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, h.fd, 0);
  if (p == MAP_FAILED) return MakeError(HTAM_ERR_OUT_OF_MEMORY, "cannot map an imported buffer");
  *out = new htam_buffer{p, h.bytes, -1, len};
  return nullptr;
}

Error htam_device::Compare(const htam_compare_request& req, htam_compare_result* out) {
  htam::data::Compare(req.a->At(req.a_offset), req.b->At(req.b_offset), req, out);
  return nullptr;
}

Error htam_module::Run(const htam_tensor* in, int32_t nin, htam_tensor* out, int32_t nout,
                       int32_t* kernel_rc) {
  bool threw = false;
  int rc = CallKernel(fn, in, nin, out, nout, &threw);
  if (kernel_rc) *kernel_rc = rc;
  if (rc != 0 || threw) return KernelError(rc, threw);
  return nullptr;
}

Error htam_module::Time(const htam_timing_request& req, htam_timing_result* res) {
  if (!res->rep_us || req.num_sets < 1 || req.repetitions < 1)
    return MakeError(HTAM_ERR_INVALID_ARGUMENT, "bad timing request");
  htam_device* d = device;
  uint64_t flush = req.flush_bytes ? req.flush_bytes : 2 * d->backend->device().cache_bytes;
  if (d->flush.size() < flush) d->flush.assign(flush, 0);
  using clk = std::chrono::steady_clock;
  auto call = [&](int set, bool* threw) {
    return CallKernel(fn, req.inputs + size_t(set) * req.num_inputs, req.num_inputs,
                      req.outputs + size_t(set) * req.num_outputs, req.num_outputs, threw);
  };
  bool threw = false;
  int rc = 0;
  int warm = 0;
  auto w0 = clk::now();
  while (warm < req.warmup_reps ||
         std::chrono::duration<double, std::milli>(clk::now() - w0).count() < req.warmup_ms) {
    rc = call(warm % req.num_sets, &threw);
    if (rc != 0 || threw) return KernelError(rc, threw);
    ++warm;
    if (warm > 100000) break;
  }
  res->warmup_done = warm;
  for (int r = 0; r < req.repetitions; ++r) {
    int set = r % req.num_sets;
    if (req.poison) {
      for (int o = 0; o < req.num_outputs; ++o) {
        const htam_tensor& t = req.outputs[size_t(set) * req.num_outputs + o];
        std::memset(t.data, req.poison_byte, size_t(htam_numel(&t)) * htam_dtype_size(t.dtype));
      }
    }
    if (!d->flush.empty()) {  // evict caches outside the window
      std::memset(d->flush.data(), r & 0xff, flush);
      asm volatile("" : : "r"(d->flush.data()) : "memory");
    }
    auto t0 = clk::now();
    rc = call(set, &threw);
    auto t1 = clk::now();
    if (rc != 0 || threw) return KernelError(rc, threw);
    res->rep_us[r] = std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  res->all_streams = 1;  // synchronous host call; threads left running are rejected by the gate
  res->sm_clock_mhz = CpuMhz();
  res->mem_clock_mhz = -1;
  return nullptr;
}

HTAM_BACKEND_PLUGIN(htam_backend, "cpu", SHARING, DEVICE_DATA)
