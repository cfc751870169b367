"""`python3 -m htam_bench quality|world|kernelbench ...`: the subcommands htam-bench runs in Python."""
import sys
from typing import List, Optional

USAGE = ("usage: python3 -m htam_bench quality|world|kernelbench [options]\n"
         "  (normally through htam-bench, which sets the paths: htam-bench --help)")


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "quality":
        from .quality import main as quality_main
        return quality_main(argv[1:])
    if argv and argv[0] == "world":
        from .world_cli import main as world_main
        return world_main(argv[1:])
    if argv and argv[0] == "kernelbench":
        from .kernelbench_cli import main as kernelbench_main
        return kernelbench_main(argv[1:])
    asked = argv[:1] in (["-h"], ["--help"])
    print(USAGE, file=sys.stdout if asked else sys.stderr)
    return 0 if asked else 2


if __name__ == "__main__":
    sys.exit(main())
