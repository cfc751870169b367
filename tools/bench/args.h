// Command lines of the htam-bench subcommands parsed in C++ (memory, eval, daemon, workers) and of
// htam-world-compile: Boost.Program_options descriptions, counts that may end in k or m (10k, 1m)
// and comma-separated lists of them, --help, and one-line errors with exit status 2.
// Thread-safety: plain functions over values.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace htam::bench {

namespace po = boost::program_options;

// An integer that may end in k (thousand) or m (million): 2000, 10k, 1m.
struct Count {
  int64_t n = 0;
};
// Counts separated by commas: 10k,100k,1m (empty items are skipped).
struct CountList {
  std::vector<int64_t> v;
};
// Read by Boost.Program_options (found by argument-dependent lookup); a bad value is an error
// naming the option.
void validate(boost::any& out, const std::vector<std::string>& values, Count*, int);
void validate(boost::any& out, const std::vector<std::string>& values, CountList*, int);

// Parses `args` (options only, not the program or subcommand name) against `options` (listed by
// --help after `usage`, with --help itself) and `hidden` (accepted, not listed). Long options
// take their value as `--name value` or `--name=value`; names are not abbreviated. An option
// given more than once keeps its last value, unless it is composing (it collects every one).
// Returns -1 when the caller goes on with *vm filled; else the exit status to return: 0 after
// --help (written to `out`), 2 after a bad command line (one line on `err`: "PROG: what is wrong,
// naming the option").
int ParseArgs(const std::string& prog, const std::string& usage,
              const std::vector<std::string>& args, const po::options_description& options,
              const po::options_description& hidden, po::variables_map* vm,
              std::ostream& out = std::cout, std::ostream& err = std::cerr);

// Splits on `sep`, dropping empty items: "a,,b" -> {a, b}.
std::vector<std::string> SplitList(const std::string& s, char sep = ',');

}  // namespace htam::bench
