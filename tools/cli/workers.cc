// htam workers: the evaluation fleet of a running htamd (its "# workers" status section): workers,
// their devices, queue depths, throughput and failures.
#include <map>
#include <sstream>

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
  Json summary = Json::object(), workers = Json::array(), devices = Json::array();
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
      Json w = Fields(value);
      w["name"] = key.substr(7);
      workers.push_back(w);
    } else if (key.rfind("device_", 0) == 0) {
      Json d = Fields(value);
      d["id"] = key.substr(7);
      devices.push_back(d);
    } else {
      summary[key] = value;
    }
  }
  if (summary.empty())
    return Fail(c, "htamd at " + c.g.connect + " reports no workers section (an older daemon?)");
  if (c.g.json) {
    PrintJson(c, Json{{"summary", summary}, {"workers", workers}, {"devices", devices}});
    return kExitOk;
  }
  Table wt({"worker", "host", "devices", "running", "jobs", "failures", "idle_ms", "up_s"});
  for (const auto& w : workers)
    wt.Add({w.value("name", ""), w.value("host", ""), w.value("devices", ""),
            w.value("running", ""), w.value("jobs", ""), w.value("failures", ""),
            w.value("idle_ms", ""), w.value("up_s", "")});
  wt.Print(c.out);
  c.out << "\n";
  Table dt({"device", "backend", "arch", "name", "memory_mb", "state", "jobs"});
  for (const auto& d : devices)
    dt.Add({d.value("id", ""), d.value("backend", ""), d.value("arch", ""), d.value("name", ""),
            d.value("memory_mb", ""), d.value("state", ""), d.value("jobs", "")});
  dt.Print(c.out);
  c.out << "\n";
  for (const char* k :
       {"endpoint", "queue_length", "devices_busy", "throughput_last_minute", "jobs_finished",
        "jobs_failed", "jobs_requeued", "busy_refusals", "workers_lost", "stale_results_dropped"})
    if (summary.contains(k)) c.out << k << ": " << summary[k].get<std::string>() << "\n";
  for (auto it = summary.begin(); it != summary.end(); ++it)
    if (it.key().rfind("queue_", 0) == 0 && it.key() != "queue_length" &&
        it.key() != "queue_limit_per_device")
      c.out << it.key() << ": " << it.value().get<std::string>() << "\n";
  // The worker pool's state (pool.manager; docs/operations.md, "Clusters").
  for (auto it = summary.begin(); it != summary.end(); ++it)
    if (it.key().rfind("pool_", 0) == 0)
      c.out << it.key() << ": " << it.value().get<std::string>() << "\n";
  return kExitOk;
}

}  // namespace htam::cli
