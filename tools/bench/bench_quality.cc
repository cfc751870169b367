// htam-bench quality: the memory-quality benchmark. It is written in Python over the SDK (it drives
// real htamd processes and replays task lineages), so this subcommand only runs
// `/usr/bin/python3 -m htam_bench quality ...` with the build's and the source tree's Python
// packages on PYTHONPATH. See tools/bench/python/htam_bench/quality.py and docs/benchmarks.md.
#include "tools/bench/python_launch.h"

int RunQualityBench(int argc, char** argv) {
  return htam::bench::ExecPythonSubcommand("quality", argc, argv);
}
