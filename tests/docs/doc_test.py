"""The docs' commands, run: every fenced block that a `<!-- doctest -->` line marks in
README.md and docs/*.md runs in a fresh folder on the CPU, in the order of its file, and where
the doc shows output after a `$ command` line, the output must be the one shown.

A marked block is either a transcript (`$ command` lines, each followed by the output it
prints, or by nothing where the doc does not show it) or, without `$` lines, a list of commands (one a line, `\\` continues a line). In shown
output, a line `...` stands for any number of lines and `...` inside a line for any text; lines
are compared without trailing blanks, and the `# comment` after a command is not part of it.
The marker names what a file's blocks start from (the first marker of a file decides):

    <!-- doctest -->              an empty folder
    <!-- doctest: store -->       a folder holding `htam-data` (htam's default data folder),
                                  the store the CLI's tests build (htam-test-store build
                                  htam-data), the one docs/cli.md shows
    <!-- doctest: daemon -->      an empty folder and a fresh htamd (CPU backend) at the
                                  endpoint the docs name, tcp://127.0.0.1:7878 (replaced by a
                                  free port in commands and in output)

Every command must exit 0 unless the doc shows its error (a transcript whose shown output
starts with the command's name, `htam <command>: ...`). The folder has `build` (the build
tree), `tools`, `configs`, `tests` and `sdk` (the sources) beside it, and PATH starts with the
build's binaries, so `htam`, `htamd`, `htam-eval`, `build/daemon/htamd` and
`configs/tasks/cpu_relu` resolve as the docs use them.

Run by ctest (doc_test) with HTAM_BUILD_DIR set; `doc_test.py FILE.md ...` runs some files only.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Dict, List, Optional, Tuple

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("HTAM_BUILD_DIR", os.path.join(ROOT, "build")))
DOC_ENDPOINT = "tcp://127.0.0.1:7878"
MARK = re.compile(r"^<!--\s*doctest(?::\s*([a-z]+))?\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")
# The build's programs by the names the docs use (found anywhere in the build tree).
PROGRAMS = ("htam", "htamd", "htam-eval", "htam-keygen", "htam-bench", "htam-worker",
            "htam-test-store", "htam-agent", "htam-mcp")
COMMAND_TIMEOUT_S = 600


class Block:
    def __init__(self, path: str, line: int, setup: str, text: List[str]):
        self.path, self.line, self.setup, self.text = path, line, setup, text

    def steps(self) -> List[Tuple[str, Optional[List[str]]]]:
        """(command, shown output or None) in order."""
        lines = list(self.text)
        transcript = any(l.startswith("$ ") for l in lines)
        out: List[Tuple[str, Optional[List[str]]]] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if transcript and not line.startswith("$ "):
                i += 1  # output of no command: not possible after the first `$`
                continue
            cmd = line[2:] if transcript else line
            i += 1
            while cmd.rstrip().endswith("\\") and i < len(lines):
                nxt = lines[i][2:] if lines[i].startswith("> ") else lines[i]
                cmd = cmd.rstrip()[:-1].rstrip() + " " + nxt.strip()
                i += 1
            if not cmd.strip() or cmd.lstrip().startswith("#"):
                continue
            shown: Optional[List[str]] = None
            if transcript:
                shown = []
                while i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i])
                    i += 1
            out.append((cmd, shown))
        return out


def blocks_of(path: str) -> List[Block]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out, setup = [], None
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m and i + 1 < len(lines) and FENCE.match(lines[i + 1]):
            setup = setup or (m.group(1) or "plain")
            fence = FENCE.match(lines[i + 1]).group(1)
            j = i + 2
            while j < len(lines) and not lines[j].startswith(fence):
                j += 1
            out.append(Block(path, i + 2, setup, lines[i + 2:j]))
            i = j + 1
            continue
        i += 1
    return out


def strip_comment(cmd: str) -> str:
    """The command without a trailing `# comment` (outside quotes)."""
    quote = ""
    for k, ch in enumerate(cmd):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or cmd[k - 1] in " \t"):
            return cmd[:k].rstrip()
    return cmd.rstrip()


def matches(shown: List[str], actual: List[str]) -> bool:
    """Shown lines against actual ones: `...` lines match any number of lines, `...` inside a
    line any text."""
    shown = [l.rstrip() for l in shown]
    actual = [l.rstrip() for l in actual]
    while shown and not shown[-1]:
        shown.pop()
    while actual and not actual[-1]:
        actual.pop()

    def line_ok(pattern: str, text: str) -> bool:
        if "..." not in pattern:
            return pattern == text
        rx = ".*".join(re.escape(p) for p in pattern.split("..."))
        return re.fullmatch(rx, text) is not None

    memo: Dict[Tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        if (i, j) in memo:
            return memo[i, j]
        if i == len(shown):
            r = j == len(actual)
        elif shown[i].strip() == "...":
            r = go(i + 1, j) or (j < len(actual) and go(i, j + 1))
        else:
            r = j < len(actual) and line_ok(shown[i], actual[j]) and go(i + 1, j + 1)
        memo[i, j] = r
        return r

    return go(0, 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_programs() -> Dict[str, str]:
    """{name: path} of PROGRAMS in the build tree (bin/ first: the launchers)."""
    found: Dict[str, str] = {}
    for d, dirs, files in os.walk(BUILD):
        dirs[:] = sorted(x for x in dirs if x != "CMakeFiles" and not x.startswith("_CPack"))
        for f in files:
            p = os.path.join(d, f)
            if f in PROGRAMS and os.access(p, os.X_OK) and (
                    f not in found or os.path.dirname(p) == os.path.join(BUILD, "bin")):
                found[f] = p
    return found


class Folder:
    """The fresh folder a doc's blocks run in, with what its setup asked for."""

    def __init__(self, setup: str):
        self.tmp = tempfile.mkdtemp(prefix="htam-doctest-")
        os.chmod(self.tmp, 0o755)  # sandboxed evaluation workers (another user) reach it
        self.cwd = os.path.join(self.tmp, "cwd")
        os.makedirs(self.cwd)
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir)
        for name, path in build_programs().items():
            os.symlink(path, os.path.join(bindir, name))
        os.symlink(BUILD, os.path.join(self.cwd, "build"))
        for d in ("tools", "configs", "tests", "sdk"):
            os.symlink(os.path.join(ROOT, d), os.path.join(self.cwd, d))
        self.env = {**os.environ, "PATH": bindir + ":/usr/bin:/bin", "HOME": self.tmp,
                    "PYTHONPATH": os.path.join(BUILD, "python"), "HTAM_LOG_LEVEL": "error"}
        self.endpoint = DOC_ENDPOINT
        self.daemon: Optional[subprocess.Popen] = None
        if setup == "store":
            self.run_checked(["htam-test-store", "build", "htam-data"])
        elif setup == "daemon":
            self.endpoint = f"tcp://127.0.0.1:{free_port()}"
            self.log = open(os.path.join(self.tmp, "htamd.log"), "wb")
            self.daemon = subprocess.Popen(
                [os.path.join(bindir, "htamd"), "--general.data_dir",
                 os.path.join(self.tmp, "daemon-data"), "--server.bind", self.endpoint,
                 "--eval.backends", "cpu"], cwd=self.tmp, env=self.env, stdout=self.log,
                stderr=subprocess.STDOUT)
            self.wait_ready()

    def run_checked(self, argv: List[str]) -> None:
        r = subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True, text=True,
                           timeout=COMMAND_TIMEOUT_S)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stdout}{r.stderr}")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.daemon.poll() is not None:
                break
            r = subprocess.run(["htam", "--connect", self.endpoint, "--timeout-ms", "500",
                                "status"], cwd=self.cwd, env=self.env, capture_output=True)
            if r.returncode == 0:
                return
            time.sleep(0.3)
        with open(os.path.join(self.tmp, "htamd.log"), errors="replace") as f:
            raise RuntimeError("htamd did not come up:\n" + f.read())

    def run(self, cmd: str) -> Tuple[int, List[str]]:
        cmd = strip_comment(cmd).replace(DOC_ENDPOINT, self.endpoint)
        r = subprocess.run(["/bin/bash", "-o", "pipefail", "-c", cmd], cwd=self.cwd,
                           env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=COMMAND_TIMEOUT_S)
        return r.returncode, r.stdout.replace(self.endpoint, DOC_ENDPOINT).splitlines()

    def close(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def documents() -> List[str]:
    names = sys.argv[1:] if __name__ == "__main__" and len(sys.argv) > 1 else (
        ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir(
            os.path.join(ROOT, "docs")) if n.endswith(".md")))
    return [os.path.abspath(n) if os.path.exists(n) else os.path.join(ROOT, n) for n in names]


def failures_of(path: str) -> Tuple[int, List[str]]:
    """(commands run, what went wrong) for one document."""
    blocks = blocks_of(path)
    if not blocks:
        return 0, []
    rel = os.path.relpath(path, ROOT)
    folder = Folder(blocks[0].setup)
    problems, count = [], 0
    try:
        for b in blocks:
            for cmd, shown in b.steps():
                count += 1
                code, actual = folder.run(cmd)
                first_word = strip_comment(cmd).split()[0] if strip_comment(cmd) else ""
                shows_error = bool(shown) and shown[0].startswith(first_word + " ") and \
                    ": " in shown[0]
                where = f"{rel}:{b.line}: $ {cmd}"
                if code != 0 and not shows_error:
                    problems.append(f"{where}\n  exit status {code}:\n    " +
                                    "\n    ".join(actual[-30:]))
                elif shown and not matches(shown, actual):
                    problems.append(f"{where}\n  the doc shows:\n    " + "\n    ".join(shown) +
                                    "\n  it prints:\n    " + "\n    ".join(actual))
    finally:
        folder.close()
    return count, problems


class DocTest(unittest.TestCase):
    def test_marked_commands_run_as_shown(self):
        total = 0
        for path in documents():
            with self.subTest(doc=os.path.relpath(path, ROOT)):
                n, problems = failures_of(path)
                total += n
                self.assertEqual(problems, [], "\n\n".join(problems))
        self.assertGreater(total, 0, "no marked command in the docs")


class MatchTest(unittest.TestCase):
    def test_wildcards(self):
        self.assertTrue(matches(["a", "...", "d"], ["a", "b", "c", "d"]))
        self.assertTrue(matches(["a ... z"], ["a middle z"]))
        self.assertFalse(matches(["a", "d"], ["a", "b", "d"]))
        self.assertFalse(matches(["a ... z"], ["a middle y"]))
        self.assertTrue(matches(["x  "], ["x"]))

    def test_transcript_steps(self):
        b = Block("x.md", 1, "plain", ["$ echo a \\", "> b", "a b", "$ true  # nothing", ""])
        self.assertEqual(b.steps(), [("echo a b", ["a b"]), ("true  # nothing", [""])])
        self.assertEqual(strip_comment("echo '#' x  # c"), "echo '#' x")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
