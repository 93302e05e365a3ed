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
    """Rows of `ncu --page source --print-source cuda --csv`: per kernel a
    'Function Name' row, per source file a 'File Path' row, a header row (its line
    column 'Line No' or '#', a 'Source' column, the metrics), then one row per
    source line (rows with an empty line number are SASS under the line before:
    skipped). Columns are found by name: the layout varies between ncu versions."""
    out = {}
    kernel, file, cols = None, None, None  # cols: (line, stall samples, source) of the header row
    with open(path, newline="", errors="replace") as f:
        for row in csv.reader(f):
            if not row:
                continue
            head = row[0].strip().strip('"')
            if head in ("Function Name", "Kernel Name") and len(row) > 1:
                kernel, cols = row[1], None
                continue
            if head == "File Path" and len(row) > 1:
                file, cols = row[1], None
                continue
            if "Source" in row and any(c.startswith("Warp Stall Sampling (All") for c in row):
                header = {name: i for i, name in reversed(list(enumerate(row)))}  # first of repeated names
                line_col = header.get("Line No", header.get("#", header.get("# Line", 0)))
                stall_col = next(i for n, i in header.items() if n.startswith("Warp Stall Sampling (All"))
                cols = (line_col, stall_col, header["Source"])
                continue
            if cols is None or kernel is None:
                continue
            line_col, stall_col, source_col = cols
            if max(line_col, stall_col) >= len(row) or not row[line_col].strip().isdigit():
                continue
            try:
                n = float(row[stall_col].replace(",", "").strip() or 0)
            except ValueError:
                continue
            text = row[source_col].strip() if source_col < len(row) else ""
            where = f"{(file or '?').rsplit('/', 1)[-1]}:{row[line_col].strip()}"
            out.setdefault(kernel, []).append((n, where, text))
    if not out:
        print("(no source rows with warp-stall samples found)")
    for kernel, rows in out.items():
        total = sum(r[0] for r in rows) or 1.0
        print(f"== {kernel[:110]}\n   warp-stall samples by source line (top {top}, {total:.0f} in all)")
        for n, where, text in sorted(rows, key=lambda r: -r[0])[:top]:
            print(f"   {100 * n / total:5.1f}%  {where:>24}  {text[:100]}")


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
