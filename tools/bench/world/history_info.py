"""How much a step's history says about its success, over the transition records of an `htam
export` (JSON Lines): I(success; previous direction | direction), I(success; step index |
direction) and I(success; previous direction | direction, step index), in bits, each against the
same statistic with the conditioning variable shuffled among records of the same stratum
(permutation null: median and 95th percentile of 200 shuffles). Success: Ok and more than 1 %
faster than before. Usage: python3 history_info.py EXPORT.jsonl...  (docs/benchmarks.md, "Trust,
error bars and poisoning")."""
import json, math, random, sys, collections
MODE = "prev"
def load(path):
    recs = []
    for line in open(path):
        j = json.loads(line)
        if j.get("type") != "transition":
            continue
        r = j["record"]
        st = r.get("status", "Ok")
        if st == "InfraError":
            continue
        b, a = r.get("speedup_before", 1.0), r.get("speedup_after", 0.0)
        ok = st == "Ok" and b > 0 and a > 0 and a / b > 1.01
        h = r.get("history") or []
        if MODE == "prev|step":  # the previous direction given the direction and the step index
            recs.append(((r["direction_id"], len(h)), h[-1] if h else 0, ok))
        else:
            recs.append((r["direction_id"], (h[-1] if h else 0) if MODE == "prev" else len(h), ok))
    return recs
def cmi(recs):
    n = len(recs)
    c_d = collections.Counter(d for d, _, _ in recs)
    c_dp = collections.Counter((d, p) for d, p, _ in recs)
    c_dy = collections.Counter((d, y) for d, _, y in recs)
    c_dpy = collections.Counter(recs)
    s = 0.0
    for (d, p, y), k in c_dpy.items():
        s += k / n * math.log2(k * c_d[d] / (c_dp[(d, p)] * c_dy[(d, y)]))
    return s
def null(recs, reps=200, seed=1):
    rng = random.Random(seed)
    by = collections.defaultdict(list)
    for d, p, y in recs:
        by[d].append((p, y))
    out = []
    for _ in range(reps):
        rs = []
        for d, xs in by.items():
            ps = [p for p, _ in xs]
            rng.shuffle(ps)
            rs += [(d, p, y) for p, (_, y) in zip(ps, xs)]
        out.append(cmi(rs))
    out.sort()
    return out[len(out) // 2], out[int(0.95 * len(out))]
for path in sys.argv[1:]:
  for MODE in ("prev", "step", "prev|step"):
    recs = load(path)
    med, p95 = null(recs)
    what = {"prev": "previous direction", "step": "step index",
            "prev|step": "previous direction | step index,"}[MODE]
    print(f"{path}: {len(recs)} steps, success {sum(y for *_, y in recs)/len(recs):.2f}, "
          f"I(success; {what} | direction) = {cmi(recs):.3f} bits; shuffled: median "
          f"{med:.3f}, 95th percentile {p95:.3f}")
