// The configuration table (options.inc) and its parser. Boost.Program_options parses the file
// first, then the command line, which wins. Every option has a name, type, default and help.
// Thread-safety: a Config is a value; concurrent reads are safe, Set() needs external locking.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace htam {

enum class OptionType { kString, kInt, kDouble, kBool };

struct OptionSpec {
  std::string name;  // "section.name"
  std::string section;
  OptionType type;
  std::string default_value;  // as written in the file
  std::string help;
};

// Every option of every htam program, in table order.
const std::vector<OptionSpec>& OptionTable();

struct ProgramInfo {
  std::string name;     // "htamd"
  std::string summary;  // one line for --help
  std::string version;
};

class Config {
 public:
  // The embedded defaults.
  static Config Defaults();

  // Parses argv. Recognized flags besides the table: --config FILE, --help, --version,
  // --dump-config. When one of the last three was handled, *exit_now is set and the text has been
  // written to `out`. Unknown options, bad values and unreadable files are InvalidArgument.
  static Result<Config> Parse(int argc, const char* const* argv, const ProgramInfo& program,
                              std::ostream& out, bool* exit_now);

  std::string GetString(std::string_view name) const;
  int64_t GetInt(std::string_view name) const;
  double GetDouble(std::string_view name) const;
  bool GetBool(std::string_view name) const;

  // Sets a value, checking the name and the type (tests, and programs that set an option from
  // their own flags before they start).
  Status Set(std::string_view name, std::string_view value);

  // The whole table as a self-documenting config file, with current values.
  std::string Dump(bool defaults_only) const;

  // Options set away from their defaults, and where: "file" or "command line".
  const std::map<std::string, std::string>& sources() const { return sources_; }

 private:
  const std::string& Raw(std::string_view name) const;
  std::map<std::string, std::string, std::less<>> values_;
  std::map<std::string, std::string> sources_;
};

}  // namespace htam
