// htam-eval's command line: its own flags and every option of the configuration table, parsed by
// one Boost.Program_options description, and turned into the evaluator's configuration.
// Thread-safety: plain functions over values.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "daemon/config/config.h"

namespace htam::evaltool {

struct EvalArgs {
  std::vector<std::string> tasks;    // --task DIR (repeatable: --reference / --lineage of each)
  std::vector<std::string> sources;  // --source FILE and positional files, in order
  std::string backend;               // "" = from the files' extension, else cuda where it runs
  std::string language;              // "" = the backend's; *.py on a KernelBench task: kernelbench
  bool reference = false;            // the reference against itself (before any file)
  bool lineage = false;              // every variant of DIR/lineage.json, checked against
  bool write = false;                // its "expected"; --write fills "measured"
  bool queue = false;                // submit every candidate at once (compiles ahead)
  bool profile = false;              // profile every Ok candidate (EvalJob::profile)
  // Internal (in_process.h): the gate in this process, for runs a profiler watches from outside;
  // with single_call, the one call the plugin's profiler watches for --in-process --profile.
  bool in_process = false;
  bool single_call = false;
  bool log_level_given = false;  // --general.log_level (else warnings only)
};

// Parses argv into *args and *config (the configuration table's defaults, then --config FILE,
// then table options given as --section.name VALUE or --option [section.]name=VALUE, then the
// flags that stand for table options: --seeds, --reps, --sets, --cache, --compile-threads,
// --plugin). --help and --version write to `out` and set *exit_now. Bad or unknown options, bad
// values and missing required ones are InvalidArgument with a message naming the option.
Status ParseEvalArgs(int argc, const char* const* argv, EvalArgs* args, Config* config,
                     std::ostream& out, bool* exit_now);

// The table option a --option KEY names: KEY itself when it is a table option ("eval.seeds"),
// else "eval.KEY", else "eval.cuda_KEY" (htam-eval-cli's plugin keys: "cuda_roofline",
// "nvcc"); "" when none is.
std::string TableOptionFor(const std::string& key);

}  // namespace htam::evaltool
