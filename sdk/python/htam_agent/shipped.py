"""Where the reference agent finds what htam ships: the SDK's lookup (htam.paths, the twin of
base/paths.h), relative to the installed or built packages, never the working directory. Without
an importable SDK (its generated modules not built) nothing shipped is found."""

from __future__ import annotations

import shutil

try:
    from htam.paths import find_executable, find_shared_file
except ImportError:
    def find_shared_file(relative: str) -> str:
        return ""

    def find_executable(name: str) -> str:
        return shutil.which(name) or ""

__all__ = ["find_executable", "find_shared_file"]
