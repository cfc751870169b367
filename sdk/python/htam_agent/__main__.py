"""`python3 -m htam_agent ...`: see htam_agent.cli."""
import sys

from .cli import main

sys.exit(main())
