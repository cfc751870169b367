#!/usr/bin/env python3
"""Functions longer than a screen or two, checked on every C++ source of the tree.

A function of more than MAX_LINES lines (from the line of its name to its closing brace) is
several steps that want names of their own. The ones that are still that long are listed in
EXCEPTIONS by file and name; a new one fails the check, and so does a listed one that has become
short enough (its entry must go), so the list only shrinks. Tests are not checked. Lambdas and
local classes count as part of the function around them.
Exit status 1 lists every violation as path:line.

  check_functions.py [--root DIR]   check the tree at DIR (default: the repository of this script)
  check_functions.py --list         print every function over the limit with its length
  check_functions.py --self-test    plant long functions in a scratch tree and show they are caught
"""
import argparse
import os
import re
import sys
import tempfile

from check_calls import SKIP_DIRS, SOURCE_EXT, TOPS, code_only, is_test

MAX_LINES = 150

# Functions still over MAX_LINES, by file and name (qualified as written at the definition):
# none; the set stays so that the check's reporting of a stale entry keeps its one place.
EXCEPTIONS = set()

_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof",
             "noexcept", "static_assert", "defined", "__attribute__", "requires"}


def _header_kind(header):
    """What a '{' opens, from the code since the previous ';', '{' or '}': ('function', name),
    ('scope', '') for a namespace, class, struct, union, enum or extern block, ('block', '')."""
    h = header.strip()
    if re.search(r"\bnamespace\b", h) or re.match(r'extern\s*""', h):
        return "scope", ""
    if "(" not in h:
        return ("scope", "") if re.search(r"\b(class|struct|union|enum)\b", h) else ("block", "")
    # A class whose base list holds a template argument with parentheses is rare; a function's
    # header ends with ')' followed by qualifiers, a trailing return type or an initializer list.
    if re.search(r"\b(class|struct|union)\b[^(]*$", h.split("(")[0]) and ":" in h.split("(")[0]:
        return "scope", ""
    if re.search(r"=\s*$", h) or h.endswith(","):
        return "block", ""
    # The name: the identifier (qualified, operator or destructor) right before the first '('
    # that is not a keyword's.
    for m in re.finditer(r"((?:[A-Za-z_]\w*\s*::\s*)*(?:operator\s*[^\s(]+|~?[A-Za-z_]\w*))\s*\(",
                         h):
        name = re.sub(r"\s+", "", m.group(1))
        if name.split("::")[-1] in _KEYWORDS:
            return "block", ""
        if name.startswith("[") or name in {"[]", "]"}:
            continue
        return "function", name
    return "block", ""


def long_functions(text):
    """(name, first line, lines) of every function in C++ `text` longer than MAX_LINES lines."""
    code = code_only(text)
    out = []
    stack = []  # per open brace: ('function', name, line) / ('scope',) / ('block',)
    in_function = 0
    last = 0  # where the header of the next brace starts
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == ";" and not in_function:
            last = i + 1
        elif c == "{":
            if in_function:
                stack.append(("block",))
            else:
                kind, name = _header_kind(code[last:i])
                if kind == "function":
                    header = code[last:i]
                    at = header.find(name.split("::")[-1])
                    first = line - header[at:].count("\n") if at >= 0 else line
                    stack.append(("function", name, first))
                    in_function += 1
                else:
                    stack.append((kind,))
            last = i + 1
        elif c == "}":
            if stack:
                top = stack.pop()
                if top[0] == "function":
                    in_function -= 1
                    n = line - top[2] + 1
                    if n > MAX_LINES:
                        out.append((top[1], top[2], n))
            if not in_function:
                last = i + 1
    return out


def check(root):
    """Every function over the limit under root as (path, line, name, lines)."""
    found = []
    for top in TOPS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for fn in sorted(filenames):
                if not fn.endswith(SOURCE_EXT):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
                if is_test(rel):
                    continue
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                    for name, first, n in long_functions(fh.read()):
                        found.append((rel, first, name, n))
    return found


def self_test():
    """Short functions, classes and namespaces pass; a long function is caught by name, also one
    with a long lambda inside or a member defined in its class."""
    body = "  x += 1;\n" * (MAX_LINES - 2)
    ok_files = {
        "daemon/a.cc": "namespace n {\nstruct S {\n  int f() { return 1; }\n};\n"
                       "int g(int x) {\n" + "  x += 1;\n" * (MAX_LINES - 3) + "  return x;\n}\n}\n",
        "daemon/a_test.cc": "void T() {\n" + body * 2 + "}\n",
        "daemon/t.h": "class C : public B<int(int)> {\n  int v_ = 0;\n};\n"
                      "const int k[] = {1, 2, 3};\n",
    }
    planted = [("daemon/b.cc", "Status Impl::Run(const Job& j) const {\n" + body + "  return {};\n"
                "  // a comment with a } brace\n}\n", "Impl::Run"),
               ("tools/c.cc", "int main() {\n  auto f = [&] {\n" + body + "  };\n  return 0;\n}\n",
                "main"),
               ("base/d.h", "class D {\n  void M() {\n    if (x) {\n" + body + "    }\n  }\n};\n",
                "M")]
    with tempfile.TemporaryDirectory() as root:
        for path, text in ok_files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as fh:
                fh.write(text)
        clean = check(root)
        if clean:
            print("self-test: a clean tree was reported:", clean)
            return 1
        for path, text, name in planted:
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as fh:
                fh.write(text)
            bad = check(root)
            if [(p, f) for p, _, f, _ in bad] != [(path, name)]:
                print("self-test: %s: expected %s, got %s" % (path, name, bad))
                return 1
            os.remove(full)
        print("self-test: %d planted long function(s) caught, clean tree passes" % len(planted))
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    found = check(args.root)
    if args.list:
        for rel, first, name, n in sorted(found, key=lambda f: -f[3]):
            print("%5d  %s:%d %s" % (n, rel, first, name))
        return 0
    seen = set()
    bad = 0
    for rel, first, name, n in found:
        if (rel, name) in EXCEPTIONS:
            seen.add((rel, name))
            continue
        print("%s:%d: %s is %d lines (more than %d): cut it into named steps"
              % (rel, first, name, n, MAX_LINES))
        bad += 1
    for rel, name in sorted(EXCEPTIONS - seen):
        print("%s: %s is listed as over %d lines, which it no longer is: remove the entry from %s"
              % (rel, name, MAX_LINES, os.path.basename(__file__)))
        bad += 1
    if bad:
        return 1
    print("functions: none over %d lines beside %d known exception(s)"
          % (MAX_LINES, len(EXCEPTIONS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
