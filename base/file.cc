// Whole-file reads (see file.h).
#include "base/file.h"

#include <fstream>
#include <sstream>

namespace htam {

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::string text;
  return ReadWholeFile(path, &text) ? text : std::string();
}

}  // namespace htam
