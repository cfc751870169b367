// Compiles CUDA C++ candidates into shared objects with nvcc, through a content-addressed cache.
//
// Why nvcc and not NVRTC for candidates: a candidate's htam_kernel is HOST code that launches its
// kernels with <<<>>> (sdk/include/htam/kernel_abi.h); NVRTC compiles device code only. nvcc
// -shared builds host launcher + device image in one step (docs/backends-cuda.md has the numbers).
// NVRTC is used for the backend's own kernels (nvrtc_module.h).
//
// The resource report (ptxas -v: registers, shared memory, spills per kernel) is parsed and kept
// with the artifact as profile data.
// Thread-safety: Compile() is safe for concurrent use (each compile has its own temp directory;
// cache entries are published with an atomic rename).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace htam::cuda {

struct CompilerOptions {
  std::string nvcc = "nvcc";            // path or name in PATH
  std::string sdk_include_dir;          // holds htam/kernel_abi.h
  std::string cache_dir;                // "" = no cache
  std::string work_dir = "/tmp";        // temp dirs of compiles in flight live here
  std::string flags = "-O3";            // extra nvcc flags, split on whitespace (operator's choice)
  double timeout_s = 120;               // default wall limit of one nvcc run
  size_t max_diagnostic_bytes = 16384;  // diagnostics kept verbatim up to this size
};

struct KernelResources {
  std::string name;       // mangled kernel name
  int registers = -1;     // per thread
  int shared_bytes = -1;  // static shared memory per block
  int spill_bytes = 0;    // spill stores + loads
  int stack_bytes = 0;    // stack frame
};

struct CompileOutput {
  bool ok = false;          // false: the candidate did not compile (diagnostics say why)
  std::string so_path;      // the shared object (inside the cache or work dir)
  std::string hash;         // cache key (hex SHA-256)
  std::string diagnostics;  // compiler messages, trimmed; warnings on success
  bool from_cache = false;
  double compile_ms = 0;
  std::vector<KernelResources> kernels;  // from ptxas -v

  // Aggregates over the kernels (-1 when none reported).
  int MaxRegisters() const;
  int MaxSharedBytes() const;
  int TotalSpillBytes() const;
};

// Parses `ptxas -v` lines into per-kernel resources (exposed for tests).
std::vector<KernelResources> ParsePtxasInfo(std::string_view log);
// Removes ptxas info lines and temp-dir prefixes; keeps at most max_bytes (head and tail).
std::string TrimDiagnostics(std::string_view log, std::string_view tmp_dir, size_t max_bytes);
// "sm_90a" -> "-gencode=arch=compute_90a,code=sm_90a"; InvalidArgument for anything not sm_NN[a|f].
Result<std::string> GencodeFlag(std::string_view arch);

// Vendor libraries (docs/backends-cuda.md, "Vendor libraries"). A candidate names the libraries it
// links in comment lines of its source, `// htam: link cublas cublasLt`; the known names are
// kVendorLibraries (cutlass is header-only: an include path). A host limits them per task with the
// word `--htam-libraries=NAME,NAME` in the compile options (`--htam-libraries=` allows none;
// several such words allow what all of them allow); the word is never passed to nvcc. Without it
// every known library is allowed. A library asked for but not allowed, unknown or not installed
// makes the compile fail (CompileOutput::ok false) with a message that says which and why.
inline constexpr const char* kVendorLibraries[] = {"cublas", "cublasLt", "cudnn",    "cufft",
                                                   "curand", "cusparse", "cusolver", "cutlass"};
struct LinkDirectives {
  std::vector<std::string> libraries;  // in order of appearance, no duplicates
  std::string error;                   // "" or why a directive is malformed / names no library
};
LinkDirectives ParseLinkDirectives(std::string_view source);

class NvccCompiler {
 public:
  // Checks that nvcc runs (its --version text becomes part of every cache key).
  static Result<NvccCompiler> Create(const CompilerOptions& options);

  // Compiles one source for `arch`. A compile error is ok() with output.ok == false; a Status
  // error means the toolchain itself failed (missing, timed out, killed, disk full).
  Result<CompileOutput> Compile(std::string_view source, std::string_view arch,
                                std::string_view extra_flags, std::string_view name,
                                double timeout_s) const;

  const std::string& version() const { return version_; }
  const CompilerOptions& options() const { return options_; }

 private:
  // Linker (or include) flags for the libraries `source` asks for, or the refusal text.
  Status LibraryFlags(std::string_view source, const std::vector<std::string>& allowed,
                      bool restricted, std::vector<std::string>* flags) const;

  CompilerOptions options_;
  std::string version_;
  std::string abi_header_hash_;
  std::string toolkit_root_;  // nvcc's ../ (canonical): where lib64/ and include/ are
};

}  // namespace htam::cuda
