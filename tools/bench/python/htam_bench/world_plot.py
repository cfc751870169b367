"""Line plots as standalone SVG (no plotting library): the geometric-mean best speedup after each
step, one line per policy. Used by `htam-bench world bench` and `htam-bench quality`."""

from __future__ import annotations

from typing import Dict, List

COLORS = {"full": "#d62728", "cold": "#1f77b4", "empty": "#1f77b4", "no-history": "#ff7f0e",
          "flat": "#2ca02c", "ucb": "#9467bd", "random": "#7f7f7f", "oracle": "#000000"}
EXTRA_COLORS = ["#e377c2", "#17becf", "#bcbd22", "#8c564b"]


def svg_curves(curves: Dict[str, List[float]], title: str, xlabel: str = "steps",
               ylabel: str = "geomean best speedup") -> str:
    """curves: policy -> value after step 0, 1, ..., in legend order; "" when there is none.
    The oracle (a bound) is drawn dashed."""
    if not curves or not any(curves.values()):
        return ""
    b = max(len(c) for c in curves.values()) - 1
    if b < 1:
        return ""
    top = max(max(c) for c in curves.values() if c) * 1.05
    W, H, L, R, T, B = 640, 400, 60, 130, 40, 50
    x = lambda k: L + (W - L - R) * k / b  # noqa: E731
    y = lambda v: T + (H - T - B) * (1 - (v - 1.0) / max(top - 1.0, 1e-9))  # noqa: E731
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
         f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
         f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
         f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">{xlabel}</text>',
         f'<text x="15" y="{(T + H - B) / 2}" transform="rotate(-90 15 {(T + H - B) / 2})" '
         f'text-anchor="middle">{ylabel}</text>']
    for k in range(0, b + 1, 2):
        s.append(f'<text x="{x(k)}" y="{H - B + 15}" text-anchor="middle">{k}</text>')
    n = 5
    for i in range(n + 1):
        v = 1.0 + (top - 1.0) * i / n
        s.append(f'<text x="{L - 5}" y="{y(v) + 4}" text-anchor="end">{v:.2f}</text>')
        s.append(f'<line x1="{L}" y1="{y(v)}" x2="{W - R}" y2="{y(v)}" stroke="#eee"/>')
    for i, (p, curve) in enumerate(curves.items()):
        if not curve:
            continue
        c = COLORS.get(p, EXTRA_COLORS[i % len(EXTRA_COLORS)])
        pts = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in enumerate(curve))
        dash = ' stroke-dasharray="5,3"' if p == "oracle" else ""
        s.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        s.append(f'<line x1="{W - R + 10}" y1="{T + 10 + 18 * i}" x2="{W - R + 30}" '
                 f'y2="{T + 10 + 18 * i}" stroke="{c}" stroke-width="2"{dash}/>')
        s.append(f'<text x="{W - R + 35}" y="{T + 14 + 18 * i}">{p}</text>')
    s.append("</svg>")
    return "\n".join(s) + "\n"
