// Command lines of the htam-bench subcommands parsed in C++ (memory, eval, daemon, workers) and of
// htam-world-compile: base/args.h's parser, and counts that may end in k or m (10k, 1m) and
// comma-separated lists of them.
// Thread-safety: plain functions over values.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "base/args.h"

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

// The command-line parser every htam program uses (base/args.h).
using htam::ParseArgs;
using htam::SplitList;

}  // namespace htam::bench
