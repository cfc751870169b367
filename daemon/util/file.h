// Small file helpers shared by the daemon, the backends and the tools.
#pragma once

#include <string>

namespace htam {

// The whole file, bytes as they are; false when it cannot be opened.
bool ReadWholeFile(const std::string& path, std::string* out);

}  // namespace htam
