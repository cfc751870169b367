// Command lines of htam-bench's C++ subcommands and htam-world-compile (args.h).
#include "tools/bench/args.h"

#include <set>
#include <sstream>

namespace htam::bench {
namespace {

// "2000", "10k", "1m" -> the count (spaces around it allowed); false for anything else (signs,
// fractions, other suffixes).
bool ParseCount(std::string s, int64_t* out) {
  s.erase(0, s.find_first_not_of(' '));
  s.erase(s.find_last_not_of(' ') + 1);
  if (s.empty()) return false;
  int64_t mult = 1;
  char last = s.back();
  if (last == 'k' || last == 'K') mult = 1000, s.pop_back();
  if (last == 'm' || last == 'M') mult = 1000000, s.pop_back();
  if (s.empty() || s.size() > 12) return false;
  int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  *out = n * mult;
  return true;
}

[[noreturn]] void BadCount(const std::string& value, const char* what) {
  po::error_with_option_name e(
      std::string("the argument ('%value%') for option '%canonical_option%' "
                  "is not ") +
      what);
  e.set_substitute("value", value);
  throw e;
}

}  // namespace

void validate(boost::any& out, const std::vector<std::string>& values, Count*, int) {
  po::validators::check_first_occurrence(out);
  const std::string& s = po::validators::get_single_string(values);
  Count c;
  if (!ParseCount(s, &c.n)) BadCount(s, "a count (an integer, or with k or m: 2000, 10k, 1m)");
  out = c;
}

void validate(boost::any& out, const std::vector<std::string>& values, CountList*, int) {
  po::validators::check_first_occurrence(out);
  const std::string& s = po::validators::get_single_string(values);
  CountList l;
  for (const std::string& item : SplitList(s)) {
    int64_t n = 0;
    if (!ParseCount(item, &n))
      BadCount(s, "a comma-separated list of counts (integers, or with k or m: 10k,100k,1m)");
    l.v.push_back(n);
  }
  out = l;
}

int ParseArgs(const std::string& prog, const std::string& usage,
              const std::vector<std::string>& args, const po::options_description& options,
              const po::options_description& hidden, po::variables_map* vm, std::ostream& out,
              std::ostream& err) {
  po::options_description shown("options", 100, 50);
  shown.add_options()("help,h", "print this help");
  for (const auto& o : options.options()) shown.add(o);
  po::options_description all;
  all.add(shown).add(hidden);
  try {
    po::parsed_options parsed =
        po::command_line_parser(args)
            .options(all)
            .style(po::command_line_style::unix_style & ~po::command_line_style::allow_guessing)
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

}  // namespace htam::bench
