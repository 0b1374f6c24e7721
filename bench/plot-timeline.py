#!/usr/bin/env python3
"""Draws SETs per 100 ms over time, one line per timeline file (`ms count` per line, as
bench/kvload's `follow` writes them), as an SVG: the throughput of a slot move under load
(bench/slot-move.sh), the thesis's Figure 4-10 shape. No dependencies.

    bench/plot-timeline.py OUT.svg LABEL=FILE [LABEL=FILE ...] [--mark SECONDS]
"""
import sys

W, H, PAD = 760, 320, 50
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def main(argv):
    out, series, mark = argv[0], [], None
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == "--mark":
            mark = float(args.pop(0))
        else:
            label, path = a.split("=", 1)
            pts = [tuple(map(int, l.split())) for l in open(path) if l.strip()]
            series.append((label, [(ms / 1000, n * 10) for ms, n in pts]))
    tmax = max(t for _, pts in series for t, _ in pts) or 1
    ymax = max(y for _, pts in series for _, y in pts) or 1
    x = lambda t: PAD + (W - 2 * PAD) * t / tmax
    y = lambda v: H - PAD - (H - 2 * PAD) * v / ymax
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<line x1="{PAD}" y1="{H-PAD}" x2="{W-PAD}" y2="{H-PAD}" stroke="black"/>',
           f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H-PAD}" stroke="black"/>',
           f'<text x="{W/2}" y="{H-12}" text-anchor="middle">seconds</text>',
           f'<text x="14" y="{H/2}" transform="rotate(-90 14 {H/2})" text-anchor="middle">SETs per second (100 ms windows)</text>']
    for i in range(5):
        v = ymax * i / 4
        svg.append(f'<text x="{PAD-6}" y="{y(v)+4:.0f}" text-anchor="end">{v/1000:.0f}K</text>')
    for i in range(int(tmax) + 1):
        svg.append(f'<text x="{x(i):.0f}" y="{H-PAD+16}" text-anchor="middle">{i}</text>')
    if mark is not None:
        svg.append(f'<line x1="{x(mark):.1f}" y1="{PAD}" x2="{x(mark):.1f}" y2="{H-PAD}" stroke="gray" stroke-dasharray="4 3"/>')
        svg.append(f'<text x="{x(mark)+4:.0f}" y="{PAD+12}" fill="gray">move starts</text>')
    for i, (label, pts) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{path}"/>')
        svg.append(f'<text x="{W-PAD-150}" y="{PAD+16*i}" fill="{c}">{label}</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
