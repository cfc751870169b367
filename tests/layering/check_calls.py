#!/usr/bin/env python3
"""Calls that only base/ (and the sandbox) may make, checked on every C++ source of the tree.

Starting processes (the fork and exec families, posix_spawn, system, popen), renaming files
(rename(), std::filesystem::rename: a file or folder written beside its target and renamed over
it is base/file.h's WriteFileAtomic, PublishFile or PublishDir; a finished one moved is MovePath), finding the
running binary through "/proc/self/exe" (base/paths.h) and parsing a command line or an option
file with Boost.Program_options directly (base/args.h) each have one home in base/. The sandbox
(daemon/eval/sandbox.cc and memory_cgroup.cc, the runner's start in
daemon/eval/runner/runner_spawn.cc) starts its
processes itself: what it does between fork and exec is the sandbox. Tests may do anything.
Comments and string literals are not code, except that "/proc/self/exe" is found in strings too.
Exit status 1 lists every violation as path:line.

  check_calls.py [--root DIR]   check the tree at DIR (default: the repository of this script)
  check_calls.py --self-test    plant calls in a scratch tree and show that each is caught
"""
import argparse
import os
import re
import sys
import tempfile

BANNED = [
    ("starts a process (base/process.h)",
     re.compile(r"(?<![\w.>])(?:::)?(fork|vfork|execv|execvp|execvpe|execve|execl|execlp|execle|"
                r"fexecve|posix_spawnp?|system|popen)\s*\(")),
    ("renames a file (base/file.h: WriteFileAtomic, PublishFile, PublishDir, MovePath)",
     re.compile(r"(?<![\w.>])(?:(?:std::)?(?:filesystem|fs)::|std::|::)?rename(?:at2?)?\s*\(")),
    ("finds the running binary (base/paths.h: ExecutablePath)", re.compile(r"/proc/self/exe")),
    ("parses options with Boost directly (base/args.h)",
     re.compile(r"\b(command_line_parser|parse_command_line|parse_config_file|po::store|"
                r"program_options::store)\b")),
]

# Where the calls are at home.
ALLOWED_PREFIXES = ("base/",)
ALLOWED_FILES = {"daemon/eval/sandbox.cc", "daemon/eval/memory_cgroup.cc",
                 "daemon/eval/runner/runner_spawn.cc"}

# Known sites still open, each named by file and the call's kind (the first words of its
# message): none. A new site fails the check; a listed one that no longer calls fails it too.
EXCEPTIONS = set()

SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".cu", ".hip", ".inc", ".c")
SKIP_DIRS = {".git", "build", "node_modules", "__pycache__"}
TOPS = ("base", "schema", "sdk", "backends", "daemon", "tools")


def is_test(rel):
    name = os.path.basename(rel)
    return rel.startswith("tests/") or name.endswith(("_test.cc", "_test.h")) or "/testdata/" in rel


def code_only(text):
    """text with comments blanked and string/char literals emptied, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check(root, exceptions=frozenset()):
    """Every violation under root as (path, line number, what), and the exceptions seen."""
    found, seen = [], set()
    for top in TOPS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for fn in sorted(filenames):
                if not fn.endswith(SOURCE_EXT):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
                if rel.startswith(ALLOWED_PREFIXES) or rel in ALLOWED_FILES or is_test(rel):
                    continue
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                    raw = fh.read()
                code = code_only(raw).split("\n")
                lines = raw.split("\n")
                for what, pattern in BANNED:
                    text = lines if "/proc/self/exe" in pattern.pattern else code
                    for no, line in enumerate(text, 1):
                        if "/proc/self/exe" in pattern.pattern and line.lstrip().startswith("//"):
                            continue
                        if not pattern.search(line):
                            continue
                        kind = what.split(" (")[0]
                        if (rel, kind) in exceptions:
                            seen.add((rel, kind))
                            continue
                        found.append((rel, no, what))
    return found, seen


def self_test():
    """A clean scratch tree passes; every planted call is reported; the allowed places pass."""
    with tempfile.TemporaryDirectory() as root:
        files = {
            "base/process.cc": "int f() { return fork() + execv(a, b); }\n",
            "base/file.cc": "int g() { return rename(a, b); }\n",
            "base/paths.cc": 'auto p = read_symlink("/proc/self/exe");\n',
            "daemon/eval/sandbox.cc": "pid_t p = fork(); execve(a, b, c);\n",
            "daemon/eval/evaluator.cc": "// fork() in a comment; \"rename(\" in a string\n"
                                        'auto s = "execv(";\nint x = my_fork(1) + obj.rename(2);\n',
            "daemon/eval/frame_test.cc": "pid_t p = fork();\n",
        }
        planted = [("daemon/eval/evaluator.cc", "pid_t p = fork();\n"),
                   ("tools/bench/bench.cc", "execv(argv[0], argv);\n"),
                   ("daemon/memory/store.cc", "std::rename(tmp.c_str(), path.c_str());\n"),
                   ("tools/cli/exchange.cc", "fs::rename(tmp, out, ec);\n"),
                   ("tools/bench/bench.cc", 'auto e = read_symlink("/proc/self/exe");\n'),
                   ("daemon/config/config.cc", "po::store(po::parse_config_file(in, t), vm);\n"),
                   ("backends/cpu/cpu_backend.cc", "FILE* f = popen(cmd, \"r\");\n")]
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as fh:
                fh.write(text)
        clean, _ = check(root)
        if clean:
            print("self-test: a clean tree was reported:", clean)
            return 1
        for path, text in planted:
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "a") as fh:
                fh.write(text)
            bad, _ = check(root)
            if not any(p == path for p, _, _ in bad):
                print("self-test: planted call not caught: %s: %s" % (path, text.strip()))
                return 1
            with open(full) as fh:
                kept = fh.read()[:-len(text)]
            with open(full, "w") as fh:
                fh.write(kept)
        print("self-test: %d planted call(s) caught, clean tree passes" % len(planted))
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    found, seen = check(args.root, EXCEPTIONS)
    for rel, no, what in found:
        print("%s:%d: %s: only base/ and the sandbox may" % (rel, no, what))
    for rel, kind in sorted(EXCEPTIONS - seen):
        print("%s: listed as an exception for \"%s\", which it no longer does: remove the entry "
              "from %s" % (rel, kind, os.path.basename(__file__)))
    if found or EXCEPTIONS - seen:
        return 1
    print("calls: process starts, renames, /proc/self/exe and option parsing only in base/ and "
          "the sandbox (%d known exception(s))" % len(EXCEPTIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
