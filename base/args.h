// Command lines and option files through Boost.Program_options with the rules htam's programs
// share: long options as `--name value` or `--name=value`, never abbreviated; an option given more
// than once keeps its last value (composing ones keep every value); a word that is no option's
// value is an error unless positional options take it; --help; one-line errors. Every program of
// htam parses here (tests/layering/check_calls.py keeps Boost's parsers out of other folders).
// Thread-safety: plain functions over values.
#pragma once

#include <boost/program_options.hpp>
#include <iostream>
#include <istream>
#include <string>
#include <vector>

#include "base/status.h"

namespace htam {

// Parses `args` (not the program or subcommand name) against `options` by the rules above and
// stores the values in *vm. Required options and notifiers are checked unless --help ("help") was
// given, so that help works without them. `positional` (optional) names the options that words
// without a dash fill, in order. `in_order` (optional) gets the options as given, after the
// last-wins rule. InvalidArgument with a message that names the option on a bad command line.
Status ParseOptions(const std::vector<std::string>& args,
                    const boost::program_options::options_description& options,
                    boost::program_options::variables_map* vm,
                    const boost::program_options::positional_options_description* positional =
                        nullptr,
                    std::vector<boost::program_options::option>* in_order = nullptr);

// Parses an option file (`[section]` headers, `name = value` lines, `#` comments) against
// `options`, whose names are `section.name`; a name not among them is an error. Stores the values
// in *vm. InvalidArgument with Boost's message (naming the option or the line) on a bad file.
Status ParseOptionFile(std::istream& in,
                       const boost::program_options::options_description& options,
                       boost::program_options::variables_map* vm);

// The index of the first word of `args` that is neither an option of `options` nor the value of
// one (`--name VALUE`, `-n VALUE`): where a subcommand's name stands after the global options.
// args.size() when there is none.
size_t FirstWord(const std::vector<std::string>& args,
                 const boost::program_options::options_description& options);

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
