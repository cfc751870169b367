// htam-eval's internal in-process mode (--in-process): the gate in this very process, through
// the plugin ABI, for runs that a profiler watches from outside (`ncu ... htam-eval --in-process
// ...`): a sandboxed worker drops the profiler's environment and hides its processes, so such a
// run must be a plain process. --single-call (with --in-process) is the one call the plugin's
// profiler watches for --profile. Everything else goes through the Evaluator (eval_main.cc).
// Thread-safety: one call at a time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/eval/evaluator.h"

namespace htam::evaltool {

struct InProcessJob {
  std::string task_dir;
  std::string source;  // the candidate's text; "" with reference = true
  bool reference = false;
  std::string language;
};

// Evaluates `jobs` in order on the first device of `backend` (the plugin from eval.plugin_dir,
// else beside this binary or in the build tree), with the gate's settings from the table's eval.*
// options and the plugin's from eval.<backend>_*. `profile`: Ok results again under the plugin's
// profiler (this binary with --in-process --single-call). Unavailable when the backend cannot
// run here; otherwise `done` gets each job's index and result, in order, as it is ready.
Status RunInProcess(const Config& config, const std::string& backend,
                    const std::vector<InProcessJob>& jobs, bool profile, bool single_call,
                    const std::function<void(size_t, eval::EvalResult)>& done);

// Whether `backend`'s plugin file is found where RunInProcess (and the evaluator) look for it.
bool PluginFound(const Config& config, const std::string& backend);

}  // namespace htam::evaltool
