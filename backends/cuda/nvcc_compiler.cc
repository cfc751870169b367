// nvcc driver: a staging folder per compile, ptxas report parsing, cache entries published whole.
#include "backends/cuda/nvcc_compiler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "base/file.h"
#include "base/hash.h"
#include "base/process.h"

namespace htam::cuda {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> SplitWords(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool WriteFile(const std::string& path, std::string_view data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return false;
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(f);
}

// meta file of a cache entry: "kernel <name> <regs> <smem> <spill> <stack>" lines, then
// "diagnostics" and the text.
std::string EncodeMeta(const CompileOutput& o) {
  std::ostringstream m;
  for (const auto& k : o.kernels) {
    m << "kernel " << k.name << ' ' << k.registers << ' ' << k.shared_bytes << ' ' << k.spill_bytes
      << ' ' << k.stack_bytes << '\n';
  }
  m << "diagnostics\n" << o.diagnostics;
  return m.str();
}

void DecodeMeta(const std::string& text, CompileOutput* o) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "diagnostics") {
      std::ostringstream rest;
      rest << in.rdbuf();
      o->diagnostics = rest.str();
      return;
    }
    std::istringstream l(line);
    std::string tag;
    KernelResources k;
    if (l >> tag >> k.name >> k.registers >> k.shared_bytes >> k.spill_bytes >> k.stack_bytes &&
        tag == "kernel") {
      o->kernels.push_back(k);
    }
  }
}

constexpr std::string_view kLibrariesFlag = "--htam-libraries=";

bool KnownLibrary(const std::string& name) {
  for (const char* l : kVendorLibraries)
    if (name == l) return true;
  return false;
}

std::string JoinNames(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

}  // namespace

LinkDirectives ParseLinkDirectives(std::string_view source) {
  static const std::regex kDirective(R"(^\s*//\s*htam:\s*(\w+)(.*)$)");
  LinkDirectives out;
  std::istringstream in{std::string(source)};
  std::string line;
  std::smatch m;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!std::regex_match(line, m, kDirective)) continue;
    std::string rest = m[2];
    if (m[1] != "link") {
      out.error = "line " + std::to_string(n) + ": unknown directive 'htam: " + std::string(m[1]) +
                  "' (known: 'htam: link LIB...')";
      return out;
    }
    std::replace(rest.begin(), rest.end(), ',', ' ');
    std::vector<std::string> names = SplitWords(rest);
    if (names.empty()) {
      out.error = "line " + std::to_string(n) + ": 'htam: link' names no library";
      return out;
    }
    for (const auto& name : names) {
      if (!KnownLibrary(name)) {
        std::string known;
        for (const char* l : kVendorLibraries) known += std::string(known.empty() ? "" : " ") + l;
        out.error =
            "line " + std::to_string(n) + ": unknown library '" + name + "' (known: " + known + ")";
        return out;
      }
      if (std::find(out.libraries.begin(), out.libraries.end(), name) == out.libraries.end())
        out.libraries.push_back(name);
    }
  }
  return out;
}

int CompileOutput::MaxRegisters() const {
  int r = -1;
  for (const auto& k : kernels) r = std::max(r, k.registers);
  return r;
}
int CompileOutput::MaxSharedBytes() const {
  int r = -1;
  for (const auto& k : kernels) r = std::max(r, k.shared_bytes);
  return r;
}
int CompileOutput::TotalSpillBytes() const {
  if (kernels.empty()) return -1;
  int r = 0;
  for (const auto& k : kernels) r += k.spill_bytes;
  return r;
}

std::vector<KernelResources> ParsePtxasInfo(std::string_view log) {
  // ptxas info    : Compiling entry function '_Z4reluPKfPfl' for 'sm_90a'
  // ptxas info    : Function properties for _Z4reluPKfPfl
  //     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 10 registers, used 0 barriers, 1024 bytes smem, 380 bytes cmem[0]
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kFrame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  std::vector<KernelResources> out;
  std::istringstream in{std::string(log)};
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, kEntry)) {
      KernelResources k;
      k.name = m[1];
      k.shared_bytes = 0;
      out.push_back(k);
      continue;
    }
    if (out.empty()) continue;
    KernelResources& k = out.back();
    if (std::regex_search(line, m, kFrame)) {
      k.stack_bytes = std::stoi(m[1]);
      k.spill_bytes = std::stoi(m[2]) + std::stoi(m[3]);
    }
    if (std::regex_search(line, m, kUsed)) k.registers = std::stoi(m[1]);
    if (line.find("Used ") != std::string::npos && std::regex_search(line, m, kSmem)) {
      k.shared_bytes = std::stoi(m[1]);
    }
  }
  return out;
}

std::string TrimDiagnostics(std::string_view log, std::string_view tmp_dir, size_t max_bytes) {
  std::string out;
  std::istringstream in{std::string(log)};
  std::string line;
  bool skip_frame_line = false;
  while (std::getline(in, line)) {
    if (line.rfind("ptxas info", 0) == 0) {
      skip_frame_line = line.find("Function properties") != std::string::npos;
      continue;
    }
    if (skip_frame_line && line.find("bytes stack frame") != std::string::npos) {
      skip_frame_line = false;
      continue;
    }
    skip_frame_line = false;
    if (!tmp_dir.empty()) {
      std::string prefix = std::string(tmp_dir) + "/";
      for (size_t p; (p = line.find(prefix)) != std::string::npos;) line.erase(p, prefix.size());
    }
    out += line;
    out += '\n';
  }
  if (out.size() > max_bytes && max_bytes > 64) {
    size_t head = max_bytes * 3 / 4, tail = max_bytes - head - 40;
    out = out.substr(0, head) + "\n[... " + std::to_string(out.size() - head - tail) +
          " bytes cut ...]\n" + out.substr(out.size() - tail);
  }
  return out;
}

Result<std::string> GencodeFlag(std::string_view arch) {
  static const std::regex kArch(R"(sm_(\d{2,3})([af]?))");
  std::string a(arch);
  std::smatch m;
  if (!std::regex_match(a, m, kArch)) {
    return Status::InvalidArgument("unsupported CUDA arch '" + a + "' (expected sm_NN, sm_NNa)");
  }
  return "-gencode=arch=compute_" + std::string(m[1]) + std::string(m[2]) + ",code=sm_" +
         std::string(m[1]) + std::string(m[2]);
}

// A bare name is searched in PATH, then where the toolkit was at build time and in
// /usr/local/cuda/bin (workers run with a scrubbed environment, often without CUDA in PATH).
std::string ResolveTool(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::vector<std::string> dirs;
  if (const char* path = getenv("PATH")) {
    std::stringstream ss(path);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) dirs.push_back(d);
  }
#ifdef HTAM_CUDA_BIN_DIR
  dirs.push_back(HTAM_CUDA_BIN_DIR);
#endif
  dirs.push_back("/usr/local/cuda/bin");
  for (const auto& d : dirs) {
    std::string p = d + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return name;
}

Result<NvccCompiler> NvccCompiler::Create(const CompilerOptions& options) {
  NvccCompiler c;
  c.options_ = options;
  c.options_.nvcc = ResolveTool(options.nvcc);
  // nvcc runs gcc and its own tools through PATH: make sure it holds nvcc's directory and the
  // system's (a worker's environment may be scrubbed). Done once, at plugin initialization.
  {
    const char* old = getenv("PATH");
    std::string path = old ? old : "";
    std::string dir = fs::path(c.options_.nvcc).parent_path().string();
    std::string want = path;
    for (const std::string& d :
         {dir, std::string("/usr/local/bin"), std::string("/usr/bin"), std::string("/bin")}) {
      if (d.empty()) continue;
      if ((":" + want + ":").find(":" + d + ":") == std::string::npos)
        want += (want.empty() ? "" : ":") + d;
    }
    if (want != path) setenv("PATH", want.c_str(), 1);
  }
  std::error_code ec;
  if (!c.options_.sdk_include_dir.empty())
    c.options_.sdk_include_dir = fs::absolute(c.options_.sdk_include_dir, ec).string();
  if (!c.options_.cache_dir.empty())
    c.options_.cache_dir = fs::absolute(c.options_.cache_dir, ec).string();
  std::string cwd = options.work_dir.empty() ? "/tmp" : options.work_dir;
  auto r = RunProcess({c.options_.nvcc, "--version"}, cwd, 30);
  if (!r.ok()) return r.status().WithContext("nvcc");
  if (r->exit_code != 0) {
    return Status::Unavailable("'" + c.options_.nvcc + " --version' failed: " + r->output);
  }
  // Last line: "Build cuda_13.0.r13.0/compiler.36424714_0"; keep the whole text for the key.
  c.version_ = r->output;
  while (!c.version_.empty() && c.version_.back() == '\n') c.version_.pop_back();
  std::string header;
  if (!ReadWholeFile(c.options_.sdk_include_dir + "/htam/kernel_abi.h", &header)) {
    return Status::FailedPrecondition("no htam/kernel_abi.h under '" + options.sdk_include_dir +
                                      "'");
  }
  c.abi_header_hash_ = Sha256Hex(header);
  std::error_code root_ec;
  fs::path root = fs::canonical(c.options_.nvcc, root_ec);
  if (!root_ec) c.toolkit_root_ = root.parent_path().parent_path().string();
  return c;
}

Status NvccCompiler::LibraryFlags(std::string_view source, const std::vector<std::string>& allowed,
                                  bool restricted, std::vector<std::string>* flags) const {
  LinkDirectives d = ParseLinkDirectives(source);
  if (!d.error.empty()) return Status::InvalidArgument("candidate.cu: " + d.error);
  for (const auto& lib : d.libraries) {
    if (restricted && std::find(allowed.begin(), allowed.end(), lib) == allowed.end())
      return Status::InvalidArgument(
          "candidate.cu: links " + lib + " ('// htam: link " + lib +
          "'), which this task does not allow (libraries allowed: " + JoinNames(allowed) + ")");
    std::vector<std::string> dirs;
    if (!toolkit_root_.empty()) {
      dirs.push_back(toolkit_root_ + (lib == "cutlass" ? "/include" : "/lib64"));
      if (lib != "cutlass") dirs.push_back(toolkit_root_ + "/targets/x86_64-linux/lib");
    }
    if (lib == "cutlass") {
      dirs.insert(dirs.end(), {"/usr/local/include", "/usr/include"});
    } else {
      dirs.insert(dirs.end(), {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib"});
    }
    std::string found;
    for (const auto& dir : dirs) {
      std::string probe =
          lib == "cutlass" ? dir + "/cutlass/cutlass.h" : dir + "/lib" + lib + ".so";
      if (access(probe.c_str(), R_OK) == 0) {
        found = dir;
        break;
      }
    }
    if (found.empty()) {
      std::string where;
      for (const auto& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
      return Status::NotFound("candidate.cu: links " + lib + ", which is not installed on this " +
                              "host (looked in " + where + ")");
    }
    if (lib == "cutlass") {
      flags->push_back("-I" + found);
    } else {
      // The runpath lets the worker's dlopen find the library without LD_LIBRARY_PATH.
      for (std::string f : {"-L" + found, "-l" + lib, std::string("-Xlinker"), "-rpath=" + found})
        flags->push_back(f);
    }
  }
  return Status::OK();
}

Result<CompileOutput> NvccCompiler::Compile(std::string_view source, std::string_view arch,
                                            std::string_view extra_flags, std::string_view name,
                                            double timeout_s) const {
  HTAM_ASSIGN_OR_RETURN(std::string gencode, GencodeFlag(arch));
  // The library policy words are the host's, not nvcc's: taken out of the flags.
  std::vector<std::string> flags, allowed;
  bool restricted = false;
  for (const std::string_view text : {std::string_view(options_.flags), extra_flags}) {
    for (auto& f : SplitWords(text)) {
      if (f.rfind(kLibrariesFlag, 0) != 0) {
        flags.push_back(f);
        continue;
      }
      std::string list = f.substr(kLibrariesFlag.size());
      std::replace(list.begin(), list.end(), ',', ' ');
      std::vector<std::string> these = SplitWords(list);
      if (restricted) {
        std::erase_if(allowed, [&](const std::string& l) {
          return std::find(these.begin(), these.end(), l) == these.end();
        });
      } else {
        allowed = these;
      }
      restricted = true;
    }
  }
  Status libs = LibraryFlags(source, allowed, restricted, &flags);
  std::string flag_text;
  for (const auto& f : flags) flag_text += f + ' ';

  CompileOutput out;
  std::string key_material;
  key_material.append(source);
  key_material += '\0' + std::string(arch) + '\0' + flag_text + '\0' + version_ + '\0' +
                  abi_header_hash_ + "\0nvcc-shared-v1";
  out.hash = Sha256Hex(key_material);
  if (!libs.ok()) {  // checked before the cache: a cached build never bypasses the task's policy
    out.ok = false;
    out.diagnostics = libs.message();
    return out;
  }

  // Cache hit?
  std::string entry;
  if (!options_.cache_dir.empty()) {
    entry = options_.cache_dir + "/cuda/" + out.hash;
    std::string meta;
    if (access((entry + "/candidate.so").c_str(), R_OK) == 0 &&
        ReadWholeFile(entry + "/meta", &meta)) {
      DecodeMeta(meta, &out);
      out.ok = true;
      out.from_cache = true;
      out.so_path = entry + "/candidate.so";
      return out;
    }
  }

  // A cache this process may not write (a runner's compiled-ahead cache, sealed by the daemon) is
  // read only: a miss compiles into work_dir and publishes nothing.
  if (!entry.empty()) {
    const std::string sub = options_.cache_dir + "/cuda";
    std::error_code mk;
    fs::create_directories(sub, mk);  // as publishing would; fails where the cache is not ours
    if (access(sub.c_str(), W_OK) != 0) entry.clear();
  }

  // Compiled in a folder published whole (base/file.h: PublishDir): the cache entry, else a folder
  // of its own under work_dir. Its staging folder sits beside it, so that publishing is a rename
  // within one mount (a sandboxed worker's cache is a bind mount of its own: a rename from
  // elsewhere fails with EXDEV).
  const std::string target = !entry.empty() ? entry
                                            : (options_.work_dir.empty() ? "/tmp"
                                                                         : options_.work_dir) +
                                                  "/nvcc-" + out.hash;
  std::error_code ec;
  fs::create_directories(fs::path(target).parent_path(), ec);
  bool built = true;  // false: nvcc ran and refused the source (diagnostics in out)
  Status published = PublishDir(
      target,
      [&](const std::string& dir) -> Status {
        if (!WriteFile(dir + "/candidate.cu", source))
          return Status::IOError("cannot write " + dir);
        std::vector<std::string> argv = {
            options_.nvcc, "-shared", "-Xcompiler", "-fPIC,-fvisibility=hidden",
            "-cudart",     "shared",  gencode,      "-I" + options_.sdk_include_dir,
            "-Xptxas",     "-v",      "-lineinfo"};
        for (const auto& f : flags) argv.push_back(f);
        argv.insert(argv.end(), {"-o", "candidate.so", "candidate.cu"});
        double limit = timeout_s > 0 ? timeout_s : options_.timeout_s;
        HTAM_ASSIGN_OR_RETURN(ProcessResult pr,
                              RunProcess(argv, dir, limit, 1 << 20, {"TMPDIR=" + dir}));
        out.compile_ms = pr.wall_ms;
        if (pr.timed_out) return Status::Timeout("nvcc exceeded " + std::to_string(limit) + " s");
        out.kernels = ParsePtxasInfo(pr.output);
        out.diagnostics = TrimDiagnostics(pr.output, dir, options_.max_diagnostic_bytes);
        if (pr.signaled) return Status::Internal("nvcc was killed by a signal: " + out.diagnostics);
        if (pr.exit_code != 0 || access((dir + "/candidate.so").c_str(), R_OK) != 0) {
          built = false;
          if (out.diagnostics.empty())
            out.diagnostics = "nvcc exited with code " + std::to_string(pr.exit_code);
          return Status::Internal("not built");  // nothing to publish
        }
        if (!WriteFile(dir + "/meta", EncodeMeta(out))) return Status::IOError("cannot write meta");
        fs::remove(dir + "/candidate.cu", ec);
        return Status::OK();
      },
      0700);
  if (!built) {
    out.ok = false;
    return out;
  }
  if (!published.ok()) return published;
  out.ok = true;
  out.so_path = target + "/candidate.so";
  return out;
}

}  // namespace htam::cuda
