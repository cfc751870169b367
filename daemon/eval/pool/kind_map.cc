// Per-backend pool settings. See kind_map.h.
#include "daemon/eval/pool/kind_map.h"

#include <vector>

namespace htam::pool {
namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

Result<KindMap> KindMap::Parse(const std::string& option, const std::string& text) {
  KindMap m;
  const std::string t = Trim(text);
  if (t.empty()) return m;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t semi = t.find(';', start);
    parts.push_back(Trim(t.substr(start, semi == std::string::npos ? std::string::npos
                                                                    : semi - start)));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  // One value for everything: no ';' and no '=' before any ':' or space (gres "gpu:a100:1" or
  // arguments "--qos=high" carry their own '=' after such characters).
  if (parts.size() == 1) {
    const size_t eq = t.find('=');
    const size_t other = t.find_first_of(": -");
    if (eq == std::string::npos || (other != std::string::npos && other < eq)) {
      m.entries_["*"] = t;
      return m;
    }
  }
  for (const auto& p : parts) {
    if (p.empty()) continue;
    const size_t eq = p.find('=');
    if (eq == std::string::npos)
      return Status::InvalidArgument(option + ": entry '" + p +
                                     "' is not backend[/arch]=value (entries are separated by ';')");
    const std::string key = Trim(p.substr(0, eq));
    if (key.empty() || key.find_first_of(" :") != std::string::npos)
      return Status::InvalidArgument(option + ": entry '" + p + "' names no backend");
    if (m.entries_.count(key))
      return Status::InvalidArgument(option + ": '" + key + "' is given twice");
    m.entries_[key] = Trim(p.substr(eq + 1));
  }
  return m;
}

std::string KindMap::Get(const std::string& backend, const std::string& arch) const {
  if (!arch.empty()) {
    auto it = entries_.find(backend + "/" + arch);
    if (it != entries_.end()) return it->second;
  }
  auto it = entries_.find(backend);
  if (it != entries_.end()) return it->second;
  it = entries_.find("*");
  return it == entries_.end() ? "" : it->second;
}

}  // namespace htam::pool
