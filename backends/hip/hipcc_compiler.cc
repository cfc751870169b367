// hipcc driver: target probe, temp dir per compile, code-object check, cache publication by rename.
#include "backends/hip/hipcc_compiler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "backends/hip/code_object.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/process.h"

namespace htam::hip {
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

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Cache entry meta: "targets a b" line, then "diagnostics" and the text.
std::string EncodeMeta(const HipCompileOutput& o) {
  return "targets " + Join(o.targets) + "\ndiagnostics\n" + o.diagnostics;
}

void DecodeMeta(const std::string& text, HipCompileOutput* o) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("targets", 0) == 0) o->targets = SplitWords(line.substr(7));
    if (line == "diagnostics") {
      std::ostringstream rest;
      rest << in.rdbuf();
      o->diagnostics = rest.str();
      return;
    }
  }
}

std::string Processor(const std::string& target) {
  return target.substr(0, target.find(':'));
}

}  // namespace

Result<std::vector<std::string>> ParseTargets(std::string_view list) {
  static const std::regex kTarget(R"(gfx[0-9][0-9a-f]{2,3}(:[a-z_]+[+-])*)");
  std::string s(list);
  std::replace(s.begin(), s.end(), ',', ' ');
  std::vector<std::string> out;
  for (auto& t : SplitWords(s)) {
    if (!std::regex_match(t, kTarget)) {
      return Status::InvalidArgument(
          "'" + t + "' is not an AMDGPU target (expected gfxNNN, e.g. gfx90a, gfx942)");
    }
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

std::string TrimHipDiagnostics(std::string_view log, std::string_view tmp_dir, size_t max_bytes) {
  std::string out;
  std::istringstream in{std::string(log)};
  std::string line;
  const std::string prefix = tmp_dir.empty() ? "" : std::string(tmp_dir) + "/";
  while (std::getline(in, line)) {
    if (!prefix.empty()) {
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

struct HipccCompiler::Toolchain {
  std::mutex mu;
  bool ready = false;
  std::string version;
  std::vector<std::string> supported, unsupported;
};

Result<HipccCompiler> HipccCompiler::Create(const HipccOptions& options) {
  HipccCompiler c;
  c.options_ = options;
  std::error_code ec;
  if (!c.options_.sdk_include_dir.empty())
    c.options_.sdk_include_dir = fs::absolute(c.options_.sdk_include_dir, ec).string();
  if (!c.options_.cache_dir.empty())
    c.options_.cache_dir = fs::absolute(c.options_.cache_dir, ec).string();
  if (c.options_.work_dir.empty()) c.options_.work_dir = "/tmp";
  if (c.options_.targets.empty()) return Status::InvalidArgument("no AMDGPU target configured");
  // Resolve hipcc as posix_spawnp would; its identity keys the remembered probe.
  std::string path = options.hipcc;
  if (path.find('/') == std::string::npos) {
    const char* env = getenv("PATH");
    std::istringstream dirs(env ? env : "/usr/bin:/bin");
    std::string d;
    path.clear();
    while (std::getline(dirs, d, ':')) {
      std::string cand = (d.empty() ? "." : d) + "/" + options.hipcc;
      if (access(cand.c_str(), X_OK) == 0) {
        path = cand;
        break;
      }
    }
  }
  if (path.empty() || access(path.c_str(), X_OK) != 0) {
    return Status::Unavailable("hipcc '" + options.hipcc + "' not found");
  }
  c.hipcc_path_ = path;
  struct stat st {};
  std::string real = fs::canonical(path, ec).string();
  if (stat(real.c_str(), &st) == 0) {
    c.hipcc_identity_ = real + ' ' + std::to_string(st.st_size) + ' ' + std::to_string(st.st_mtime);
  }
  std::string header;
  if (!ReadWholeFile(c.options_.sdk_include_dir + "/htam/kernel_abi.h", &header)) {
    return Status::FailedPrecondition("no htam/kernel_abi.h under '" + options.sdk_include_dir +
                                      "'");
  }
  c.abi_header_hash_ = Sha256Hex(header);
  c.tc_ = std::make_shared<Toolchain>();
  // A probe remembered by an earlier process with the same hipcc and targets.
  std::string memo = c.MemoPath(), text;
  if (!memo.empty() && ReadWholeFile(memo, &text)) {
    size_t v = text.find("\nversion\n");
    std::istringstream in(text.substr(0, v));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("supported:", 0) == 0) c.tc_->supported = SplitWords(line.substr(10));
      if (line.rfind("unsupported:", 0) == 0) c.tc_->unsupported = SplitWords(line.substr(12));
    }
    if (v != std::string::npos && (!c.tc_->supported.empty() || !c.tc_->unsupported.empty())) {
      c.tc_->version = text.substr(v + 9);
      c.tc_->ready = true;
    }
  }
  return c;
}

std::string HipccCompiler::MemoPath() const {
  if (options_.cache_dir.empty() || hipcc_identity_.empty()) return "";
  return options_.cache_dir + "/hip/toolchain-" +
         Sha256Hex(hipcc_identity_ + '\0' + Join(options_.targets)).substr(0, 24);
}

bool HipccCompiler::probed() const {
  std::lock_guard<std::mutex> l(tc_->mu);
  return tc_->ready;
}
std::string HipccCompiler::version() const {
  std::lock_guard<std::mutex> l(tc_->mu);
  return tc_->version;
}
std::vector<std::string> HipccCompiler::supported_targets() const {
  std::lock_guard<std::mutex> l(tc_->mu);
  return tc_->supported;
}
std::vector<std::string> HipccCompiler::unsupported_targets() const {
  std::lock_guard<std::mutex> l(tc_->mu);
  return tc_->unsupported;
}

Status HipccCompiler::EnsureProbed() const {
  std::lock_guard<std::mutex> l(tc_->mu);
  if (tc_->ready) return Status::OK();
  HTAM_RETURN_IF_ERROR(Probe(tc_.get()));
  tc_->ready = true;
  std::string memo = MemoPath();
  if (!memo.empty()) {
    std::error_code ec;
    fs::create_directories(options_.cache_dir + "/hip", ec);
    // A memo that cannot be written is asked again by the next process.
    (void)WriteFileAtomic(memo, "supported: " + Join(tc_->supported) + "\nunsupported: " +
                                    Join(tc_->unsupported) + "\nversion\n" + tc_->version);
  }
  return Status::OK();
}

// The version text (part of every cache key), then which configured targets the compiler can
// build: asked on the device side only, on an empty input; clang names the first target it does
// not know ("invalid target ID 'gfx942'"), which is set aside and the rest asked again.
Status HipccCompiler::Probe(Toolchain* t) const {
  // With a target named, hipcc does not run rocm_agent_enumerator (which fails without a GPU).
  // Temporary files of the tool chain stay in the worker's own directory (the sandbox may leave
  // /tmp read-only).
  const std::vector<std::string> env{"TMPDIR=" + options_.work_dir};
  auto r = RunProcess({hipcc_path_, "--offload-arch=" + options_.targets[0], "--version"},
                      options_.work_dir, 60, 64 << 10, env);
  if (!r.ok()) return r.status().WithContext("hipcc");
  if (r->timed_out || r->exit_code != 0) {
    return Status::Unavailable("'" + options_.hipcc + " --version' failed: " + r->output);
  }
  t->version = r->output;
  while (!t->version.empty() && t->version.back() == '\n') t->version.pop_back();
  std::vector<std::string> left = options_.targets;
  static const std::regex kInvalid(R"(invalid target ID '([^']+)')");
  t->unsupported.clear();
  while (!left.empty()) {
    std::vector<std::string> argv{hipcc_path_};
    for (const auto& x : left) argv.push_back("--offload-arch=" + x);
    argv.insert(argv.end(), {"--cuda-device-only", "-fsyntax-only", "-x", "hip", "/dev/null"});
    HTAM_ASSIGN_OR_RETURN(ProcessResult p, RunProcess(argv, options_.work_dir, 120, 64 << 10, env));
    if (p.timed_out) return Status::Timeout("hipcc target probe timed out");
    std::smatch m;
    if (p.exit_code != 0 && std::regex_search(p.output, m, kInvalid)) {
      std::string bad = m[1];
      auto it = std::find_if(left.begin(), left.end(), [&](const std::string& x) {
        return x == bad || Processor(x) == Processor(bad);
      });
      if (it == left.end()) break;
      t->unsupported.push_back(*it);
      left.erase(it);
      continue;
    }
    break;  // success, or a failure that is not about targets: compiles will report it
  }
  t->supported = left;
  return Status::OK();
}

Result<HipCompileOutput> HipccCompiler::Compile(std::string_view source,
                                                const std::vector<std::string>& requested,
                                                std::string_view extra_flags, std::string_view name,
                                                double timeout_s) const {
  HTAM_RETURN_IF_ERROR(EnsureProbed());
  const std::string version = this->version();
  const std::vector<std::string> unsupported = unsupported_targets();
  std::vector<std::string> targets, dropped;
  for (const auto& t : requested.empty() ? options_.targets : requested) {
    bool bad = std::any_of(unsupported.begin(), unsupported.end(),
                           [&](const std::string& u) { return Processor(u) == Processor(t); });
    (bad ? dropped : targets).push_back(t);
  }
  if (targets.empty()) {
    return Status::Unavailable("the HIP toolchain (" + version.substr(0, version.find('\n')) +
                               ") cannot generate code for " + Join(dropped));
  }
  std::vector<std::string> flags = SplitWords(options_.flags);
  for (auto& f : SplitWords(extra_flags)) flags.push_back(f);

  HipCompileOutput out;
  std::string key = std::string(source);
  key += '\0' + Join(targets) + '\0' + Join(flags) + '\0' + version + '\0' + abi_header_hash_ +
         "\0hipcc-shared-v1";
  out.hash = Sha256Hex(key);
  std::string note;
  if (!dropped.empty()) {
    note = "htam: note: no code for " + Join(dropped) + ": this HIP toolchain cannot target it\n";
  }

  std::string entry;
  if (!options_.cache_dir.empty()) {
    entry = options_.cache_dir + "/hip/" + out.hash;
    std::string meta;
    if (access((entry + "/candidate.so").c_str(), R_OK) == 0 && ReadWholeFile(entry + "/meta", &meta)) {
      DecodeMeta(meta, &out);
      out.ok = true;
      out.from_cache = true;
      out.so_path = entry + "/candidate.so";
      return out;
    }
  }

  // A cache this process may not write (a runner's compiled-ahead cache, sealed by the daemon) is
  // read only: a miss compiles into work_dir.
  if (!entry.empty()) {
    std::error_code mk;
    fs::create_directories(options_.cache_dir + "/hip", mk);
    if (access((options_.cache_dir + "/hip").c_str(), W_OK) != 0) entry.clear();
  }
  // Compiled in a folder published whole (base/file.h: PublishDir): the cache entry, else a folder
  // of its own under work_dir. Its staging folder sits beside it: publishing is a rename within one
  // mount.
  const std::string target =
      !entry.empty() ? entry : options_.work_dir + "/hipcc-" + out.hash;
  std::error_code ec;
  fs::create_directories(fs::path(target).parent_path(), ec);
  bool built = true;  // false: hipcc ran and refused the source (diagnostics in out)
  Status published = PublishDir(
      target,
      [&](const std::string& dir) -> Status {
        HTAM_RETURN_IF_ERROR(BuildIn(dir, source, targets, flags, note, timeout_s, &out, &built));
        if (!WriteFile(dir + "/meta", EncodeMeta(out))) return Status::IOError("cannot write meta");
        fs::remove(dir + "/candidate.hip", ec);
        return Status::OK();
      },
      0700);
  if (!built) return out;
  if (!published.ok()) return published;
  out.ok = true;
  out.so_path = target + "/candidate.so";
  return out;
}

Status HipccCompiler::BuildIn(const std::string& dir, std::string_view source,
                              const std::vector<std::string>& targets,
                              const std::vector<std::string>& flags, const std::string& note,
                              double timeout_s, HipCompileOutput* o, bool* built) const {
  HipCompileOutput& out = *o;
  if (!WriteFile(dir + "/candidate.hip", source)) return Status::IOError("cannot write " + dir);
  std::vector<std::string> argv{hipcc_path_};
  for (const auto& t : targets) argv.push_back("--offload-arch=" + t);
  argv.insert(argv.end(),
              {"-fPIC", "-shared", "-fvisibility=hidden", "-I" + options_.sdk_include_dir});
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", "candidate.so", "candidate.hip"});
  double limit = timeout_s > 0 ? timeout_s : options_.timeout_s;
  HTAM_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(argv, dir, limit, 1 << 20, {"TMPDIR=" + dir}));
  out.compile_ms = r.wall_ms;
  if (r.timed_out) return Status::Timeout("hipcc exceeded " + std::to_string(limit) + " s");
  out.diagnostics = note + TrimHipDiagnostics(r.output, dir, options_.max_diagnostic_bytes);
  if (r.signaled) return Status::Internal("hipcc was killed by a signal: " + out.diagnostics);
  if (r.exit_code != 0 || access((dir + "/candidate.so").c_str(), R_OK) != 0) {
    if (r.exit_code == 0)
      out.diagnostics += "hipcc produced no shared object\n";
    else if (r.output.empty())
      out.diagnostics += "hipcc exited with code " + std::to_string(r.exit_code);
    *built = false;
    return Status::Internal("not built");  // nothing to publish
  }
  // The code object must hold every target asked for: a missing one would fail only at load time
  // on that GPU ("no binary for GPU"), far from the compile that caused it.
  auto found = CodeObjectTargets(dir + "/candidate.so");
  if (!found.ok()) return found.status().WithContext("reading the candidate's code object");
  out.targets = *found;
  for (const auto& t : targets) {
    if (std::find(out.targets.begin(), out.targets.end(), Processor(t)) == out.targets.end()) {
      return Status::Internal("hipcc built no code object for " + t +
                              " (found: " + Join(out.targets) + ")");
    }
  }
  out.ok = true;
  return Status::OK();
}

}  // namespace htam::hip
