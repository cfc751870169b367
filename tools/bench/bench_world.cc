// htam-bench world: the measured optimization world (build, check, bench). Written in Python over
// the SDK like `quality` (bench drives real htamd processes), so this subcommand only runs
// `/usr/bin/python3 -m htam_bench world ...` with the build's and the source tree's Python packages
// on PYTHONPATH, and HTAM_WORLD_BIN set to the build's CUDA binaries. See
// tools/bench/python/htam_bench/world_build.py, world_bench.py and docs/benchmarks.md ("World bench").
#include "tools/bench/python_launch.h"

int RunWorldBench(int argc, char** argv) {
  return htam::bench::ExecPythonSubcommand("world", argc, argv,
                                           {{"HTAM_WORLD_BIN", "backends/cuda"}});
}
