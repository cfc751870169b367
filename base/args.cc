// Command lines through Boost.Program_options (args.h).
#include "base/args.h"

#include <set>
#include <sstream>

namespace htam {

namespace po = boost::program_options;

int ParseArgs(const std::string& prog, const std::string& usage,
              const std::vector<std::string>& args, const po::options_description& options,
              const po::options_description& hidden, po::variables_map* vm, std::ostream& out,
              std::ostream& err, const po::positional_options_description* positional) {
  po::options_description shown("options", 100, 50);
  shown.add_options()("help,h", "print this help");
  for (const auto& o : options.options()) shown.add(o);
  po::options_description all;
  all.add(shown).add(hidden);
  try {
    po::parsed_options parsed = positional ? po::command_line_parser(args)
                                                 .options(all)
                                                 .positional(*positional)
                                                 .style(po::command_line_style::unix_style &
                                                        ~po::command_line_style::allow_guessing)
                                                 .run()
                                           : po::command_line_parser(args)
                                                 .options(all)
                                                 .style(po::command_line_style::unix_style &
                                                        ~po::command_line_style::allow_guessing)
                                                 .run();
    // The last of an option given more than once wins (the hand-written parser's rule, which
    // scripts that append an override rely on); composing options keep every occurrence.
    std::set<std::string> seen;
    std::vector<po::option> kept;
    for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
      if (it->string_key.empty()) {  // a word that is not an option's value
        err << prog << ": unexpected argument '" << it->original_tokens.front() << "' (" << prog
            << " --help lists the options)\n";
        return 2;
      }
      const po::option_description* d = all.find_nothrow(it->string_key, false);
      if (d && !d->semantic()->is_composing() && !seen.insert(it->string_key).second) continue;
      kept.insert(kept.begin(), *it);
    }
    parsed.options = std::move(kept);
    po::store(parsed, *vm);
    if (vm->count("help")) {
      out << usage << "\n" << shown;
      return 0;
    }
    po::notify(*vm);
  } catch (const po::error& e) {
    err << prog << ": " << e.what() << " (" << prog << " --help lists the options)\n";
    return 2;
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
