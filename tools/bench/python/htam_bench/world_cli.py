"""htam-bench world build | check | bench: dispatch to the world's table builder and benchmark."""

from __future__ import annotations

import sys
from typing import List


def main(argv: List[str]) -> int:
    if argv and argv[0] in ("build", "check"):
        from .world_build import main as build_main
        return build_main(argv)
    if argv and argv[0] == "bench":
        from .world_bench import main as bench_main
        return bench_main(argv[1:])
    print("usage: htam-bench world build|check|bench [options]\n"
          "  build  measure the families' knob variants through the gate into the table\n"
          "  check  re-measure a sample of the table and compare within timing noise\n"
          "  bench  leave-one-family-out sessions over the table, policies compared")
    return 2 if argv and argv[0] not in ("-h", "--help") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
