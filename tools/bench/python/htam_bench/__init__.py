"""htam-bench's Python part: the benchmark harness over htam's SDK and reference agent.

The memory-quality benchmark (quality, quality_bounds), the measured optimization world (world_*:
families, table, environment, builder, leave-one-family-out bench) and KernelBench's metrics
(kernelbench_cli). Shipped with htam-bench (package htam-tools), not with python3-htam. Entry
point: `htam-bench quality|world|kernelbench ...`, which runs `python3 -m htam_bench` (see
docs/benchmarks.md).
"""
