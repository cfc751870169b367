#!/usr/bin/env python3
"""Writes the synthetic order world (configs/world/synthetic-order/): kernel families whose knobs
pay only in a set order, and a made-up table of their outcomes. SYNTHETIC: no kernel was compiled
or timed; every row is computed from the rule below. It exists to ask one question the measured
world cannot: when the same state is reached by different moves and the right next move depends
on the one before, does the memory's transition history pick it?

Two kinds of family, identical in everything the state key sees (one category, the same shapes,
sizes and arithmetic intensity; only the knobs' rule differs):

  tile-first    SMEM (shared-memory-tiling, on-chip-reuse-tiling) x e; then DBUF
                (double-buffering, latency-hiding) x p, but only on the tiled kernel (x trap
                without it: nothing to overlap, only the extra synchronisation); VEC
                (unroll-and-vector-width, parameter-tuning) is always x trap here (the rows it
                would widen are never aligned).
  align-first   ALIGN (aligned-body-masked-tail, global-memory-access) x e; then VEC x p, but
                only on the aligned kernel (x trap without it); DBUF always x trap.

and in both BLOCK (block-size-choice, parallel-mapping-occupancy) x b in any order. After the
first good move (SMEM or ALIGN, the same speedup e) a tile-first and an align-first kernel are
in the same state; only the direction before tells DBUF from VEC. Within 5 % of the best needs
all three good moves: e x p x b against e x p (b >= 1.06).

Usage: synth_order.py [OUT_DIR]   (default: configs/world/synthetic-order)
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", ".."))
TRAP = 0.7
CATEGORY = "synthetic-order"
# (name, kind): kinds alternate so that development and held-out families hold both.
FAMILIES = [("ord_a", "tile"), ("ord_b", "align"), ("ord_c", "tile"), ("ord_d", "align"),
            ("ord_e", "tile"), ("ord_f", "align"), ("ord_g", "tile"), ("ord_h", "align")]
SPLIT = {"development": ["ord_a", "ord_b", "ord_c", "ord_d", "ord_e", "ord_f"],
         "held_out": ["ord_g", "ord_h"]}
# Shapes: the same in every family. (id, M, N, e, p, b): the factors of the good moves.
SHAPES = [("m1024_n1024", 1024, 1024, 1.30, 2.20, 1.10),
          ("m4096_n512", 4096, 512, 1.25, 2.00, 1.12),
          ("m512_n4096", 512, 4096, 1.35, 2.40, 1.08),
          ("m2048_n2048", 2048, 2048, 1.20, 1.90, 1.15),
          ("m256_n8192", 256, 8192, 1.40, 2.60, 1.07),
          ("m8192_n256", 8192, 256, 1.28, 2.10, 1.09)]
BASE_US = 100.0

KNOBS = {
    "SMEM": ("shared-memory-tiling", "on-chip-reuse-tiling",
             "stage row tiles in shared memory"),
    "ALIGN": ("aligned-body-masked-tail", "global-memory-access",
              "peel the unaligned head so the body's rows are 16-byte aligned"),
    "DBUF": ("double-buffering", "latency-hiding",
             "overlap the next tile's load with this tile's work (needs the tiles)"),
    "VEC": ("unroll-and-vector-width", "parameter-tuning",
            "4-wide loads and stores (pays only on aligned rows)"),
    "BLOCK": ("block-size-choice", "parallel-mapping-occupancy", "256 instead of 128 threads"),
}
ORDER = {"tile": ["SMEM", "DBUF", "VEC", "BLOCK"], "align": ["ALIGN", "VEC", "DBUF", "BLOCK"]}


def speedup(kind: str, k: dict, e: float, p: float, b: float) -> float:
    enable, pay, trap = (("SMEM", "DBUF", "VEC") if kind == "tile" else ("ALIGN", "VEC", "DBUF"))
    s = 1.0
    if k[enable]:
        s *= e
    if k[pay]:
        s *= p if k[enable] else TRAP
    if k[trap]:
        s *= TRAP
    if k["BLOCK"]:
        s *= b
    return s


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main(argv) -> int:
    out = argv[1] if len(argv) > 1 else os.path.join(REPO, "configs", "world", "synthetic-order")
    rows = []
    for name, kind in FAMILIES:
        fdir = os.path.join(out, "families", name)
        write(os.path.join(fdir, "family.json"), json.dumps({
            "name": name,
            "category": CATEGORY,
            "description": "SYNTHETIC family of the order world (tools/bench/world/synth_order.py): "
                           "y[m,n] = f(x[m,n]) over a row-major M x N fp32 matrix; its knobs pay "
                           "only in a set order",
            "dims": ["M", "N"],
            "inputs": [{"name": "x", "dtype": "f32", "shape": ["M", "N"],
                        "init": {"dist": "uniform", "low": -1.0, "high": 1.0}}],
            "outputs": [{"name": "y", "dtype": "f32", "shape": ["M", "N"]}],
            "tolerance": {"rtol": 1e-4, "atol": 1e-4},
            "flops": "4*M*N",
            "bytes": "8*M*N",
            "template": "kernel.cu",
            "synthetic": True,
            "kind": kind,
        }, indent=1) + "\n")
        write(os.path.join(fdir, "kernel.cu"),
              "// SYNTHETIC family: never compiled or timed. Its table is computed by\n"
              "// tools/bench/world/synth_order.py; this file only satisfies the family format.\n")
        knobs = [{"name": n, "values": [0, 1], "baseline": 0, "strategy": KNOBS[n][0],
                  "direction": KNOBS[n][1], "note": KNOBS[n][2]}
                 for n in ORDER[kind]]
        write(os.path.join(fdir, "knobs.json"), json.dumps({"knobs": knobs}, indent=1) + "\n")
        write(os.path.join(fdir, "shapes.json"), json.dumps({"shapes": [
            {"id": sid, "dims": {"M": m, "N": n}, "dtype": "f32",
             "why": f"good moves x{e} (enabler), x{p} (payoff after it), x{b} (block)"}
            for sid, m, n, e, p, b in SHAPES]}, indent=1) + "\n")
        names = [k["name"] for k in knobs]
        for sid, m, n, e, p, b in SHAPES:
            task = f"world_{name}_{sid}"
            for vals in itertools.product([0, 1], repeat=len(names)):
                k = dict(zip(names, vals))
                k.setdefault("SMEM", 0)
                k.setdefault("ALIGN", 0)
                sp = speedup(kind, k, e, p, b)
                rows.append({
                    "family": name, "shape": sid, "task": task, "dims": {"M": m, "N": n},
                    "dtype": "f32", "knobs": {x: k[x] for x in names},
                    "variant": "-".join(f"{x.lower()}{k[x]}" for x in names),
                    "status": "Ok", "baseline_us": BASE_US, "median_us": BASE_US / sp,
                    "spread_us": 0.0, "speedup": sp, "device": "synthetic",
                    "diagnostics": "synthetic row (tools/bench/world/synth_order.py)",
                    "synthetic": True})
    write(os.path.join(out, "split.json"), json.dumps(dict(
        about="SYNTHETIC order world (tools/bench/world/synth_order.py): development families "
              "(tuning allowed) and held-out ones (reporting only), each set holding both kinds.",
        **SPLIT), indent=1) + "\n")
    with gzip.GzipFile(os.path.join(out, "table.jsonl.gz"), "wb", mtime=0) as f:
        for r in rows:
            f.write((json.dumps(r, sort_keys=True) + "\n").encode())
    print(f"{out}: {len(FAMILIES)} families, {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
