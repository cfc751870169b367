// Command lines through Boost.Program_options (args.h).
#include "base/args.h"

#include <set>
#include <sstream>

namespace htam {

namespace po = boost::program_options;

Status ParseOptions(const std::vector<std::string>& args, const po::options_description& options,
                    po::variables_map* vm, const po::positional_options_description* positional,
                    std::vector<po::option>* in_order) {
  try {
    po::command_line_parser parser(args);
    parser.options(options).style(po::command_line_style::unix_style &
                                  ~po::command_line_style::allow_guessing);
    if (positional) parser.positional(*positional);
    po::parsed_options parsed = parser.run();
    // The last of an option given more than once wins (scripts that append an override rely on
    // it); composing options keep every occurrence.
    std::set<std::string> seen;
    std::vector<po::option> kept;
    for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
      if (it->string_key.empty())  // a word that is not an option's value
        return Status::InvalidArgument("unexpected argument '" + it->original_tokens.front() +
                                       "'");
      const po::option_description* d = options.find_nothrow(it->string_key, false);
      if (d && !d->semantic()->is_composing() && !seen.insert(it->string_key).second) continue;
      kept.insert(kept.begin(), *it);
    }
    parsed.options = std::move(kept);
    po::store(parsed, *vm);
    if (!vm->count("help")) po::notify(*vm);
    if (in_order) *in_order = parsed.options;
  } catch (const po::error& e) {
    return Status::InvalidArgument(e.what());
  }
  return Status::OK();
}

Status ParseOptionFile(std::istream& in, const po::options_description& options,
                       po::variables_map* vm) {
  try {
    po::store(po::parse_config_file(in, options, /*allow_unregistered=*/false), *vm);
  } catch (const po::error& e) {
    return Status::InvalidArgument(e.what());
  }
  return Status::OK();
}

size_t FirstWord(const std::vector<std::string>& args, const po::options_description& options) {
  auto takes_value = [&](const std::string& word) {
    if (word.find('=') != std::string::npos) return false;  // --name=value is one word
    for (const auto& d : options.options()) {
      const bool named = word == "--" + d->long_name() ||
                         word == d->canonical_display_name(
                                     po::command_line_style::allow_dash_for_short);
      if (named) return d->semantic()->max_tokens() > 0;
    }
    return false;
  };
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') break;
    if (takes_value(a) && i + 1 < args.size()) ++i;
  }
  return i;
}

int ParseArgs(const std::string& prog, const std::string& usage,
              const std::vector<std::string>& args, const po::options_description& options,
              const po::options_description& hidden, po::variables_map* vm, std::ostream& out,
              std::ostream& err, const po::positional_options_description* positional) {
  po::options_description shown("options", 100, 50);
  shown.add_options()("help,h", "print this help");
  for (const auto& o : options.options()) shown.add(o);
  po::options_description all;
  all.add(shown).add(hidden);
  const Status st = ParseOptions(args, all, vm, positional);
  if (!st.ok()) {
    err << prog << ": " << st.message() << " (" << prog << " --help lists the options)\n";
    return 2;
  }
  if (vm->count("help")) {
    out << usage << "\n" << shown;
    return 0;
  }
  return -1;
}

std::vector<std::string> SplitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace htam
