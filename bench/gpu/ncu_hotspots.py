#!/usr/bin/env python3
"""Where each profiled kernel's warps wait, from an ncu report, as short text.

  ncu -i REP --page source --print-source cuda --csv > source.csv
  ncu -i REP --page raw --csv > raw.csv
  python3 bench/gpu/ncu_hotspots.py source.csv raw.csv [--top 25]

Prints, per kernel: its stall reasons (the raw page's
smsp__average_warp_latency_issue_stalled_* / smsp__pcsamp_* ratios, largest
first) and its `--top` source lines by warp-stall samples, with the line's
text. The report itself is usually too large to bring back from the lent GPU
machine; this is what scripts/device-gdn-bench keeps of it.
"""
import argparse
import csv
import re
import sys


def source_hotspots(path, top):
    """Rows of `ncu --page source --csv`: per kernel, a 'Function Name' row, a
    header row, then one row per source line (the layout varies between ncu
    versions, so columns are found by name)."""
    out = {}
    kernel, header = None, None
    with open(path, newline="", errors="replace") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0].strip('"') in ("Function Name", "Kernel Name") and len(row) > 1:
                kernel, header = row[1], None
                continue
            if any("Warp Stall Sampling (All" in c for c in row):
                header = row
                continue
            if header is None or kernel is None or len(row) != len(header):
                continue
            rec = dict(zip(header, row))
            samples = next((rec[c] for c in header if c.startswith("Warp Stall Sampling (All")), "0")
            try:
                n = float(samples.replace(",", "") or 0)
            except ValueError:
                continue
            line = rec.get("# Line", rec.get("Line", rec.get("#", "?")))
            text = rec.get("Source", "")
            out.setdefault(kernel, []).append((n, line, text.strip()))
    for kernel, rows in out.items():
        total = sum(r[0] for r in rows) or 1.0
        print(f"== {kernel[:110]}\n   warp-stall samples by source line (top {top}, {total:.0f} in all)")
        for n, line, text in sorted(rows, key=lambda r: -r[0])[:top]:
            print(f"   {100 * n / total:5.1f}%  {line:>5}  {text[:110]}")


def stall_reasons(path, top=12):
    """The raw page: one header row of metric names, one unit row, one row per kernel."""
    with open(path, newline="", errors="replace") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 3:
        print("(raw page empty)")
        return
    names = rows[0]
    pat = re.compile(r"^smsp__average_warp(s)?_(latency_)?issue_stalled_(\w+?)(_per_issue_active)?\.ratio$")
    kcol = next((i for i, n in enumerate(names) if n in ("Kernel Name", "Function Name")), None)
    for r in rows[2:]:
        if len(r) != len(names):
            continue
        reasons = []
        for i, n in enumerate(names):
            m = pat.match(n)
            if m and "not_issued" not in n:
                try:
                    reasons.append((float(r[i].replace(",", "")), m.group(3)))
                except ValueError:
                    pass
        if not reasons:
            continue
        name = r[kcol] if kcol is not None else "?"
        top_r = ", ".join(f"{x} {v:.2f}" for v, x in sorted(reasons, reverse=True)[:top])
        print(f"== {name[:110]}\n   cycles a warp waits per issued instruction, by reason: {top_r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source_csv")
    ap.add_argument("raw_csv", nargs="?")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    if a.raw_csv:
        stall_reasons(a.raw_csv)
    source_hotspots(a.source_csv, a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
