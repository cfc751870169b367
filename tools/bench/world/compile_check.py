#!/usr/bin/env python3
"""Compiles every distinct variant source of the world families with nvcc (flags of the CUDA
plugin: -O3, sm_90a, -shared -fPIC) and prints one line per failure; exit 1 when one fails to
compile that is not listed as an expected compile error. Usage:
  compile_check.py [--families DIR] [--only FAMILY ...] [-j N] [--nvcc nvcc]"""
import argparse, concurrent.futures as cf, os, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "sdk", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from htam_bench import world_families as wf

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default=wf.DEFAULT_FAMILIES)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--limit", type=int, default=0, help="at most this many sources per family")
    a = ap.parse_args()
    inc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "sdk", "include")
    jobs = {}
    for fam in wf.load_families(a.families, a.only):
        n = 0
        for dt in sorted({s.dtype for s in fam.shapes}):
            for asg in fam.space():
                if a.limit and n >= a.limit:
                    break
                jobs[(fam.name, dt, wf.variant_id(asg))] = wf.source(fam, asg, dt)
                n += 1
    tmp = tempfile.mkdtemp(prefix="world-cc-")
    def comp(key):
        src = os.path.join(tmp, "_".join(key) + ".cu")
        with open(src, "w") as f:
            f.write(jobs[key])
        r = subprocess.run([a.nvcc, "-shared", "-Xcompiler", "-fPIC", "-O3",
                            "-gencode=arch=compute_90a,code=sm_90a", "-I", inc, "-o", src + ".so", src],
                           capture_output=True, text=True)
        return key, r.returncode, r.stderr
    bad = 0
    with cf.ThreadPoolExecutor(a.j) as ex:
        for key, rc, err in ex.map(comp, sorted(jobs)):
            if rc != 0:
                bad += 1
                print("FAIL", *key, err.strip().splitlines()[-3:] if err else "")
    print(f"{len(jobs)} sources, {bad} failed to compile")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
