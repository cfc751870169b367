// htam-bench kernelbench: KernelBench's metrics (correct, fast_0/1/2, geomean speedup per level)
// of a set of ModelNew files, evaluated by htam-eval. Written in Python over the agent package
// like `quality` and `world`: this subcommand runs `/usr/bin/python3 -m htam_bench kernelbench ...`
// with HTAM_EVAL set to the build's htam-eval. See tools/bench/python/htam_bench/kernelbench_cli.py and
// docs/benchmarks.md ("kernelbench").
#include "tools/bench/python_launch.h"

int RunKernelBenchBench(int argc, char** argv) {
  return htam::bench::ExecPythonSubcommand("kernelbench", argc, argv,
                                           {{"HTAM_EVAL", "tools/eval/htam-eval"}});
}
