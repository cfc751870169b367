# expect: CompileError with "not in reach". Looks for the golden outputs and the problem file
# (paths filled in by the test); inside the runner's view neither exists.
import os

import torch
import torch.nn as nn

GOLDEN_DIR = "@GOLDEN_DIR@"
PROBLEM = "@PROBLEM@"
seen = [p for p in (GOLDEN_DIR, PROBLEM) if os.path.exists(p)]
if seen:
    raise SystemExit("answer key in reach: %s" % seen)
raise RuntimeError("answer key not in reach")


class ModelNew(nn.Module):
    def forward(self, x):
        return x
