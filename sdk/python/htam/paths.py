"""Where htam's Python packages find what htam ships: the twin of base/paths.h.

Relative to this package, never the current directory or the source tree. Installed, the package
is <prefix>/lib/python3/dist-packages/htam and the shipped files are <prefix>/share/htam,
executables <prefix>/bin, the evaluation worker and plugins <prefix>/lib/htam. In a build tree the
package is <build>/python/htam and <build> mirrors that layout (CMake links <build>/share/htam/*,
<build>/bin/*, <build>/lib/htam/*). Both are found by looking one to four folders above the
package.
"""

from __future__ import annotations

import os
import shutil
from typing import List

_HERE = os.path.dirname(os.path.abspath(__file__))


def _ancestors() -> List[str]:
    """This package's parent folder and up to three of its ancestors, nearest first."""
    out, up = [], _HERE
    for _ in range(4):
        parent = os.path.dirname(up)
        if parent == up:
            break
        up = parent
        out.append(up)
    return out


def _find_under(tree: str, relative: str) -> str:
    for a in _ancestors():
        p = os.path.join(a, tree, relative)
        if os.path.exists(p):
            return os.path.realpath(p)
    return ""


def find_shared_file(relative: str) -> str:
    """<ancestor>/share/htam/<relative> (seed_taxonomy.json, tasks, include, kernelbench/...,
    world/...); '' when none exists."""
    return _find_under(os.path.join("share", "htam"), relative)


def find_lib_file(relative: str) -> str:
    """<ancestor>/lib/htam/<relative> (htam-eval-worker, backends/libhtam_backend_*.so)."""
    return _find_under(os.path.join("lib", "htam"), relative)


def find_executable(name: str) -> str:
    """An executable htam ships: <ancestor>/bin/<name>, else <ancestor>/lib/htam/<name>, else on
    PATH; '' when none is found."""
    for tree in ("bin", os.path.join("lib", "htam")):
        for a in _ancestors():
            p = os.path.join(a, tree, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return os.path.realpath(p)
    return shutil.which(name) or ""
