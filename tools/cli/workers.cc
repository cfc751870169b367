// htam workers: the evaluation fleet of a running htamd (its "# workers" status section): workers,
// their devices, queue depths, throughput and failures.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

#include "tools/cli/cli.h"
#include "tools/cli/table.h"

namespace htam::cli {
namespace {

// "k1=v1 k2=v2 name="a b"" -> map.
std::map<std::string, std::string> Fields(const std::string& s) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t eq = s.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = s.substr(i, eq - i), value;
    size_t j = eq + 1;
    if (j < s.size() && s[j] == '"') {
      size_t end = s.find('"', j + 1);
      value = s.substr(j + 1, end == std::string::npos ? std::string::npos : end - j - 1);
      j = end == std::string::npos ? s.size() : end + 1;
    } else {
      size_t end = s.find(' ', j);
      value = s.substr(j, end == std::string::npos ? std::string::npos : end - j);
      j = end == std::string::npos ? s.size() : end;
    }
    out[key] = value;
    i = j;
  }
  return out;
}

// JSON of a field: numbers as numbers ("3" -> 3, "0.5" -> 0.5), except fields that name
// something (ids, hosts, architectures, endpoints), which stay text even when they are digits.
Json Typed(const std::string& key, const std::string& value) {
  static const char* const kText[] = {"name", "id", "host", "arch", "backend", "endpoint",
                                      "state"};
  for (const char* k : kText)
    if (key == k) return value;
  if (value.empty()) return value;
  char* end = nullptr;
  errno = 0;
  if (value.find_first_of(".eE") == std::string::npos) {
    long long i = std::strtoll(value.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return i;
  } else {
    double d = std::strtod(value.c_str(), &end);
    if (*end == '\0' && errno == 0 && std::isfinite(d)) return d;
  }
  return value;
}

Json TypedObject(const std::map<std::string, std::string>& fields) {
  Json out = Json::object();
  for (const auto& [k, v] : fields) out[k] = Typed(k, v);
  return out;
}

}  // namespace

int CmdWorkers(Context& c) {
  po::options_description o("workers options");
  po::variables_map vm;
  bool done;
  int rc = Parse(c, "", o, {}, &vm, &done);
  if (done) return rc;
  if (c.g.connect.empty())
    return Fail(c, "'workers' asks a running htamd: give --connect ENDPOINT");
  auto src = OpenSource(c);
  if (!src.ok()) return Fail(c, src.status());
  auto text = (*src)->StatusText();
  if (!text.ok()) return Fail(c, text.status());
  // Keep the "# workers" section only.
  std::istringstream in(*text);
  std::string line;
  bool inside = false;
  std::map<std::string, std::string> summary;
  std::vector<std::map<std::string, std::string>> workers, devices;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) {
      inside = line == "# workers";
      continue;
    }
    if (!inside || line.empty()) continue;
    size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key.rfind("worker_", 0) == 0) {
      auto w = Fields(value);
      w["name"] = key.substr(7);
      workers.push_back(w);
    } else if (key.rfind("device_", 0) == 0) {
      auto d = Fields(value);
      d["id"] = key.substr(7);
      devices.push_back(d);
    } else {
      summary[key] = value;
    }
  }
  if (summary.empty())
    return Fail(c, "htamd at " + c.g.connect + " reports no workers section (an older daemon?)");
  if (c.g.json) {
    Json jw = Json::array(), jd = Json::array();
    for (const auto& w : workers) jw.push_back(TypedObject(w));
    for (const auto& d : devices) jd.push_back(TypedObject(d));
    PrintJson(c, Json{{"summary", TypedObject(summary)}, {"workers", jw}, {"devices", jd}});
    return kExitOk;
  }
  auto get = [](const std::map<std::string, std::string>& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second;
  };
  Table wt({"worker", "host", "devices", "running", "jobs", "failures", "idle_ms", "up_s"});
  for (const auto& w : workers)
    wt.Add({get(w, "name"), get(w, "host"), get(w, "devices"), get(w, "running"), get(w, "jobs"),
            get(w, "failures"), get(w, "idle_ms"), get(w, "up_s")});
  wt.Print(c.out);
  c.out << "\n";
  Table dt({"device", "backend", "arch", "name", "memory_mb", "state", "jobs"});
  for (const auto& d : devices)
    dt.Add({get(d, "id"), get(d, "backend"), get(d, "arch"), get(d, "name"),
            get(d, "memory_mb"), get(d, "state"), get(d, "jobs")});
  dt.Print(c.out);
  c.out << "\n";
  for (const char* k :
       {"endpoint", "queue_length", "devices_busy", "throughput_last_minute", "jobs_finished",
        "jobs_failed", "jobs_requeued", "busy_refusals", "workers_lost", "stale_results_dropped"})
    if (summary.count(k)) c.out << k << ": " << summary[k] << "\n";
  for (const auto& [k, v] : summary)
    if (k.rfind("queue_", 0) == 0 && k != "queue_length" && k != "queue_limit_per_device")
      c.out << k << ": " << v << "\n";
  // The worker pool's state (pool.manager; docs/operations.md, "Clusters").
  for (const auto& [k, v] : summary)
    if (k.rfind("pool_", 0) == 0) c.out << k << ": " << v << "\n";
  return kExitOk;
}

}  // namespace htam::cli
