// Command lines of htam-bench's C++ subcommands and htam-world-compile (args.h).
#include "tools/bench/args.h"

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

}  // namespace htam::bench
