// Compiles HIP candidates for AMD GPUs with hipcc into host shared objects that embed a code object
// for every requested target (--offload-arch, one per target), through a content-addressed cache.
// Runs on any machine: no GPU and no ROCm runtime are needed to compile.
//
// Targets the toolchain cannot generate (Debian's HIP 5.2 is LLVM 15: it knows gfx940 but not
// gfx942) are found once by a probe, reported, and left out of every compile instead of failing
// every candidate. Create() runs no process: the toolchain's version text (part of every cache
// key) and the probe are taken at the first compile and remembered in the cache directory, keyed
// by the hipcc file's identity, so that a worker that only describes itself starts at once.
// Thread-safety: Compile() is safe for concurrent use (a temp directory per compile, cache entries
// published by an atomic rename, the first-compile probe under a mutex); Create() is not.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace htam::hip {

struct HipccOptions {
  std::string hipcc = "hipcc";    // path or name in PATH
  std::string sdk_include_dir;    // holds htam/kernel_abi.h
  std::string cache_dir;          // "" = no cache
  std::string work_dir = "/tmp";  // temp dirs of compiles in flight
  std::string flags = "-O3";      // operator's extra flags (split on whitespace)
  std::vector<std::string> targets = {"gfx90a", "gfx942"};  // default --offload-arch list
  double timeout_s = 120;                                   // default wall limit of one hipcc run
  size_t max_diagnostic_bytes = 16384;  // diagnostics kept verbatim up to this size
};

struct HipCompileOutput {
  bool ok = false;                   // false: the candidate did not compile (diagnostics say why)
  std::string so_path;               // host shared object with the offload bundle
  std::string hash;                  // cache key (hex SHA-256)
  std::string diagnostics;           // compiler messages, trimmed; warnings on success
  std::vector<std::string> targets;  // targets found in the code object (checked after compile)
  bool from_cache = false;
  double compile_ms = 0;
};

// Splits "gfx90a gfx942" / "gfx90a,gfx942" into target names; InvalidArgument for a name that is
// not an AMDGPU processor (gfxNNN[N][a-z]? with optional :feature+/- suffixes).
Result<std::vector<std::string>> ParseTargets(std::string_view list);
// Removes the temp-dir prefix from paths, keeps at most max_bytes (head and tail).
std::string TrimHipDiagnostics(std::string_view log, std::string_view tmp_dir, size_t max_bytes);

class HipccCompiler {
 public:
  // Finds hipcc and the SDK header; loads a remembered probe if the cache holds one.
  static Result<HipccCompiler> Create(const HipccOptions& options);

  // Compiles for `targets` (empty: the supported default targets). A compile error is ok() with
  // output.ok == false; a Status error means the toolchain failed (missing, timed out, killed),
  // or every requested target is one the toolchain cannot build (Unavailable).
  Result<HipCompileOutput> Compile(std::string_view source, const std::vector<std::string>& targets,
                                   std::string_view extra_flags, std::string_view name,
                                   double timeout_s) const;

  // Runs `hipcc --version` and the target probe now unless they are known (idempotent).
  Status EnsureProbed() const;
  // False until the first compile or EnsureProbed() when the cache held no earlier probe; the
  // three accessors below are empty until then.
  bool probed() const;
  std::string version() const;
  std::vector<std::string> supported_targets() const;
  std::vector<std::string> unsupported_targets() const;

 private:
  struct Toolchain;  // version text and target classes, filled once (mutex inside)
  Status Probe(Toolchain* t) const;
  std::string MemoPath() const;
  // Compiles `source` in the folder `dir` into dir/candidate.so and checks its code objects; a
  // source hipcc refuses sets *built false (diagnostics in *out) and returns an error.
  Status BuildIn(const std::string& dir, std::string_view source,
                 const std::vector<std::string>& targets, const std::vector<std::string>& flags,
                 const std::string& note, double timeout_s, HipCompileOutput* out,
                 bool* built) const;
  HipccOptions options_;
  std::string hipcc_path_;      // resolved
  std::string hipcc_identity_;  // path, size and mtime of the hipcc file
  std::string abi_header_hash_;
  std::shared_ptr<Toolchain> tc_;
};

}  // namespace htam::hip
