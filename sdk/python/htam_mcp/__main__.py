"""`python3 -m htam_mcp ...`: see htam_mcp.cli."""
import sys

from .cli import main

sys.exit(main())
