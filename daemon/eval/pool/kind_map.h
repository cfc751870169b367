// A pool setting that may differ by backend and GPU type (pool.partition, pool.gres, ...): either
// one value for every kind ("gpu") or entries "backend[/arch]=value" separated by ';'
// ("cpu=short;cuda=gpu;cuda/sm_90=h100"). Lookup takes the backend/arch entry, else the backend's,
// else "*=value", else "".
// Thread-safety: immutable after Parse.
#pragma once

#include <map>
#include <string>

#include "base/status.h"

namespace htam::pool {

class KindMap {
 public:
  // InvalidArgument naming `option` and the bad entry (an entry without '=' among others, an
  // empty key, a key given twice).
  static Result<KindMap> Parse(const std::string& option, const std::string& text);
  std::string Get(const std::string& backend, const std::string& arch) const;

 private:
  std::map<std::string, std::string> entries_;  // "backend", "backend/arch", "*"
};

}  // namespace htam::pool
