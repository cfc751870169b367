// Command lines through Boost.Program_options with the rules htam's tools share: long options as
// `--name value` or `--name=value`, never abbreviated; an option given more than once keeps its
// last value (composing ones keep every value); --help; one-line errors with exit status 2.
// Thread-safety: plain functions over values.
#pragma once

#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

namespace htam {

// Parses `args` (not the program or subcommand name) against `options` (listed by
// --help after `usage`, with --help itself) and `hidden` (accepted, not listed). Long options
// take their value as `--name value` or `--name=value`; names are not abbreviated. An option
// given more than once keeps its last value, unless it is composing (it collects every one).
// Returns -1 when the caller goes on with *vm filled; else the exit status to return: 0 after
// --help (written to `out`), 2 after a bad command line (one line on `err`: "PROG: what is wrong,
// naming the option").
// `positional` (optional) names the options that words without a dash fill, in order.
int ParseArgs(const std::string& prog, const std::string& usage,
              const std::vector<std::string>& args,
              const boost::program_options::options_description& options,
              const boost::program_options::options_description& hidden,
              boost::program_options::variables_map* vm, std::ostream& out = std::cout,
              std::ostream& err = std::cerr,
              const boost::program_options::positional_options_description* positional = nullptr);

// Splits on `sep`, dropping empty items: "a,,b" -> {a, b}.
std::vector<std::string> SplitList(const std::string& s, char sep = ',');

}  // namespace htam
