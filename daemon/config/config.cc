// Configuration: the table, parsing (base/args.h), typed access and the dump.
#include "daemon/config/config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/args.h"

namespace po = boost::program_options;

namespace htam {
namespace {

std::vector<OptionSpec> BuildTable() {
  std::vector<OptionSpec> t;
  // Map the table's type words to enum values.
  [[maybe_unused]] constexpr OptionType kSTRING = OptionType::kString;
  [[maybe_unused]] constexpr OptionType kINT = OptionType::kInt;
  [[maybe_unused]] constexpr OptionType kDOUBLE = OptionType::kDouble;
  [[maybe_unused]] constexpr OptionType kBOOL = OptionType::kBool;
#define HTAM_OPTION(section, name, type, def, help) \
  t.push_back(OptionSpec{#section "." #name, #section, k##type, def, help});
#include "daemon/config/options.inc"
#undef HTAM_OPTION
  return t;
}

const char* TypeName(OptionType t) {
  switch (t) {
    case OptionType::kString: return "string";
    case OptionType::kInt: return "integer";
    case OptionType::kDouble: return "number";
    case OptionType::kBool: return "boolean";
  }
  return "?";
}

Status CheckValue(const OptionSpec& spec, std::string_view value) {
  std::string v(value);
  char* end = nullptr;
  switch (spec.type) {
    case OptionType::kString: return Status::OK();
    case OptionType::kInt:
      errno = 0;
      std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0)
        return Status::InvalidArgument("option " + spec.name + " wants an integer, got '" + v +
                                       "'");
      return Status::OK();
    case OptionType::kDouble:
      errno = 0;
      std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || errno != 0)
        return Status::InvalidArgument("option " + spec.name + " wants a number, got '" + v + "'");
      return Status::OK();
    case OptionType::kBool:
      if (v == "true" || v == "false" || v == "1" || v == "0" || v == "yes" || v == "no" ||
          v == "on" || v == "off")
        return Status::OK();
      return Status::InvalidArgument("option " + spec.name + " wants true or false, got '" + v +
                                     "'");
  }
  return Status::OK();
}

const OptionSpec* FindSpec(std::string_view name) {
  for (const auto& s : OptionTable())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace

const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> table = BuildTable();
  return table;
}

Config Config::Defaults() {
  Config c;
  for (const auto& s : OptionTable()) c.values_[s.name] = s.default_value;
  return c;
}

Result<Config> Config::Parse(int argc, const char* const* argv, const ProgramInfo& program,
                             std::ostream& out, bool* exit_now) {
  *exit_now = false;
  Config config = Defaults();
  po::options_description generic("Program", /*line_length=*/120, /*min_description_length=*/60);
  generic.add_options()("help,h", "Print this help with every option and its default")(
      "version", "Print the version")("config,c", po::value<std::string>(),
                                      "Read options from this file first; the command line wins")(
      "dump-config", "Print the effective configuration as a config file and exit");
  po::options_description table(
      "Options (file: [section] name = value; command line: --section.name value)",
      /*line_length=*/120, /*min_description_length=*/60);
  for (const auto& s : OptionTable()) {
    std::string help = s.help + " [" + TypeName(s.type) +
                       ", default: " + (s.default_value.empty() ? "\"\"" : s.default_value) + "]";
    table.add_options()(s.name.c_str(), po::value<std::string>(), help.c_str());
  }
  po::options_description all(/*line_length=*/120, /*min_description_length=*/60);
  all.add(generic).add(table);

  po::variables_map cli, file;
  HTAM_RETURN_IF_ERROR(
      ParseOptions(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc), all, &cli));
  if (cli.count("help")) {
    out << program.name << " " << program.version << ": " << program.summary << "\n\n"
        << "Usage: " << program.name << " [--config FILE] [--section.name VALUE ...]\n\n"
        << all << "\n";
    *exit_now = true;
    return config;
  }
  if (cli.count("version")) {
    out << program.name << " " << program.version << "\n";
    *exit_now = true;
    return config;
  }
  if (cli.count("config")) {
    std::string path = cli["config"].as<std::string>();
    std::ifstream in(path);
    if (!in) return Status::InvalidArgument("cannot read config file " + path);
    Status st = ParseOptionFile(in, table, &file);
    if (!st.ok()) return Status::InvalidArgument(path + ": " + st.message());
  }
  // File first, then the command line wins.
  for (auto* vm : {&file, &cli}) {
    for (const auto& [name, value] : *vm) {
      if (!FindSpec(name)) continue;  // generic flags
      Status st = config.Set(name, value.as<std::string>());
      if (!st.ok()) return st;
      config.sources_[name] = vm == &file ? "file" : "command line";
    }
  }
  if (cli.count("dump-config")) {
    out << config.Dump(false);
    *exit_now = true;
  }
  return config;
}

Status Config::Set(std::string_view name, std::string_view value) {
  const OptionSpec* spec = FindSpec(name);
  if (!spec) return Status::InvalidArgument("unknown option " + std::string(name));
  HTAM_RETURN_IF_ERROR(CheckValue(*spec, value));
  values_[std::string(name)] = std::string(value);
  return Status::OK();
}

const std::string& Config::Raw(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    // A name missing from the table is a programming error: fail loudly in every build.
    std::fprintf(stderr, "htam: option '%.*s' is not in the configuration table\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return it->second;
}

std::string Config::GetString(std::string_view name) const {
  return Raw(name);
}
int64_t Config::GetInt(std::string_view name) const {
  return std::strtoll(Raw(name).c_str(), nullptr, 10);
}
double Config::GetDouble(std::string_view name) const {
  return std::strtod(Raw(name).c_str(), nullptr);
}
bool Config::GetBool(std::string_view name) const {
  const std::string& v = Raw(name);
  return v == "true" || v == "1" || v == "yes" || v == "on";
}

std::string Config::Dump(bool defaults_only) const {
  std::ostringstream o;
  o << "# htam configuration. Every option of the configuration table, with its default.\n"
    << "# Read with `htamd --config FILE`; options given on the command line win over this file.\n"
    << "# An option at its default is a comment (`# name = default`): it follows the table when\n"
    << "# a new release changes the default. Uncomment a line and edit it to set the option.\n"
    << "# Generated by `htamd --dump-config`; a test keeps this file equal to the table.\n";
  std::string section;
  for (const auto& s : OptionTable()) {
    if (s.section != section) {
      section = s.section;
      o << "\n[" << section << "]\n";
    }
    std::string name = s.name.substr(s.section.size() + 1);
    o << "\n# " << s.help << "\n# type: " << TypeName(s.type)
      << "; default: " << (s.default_value.empty() ? "(empty)" : s.default_value) << "\n";
    const std::string& v = defaults_only ? s.default_value : Raw(s.name);
    o << (v == s.default_value ? "# " : "") << name << " = " << v << "\n";
  }
  return o.str();
}

}  // namespace htam
