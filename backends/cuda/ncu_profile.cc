// Nsight Compute profile: CSV parsing and bottleneck classes; see ncu_profile.h.
#include "backends/cuda/ncu_profile.h"

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <map>
#include <sstream>
#include <type_traits>

#include "backends/common/plugin_error.h"
#include "base/process.h"

namespace htam::cuda {
namespace {

constexpr const char* kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kSm = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kWarps = "sm__warps_active.avg.pct_of_peak_sustained_active";
constexpr const char* kTime = "gpu__time_duration.sum";

// One CSV line: fields split on commas outside double quotes; "" inside quotes is a quote.
std::vector<std::string> SplitCsv(std::string_view line) {
  std::vector<std::string> out;
  std::string f;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        f += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        f += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(f));
      f.clear();
    } else if (c != '\r') {
      f += c;
    }
  }
  out.push_back(std::move(f));
  return out;
}

bool ParseNumber(std::string s, double* v) {
  std::string t;
  for (char c : s)
    if (c != ',' && c != ' ') t += c;
  if (t.empty() || t == "n/a") return false;
  char* end = nullptr;
  *v = std::strtod(t.c_str(), &end);
  return end && *end == 0;
}

double ToMicroseconds(double v, const std::string& unit) {
  if (unit == "nsecond" || unit == "ns") return v / 1000;
  if (unit == "msecond" || unit == "ms") return v * 1000;
  if (unit == "second" || unit == "s") return v * 1e6;
  return v;  // usecond
}

}  // namespace

const char* const kNcuMetrics[4] = {kDram, kSm, kWarps, kTime};
const char* const kNcuChildOptions[2] = {"cuda_roofline=false", "cuda_timing_mode=sync"};

Result<NcuMetrics> ParseNcuCsv(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  int c_id = -1, c_kernel = -1, c_name = -1, c_unit = -1, c_value = -1;
  struct Kernel {
    std::string name;
    std::map<std::string, double> values;
  };
  std::map<std::string, Kernel> kernels;  // by ID
  std::vector<std::string> order;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '"') continue;  // ==PROF== lines, the program's output
    std::vector<std::string> f = SplitCsv(line);
    if (c_id < 0) {
      for (int i = 0; i < int(f.size()); ++i) {
        if (f[i] == "ID") c_id = i;
        if (f[i] == "Kernel Name") c_kernel = i;
        if (f[i] == "Metric Name") c_name = i;
        if (f[i] == "Metric Unit") c_unit = i;
        if (f[i] == "Metric Value") c_value = i;
      }
      if (c_id < 0 || c_name < 0 || c_value < 0) c_id = -1;  // not the header: keep looking
      continue;
    }
    int need = std::max({c_id, c_kernel, c_name, c_unit, c_value});
    if (int(f.size()) <= need) continue;
    double v = 0;
    if (!ParseNumber(f[c_value], &v)) continue;
    const std::string& id = f[c_id];
    if (!kernels.count(id)) order.push_back(id);
    Kernel& k = kernels[id];
    if (c_kernel >= 0) k.name = f[c_kernel];
    std::string metric = f[c_name];
    if (metric == kTime && c_unit >= 0) v = ToMicroseconds(v, f[c_unit]);
    k.values[metric] = v;
  }
  if (c_id < 0) return Status::InvalidArgument("ncu output has no CSV header (\"ID\",...)");
  if (kernels.empty()) return Status::InvalidArgument("ncu profiled no kernel");
  NcuMetrics m;
  double wsum[3] = {0, 0, 0}, wt[3] = {0, 0, 0};
  const char* keys[3] = {kDram, kSm, kWarps};
  for (const std::string& id : order) {
    const Kernel& k = kernels[id];
    // The backend's own kernels (cache flush, hold, roofline probes: all named htam_*) are not
    // the candidate's and would swamp its figures.
    if (k.name.rfind("htam_", 0) == 0) continue;
    ++m.kernels;
    bool seen = false;
    for (const auto& n : m.kernel_names) seen |= n == k.name;
    if (!seen) m.kernel_names.push_back(k.name);
    auto t = k.values.find(kTime);
    double us = t != k.values.end() ? t->second : 0;
    m.total_us += us;
    double w = us > 0 ? us : 1e-3;  // no duration reported: equal weights
    for (int i = 0; i < 3; ++i) {
      auto it = k.values.find(keys[i]);
      if (it == k.values.end()) continue;
      wsum[i] += w * it->second;
      wt[i] += w;
    }
  }
  if (m.kernels == 0)
    return Status::InvalidArgument("ncu profiled none of the candidate's kernels");
  double* out[3] = {&m.dram_pct, &m.sm_pct, &m.occupancy_pct};
  for (int i = 0; i < 3; ++i)
    if (wt[i] > 0) *out[i] = wsum[i] / wt[i];
  return m;
}

fb::Bottleneck ClassifyBottleneck(const NcuMetrics& m, const BottleneckThresholds& t) {
  if (m.dram_pct < 0 || m.sm_pct < 0) return fb::Bottleneck::Unknown;
  if (m.dram_pct >= t.memory_pct && m.dram_pct >= m.sm_pct) return fb::Bottleneck::Memory;
  if (m.sm_pct >= t.compute_pct && m.sm_pct > m.dram_pct) return fb::Bottleneck::Compute;
  // A unit over its threshold that is not the busier one (e.g. dram 65 under sm 62 with
  // memory_pct 70, compute_pct 60) still names the class of that unit.
  if (m.dram_pct >= t.memory_pct) return fb::Bottleneck::Memory;
  if (m.sm_pct >= t.compute_pct) return fb::Bottleneck::Compute;
  if (m.kernels > 0 && m.total_us > 0 && m.total_us / m.kernels < t.launch_us)
    return fb::Bottleneck::Launch;
  return fb::Bottleneck::Latency;
}

std::string FindNcu(const std::string& search_path) {
  const char* path = search_path.empty() ? getenv("PATH") : search_path.c_str();
  if (path) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (dir.empty()) continue;
      std::string p = dir + "/ncu";
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  if (access("/usr/local/cuda/bin/ncu", X_OK) == 0) return "/usr/local/cuda/bin/ncu";
  return "";
}

Result<std::vector<std::string>> NcuCommand(const std::string& ncu) {
  if (ncu.empty())
    return Status::Unavailable("Nsight Compute (ncu) not found on PATH or in /usr/local/cuda/bin");
  if (access(ncu.c_str(), X_OK) != 0)
    return Status::Unavailable("Nsight Compute (ncu) at " + ncu + " is not an executable file");
  std::string metrics;
  for (const char* m : kNcuMetrics) metrics += (metrics.empty() ? "" : ",") + std::string(m);
  return std::vector<std::string>{ncu, "--metrics", metrics, "--csv", "--target-processes", "all"};
}

NcuProfile InterpretNcuOutput(std::string_view output, int exit_code, bool signaled,
                              const BottleneckThresholds& t) {
  NcuProfile p;
  auto m = ParseNcuCsv(output);
  if (!m.ok()) {
    // ERR_NVGPUCTRPERM and friends: say what ncu said.
    std::string last;
    std::istringstream in{std::string(output)};
    std::string line;
    while (std::getline(in, line))
      if (line.find("ERR") != std::string::npos || line.find("rror") != std::string::npos)
        last = line;
    std::string how = signaled         ? "; ncu was killed by a signal"
                      : exit_code != 0 ? "; ncu exited with code " + std::to_string(exit_code)
                                       : "";
    p.note =
        m.status().message() + how + (last.empty() ? "" : " (ncu: " + last.substr(0, 300) + ")");
    return p;
  }
  p.available = true;
  p.metrics = *m;
  p.bottleneck = ClassifyBottleneck(*m, t);
  p.note = std::string("ncu: ") + fb::EnumNameBottleneck(p.bottleneck) + "-bound";
  return p;
}

NcuProfile RunNcuProfile(const std::string& ncu, const std::vector<std::string>& program_argv,
                         const std::string& cwd, double timeout_s, const BottleneckThresholds& t) {
  NcuProfile p;
  auto command = NcuCommand(ncu);
  if (!command.ok()) {
    p.note = "profile unavailable: " + command.status().message();
    return p;
  }
  std::vector<std::string> argv = *command;
  argv.insert(argv.end(), program_argv.begin(), program_argv.end());
  auto r = RunProcess(argv, cwd, timeout_s, 4 << 20);
  if (!r.ok()) {
    p.note = "profile unavailable: cannot start ncu: " + r.status().message();
    return p;
  }
  if (r->timed_out) {
    p.note = "profile unavailable: ncu ran past " + std::to_string(int(timeout_s)) + " s";
    return p;
  }
  p = InterpretNcuOutput(r->output, r->exit_code, r->signaled, t);
  if (!p.available) p.note = "profile unavailable: " + p.note;
  return p;
}

namespace {
// Writes `value` into out->field only when the host's struct is large enough to hold it.
#define HTAM_NCU_SET(out, field, value)                                               \
  do {                                                                                \
    if ((out)->struct_size >=                                                         \
        offsetof(std::remove_pointer_t<decltype(out)>, field) + sizeof((out)->field)) \
      (out)->field = (value);                                                         \
  } while (0)

// A field of a request the host filled, or `def` when its struct_size stops before it.
#define HTAM_NCU_GET(in, field, def)                                                               \
  ((in)->struct_size >= offsetof(std::remove_pointer_t<decltype(in)>, field) + sizeof((in)->field) \
       ? (in)->field                                                                               \
       : (def))
}  // namespace

htam_backend_error* NcuProfileCommandEntry(const htam_profile_command_request* request,
                                           NcuEntryState* state, htam_profile_command* out) {
  if (!request || !state || !out)
    return plugin::MakeError(HTAM_ERR_INVALID_ARGUMENT, "profile_command: null argument");
  const char* tool = HTAM_NCU_GET(request, tool, nullptr);
  const char* search = HTAM_NCU_GET(request, search_path, nullptr);
  std::string ncu = tool && *tool ? std::string(tool) : FindNcu(search ? search : "");
  auto command = NcuCommand(ncu);
  if (!command.ok()) return plugin::MakeError(HTAM_ERR_UNAVAILABLE, command.status().message());
  state->argv = std::move(*command);
  state->child_options.assign(std::begin(kNcuChildOptions), std::end(kNcuChildOptions));
  state->argv_ptrs.clear();
  for (const auto& a : state->argv) state->argv_ptrs.push_back(a.c_str());
  state->argv_ptrs.push_back(nullptr);
  state->child_ptrs.clear();
  for (const auto& o : state->child_options) state->child_ptrs.push_back(o.c_str());
  state->child_ptrs.push_back(nullptr);
  HTAM_NCU_SET(out, argv, state->argv_ptrs.data());
  HTAM_NCU_SET(out, child_options, state->child_ptrs.data());
  HTAM_NCU_SET(out, tool_name, "ncu");
  return nullptr;
}

htam_backend_error* NcuProfileParseEntry(const htam_profile_output* output, NcuEntryState* state,
                                         htam_profile_summary* out) {
  if (!output || !state || !out || (!output->text && output->text_len))
    return plugin::MakeError(HTAM_ERR_INVALID_ARGUMENT, "profile_parse: null argument");
  BottleneckThresholds t;
  auto pick = [](double v, double def) { return v < 0 ? def : v; };
  t.memory_pct = pick(HTAM_NCU_GET(output, memory_pct, -1.0), t.memory_pct);
  t.compute_pct = pick(HTAM_NCU_GET(output, compute_pct, -1.0), t.compute_pct);
  t.launch_us = pick(HTAM_NCU_GET(output, launch_us, -1.0), t.launch_us);
  std::string_view text(output->text ? output->text : "", output->text_len);
  NcuProfile p = InterpretNcuOutput(text, output->exit_code, output->signaled != 0, t);
  if (!p.available) return plugin::MakeError(HTAM_ERR_UNAVAILABLE, p.note);
  state->note = p.note;
  const NcuMetrics& m = p.metrics;
  HTAM_NCU_SET(out, dram_pct, m.dram_pct);
  HTAM_NCU_SET(out, sm_pct, m.sm_pct);
  HTAM_NCU_SET(out, occupancy_pct, m.occupancy_pct);
  HTAM_NCU_SET(out, kernels, m.kernels);
  HTAM_NCU_SET(out, total_us, m.total_us);
  HTAM_NCU_SET(out, bottleneck, int32_t(p.bottleneck));
  HTAM_NCU_SET(out, note, state->note.c_str());
  return nullptr;
}

}  // namespace htam::cuda
