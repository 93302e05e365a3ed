#!/usr/bin/env python3
"""Where each profiled kernel's warps wait, from an ncu report, as short text.

  ncu -i REP --page source --print-source cuda --csv > source.csv
  ncu -i REP --page source --print-source sass --csv > sass.csv
  ncu -i REP --page raw --csv > raw.csv
  python3 bench/gpu/ncu_hotspots.py source.csv raw.csv [--sass sass.csv] [--top 25] [--lines LISTING]

Prints, per kernel: its stall reasons (the raw page's
smsp__average_warp_latency_issue_stalled_* / smsp__pcsamp_* ratios, largest
first), its `--top` source lines by warp-stall samples with the line's text, and
from the SASS view its samples by opcode and its `--top` instructions. The
report itself is usually too large to bring back from the lent GPU machine; this
is what scripts/device-gdn-bench keeps of it. (The CUDA view of the lent machine's
ncu, with CUDA 13.0, came back with source text and no metric columns on
2026-12-06; the SASS view carries the samples per instruction whatever the source
correlation.) `--lines` takes `nvdisasm -gi -c` listings of the profiled binary's
cubins (built with -lineinfo) and puts a source line to the SASS view's
instructions: each kernel is the listing's function whose instructions have the
same opcodes in the same order, an instruction's line the listing's last
`//## File` comment before it (the kernel's own line; the innermost inlined one
beside it), and the samples are also summed per source line: the per-line view the
CUDA page did not carry.
"""
import argparse
import csv
import os
import re
import sys


def source_hotspots(path, top):
    """Rows of `ncu --page source --print-source cuda --csv`: per kernel a
    'Function Name' row (where the version writes one), per source file a 'File Path'
    or 'File Name' row, a header row (its line
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
            if head in ("File Path", "File Name") and len(row) > 1:
                file, cols = row[1], None
                continue
            if "Source" in row and any(c.startswith("Warp Stall Sampling (All") for c in row):
                header = {name: i for i, name in reversed(list(enumerate(row)))}  # first of repeated names
                line_col = header.get("Line No", header.get("#", header.get("# Line", 0)))
                stall_col = next(i for n, i in header.items() if n.startswith("Warp Stall Sampling (All"))
                cols = (line_col, stall_col, header["Source"])
                continue
            if cols is None:
                continue
            line_col, stall_col, source_col = cols
            if max(line_col, stall_col) >= len(row) or not row[line_col].strip().isdigit():
                continue
            try:
                n = float(row[stall_col].replace(",", "").strip() or 0)
            except ValueError:
                continue
            if n <= 0:  # lines without samples (comments, declarations) rank nowhere
                continue
            text = row[source_col].strip() if source_col < len(row) else ""
            where = f"{(file or '?').rsplit('/', 1)[-1]}:{row[line_col].strip()}"
            # (without kernel rows, as the lent machine's ncu writes the page: per file)
            out.setdefault(kernel or (file or "?"), []).append((n, where, text))
    if not out:
        print("(no source rows with warp-stall samples found: the CUDA view carried no metric columns)")
    for kernel, rows in out.items():
        total = sum(r[0] for r in rows) or 1.0
        print(f"== {kernel[:110]}\n   warp-stall samples by source line (top {top}, {total:.0f} in all)")
        for n, where, text in sorted(rows, key=lambda r: -r[0])[:top]:
            print(f"   {100 * n / total:5.1f}%  {where:>24}  {text[:100]}")


KERNEL_LABELS = ("Kernel Name", "Function Name", "Function", "Kernel")


def opcode(instruction):
    """The opcode of a SASS line, without its predicate and modifiers: '@!P0 LDG.E.64 R2, …' → LDG."""
    tok = instruction.split()
    if tok and tok[0].startswith("@"):
        tok = tok[1:]
    return tok[0].split(".")[0] if tok else "?"


LISTING_FUNCTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
LISTING_LINE = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
LISTING_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;?\s*$")


def read_listings(paths):
    """`nvdisasm -gi -c` listings: {function: [(opcode, kernel line, innermost line), ...]}
    in instruction order, a line 'file:N' (file without its folders) or '?'. Before an
    instruction, its `//## File` comments run from the innermost inlined call out to the
    function's own line; an instruction without comments of its own is the previous one's
    statement."""
    out = {}
    for path in paths:
        fn, pending, current = None, [], []
        with open(path, errors="replace") as f:
            for line in f:
                m = LISTING_FUNCTION.match(line)
                if m:
                    fn, pending, current = m.group(1), [], []
                    out[fn] = []
                    continue
                m = LISTING_LINE.match(line)
                if m:
                    pending.append(f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}")
                    continue
                m = LISTING_INSTRUCTION.match(line)
                if m and fn is not None:
                    if pending:
                        current, pending = pending, []
                    out[fn].append((opcode(m.group(2)), current[-1] if current else "?",
                                    current[0] if current else "?"))
    return out


def listing_of(instructions, listings):
    """The listing's function whose opcodes begin with these instructions' opcodes in
    order, and no more than trailing padding after them (None if none does)."""
    ops = [opcode(text) for _, text, _ in instructions]
    for fn, rows in listings.items():
        if len(rows) >= len(ops) and [r[0] for r in rows[:len(ops)]] == ops and \
                all(r[0] in ("NOP", "BRA") for r in rows[len(ops):]):
            return fn
    return None


def sass_hotspots(path, top, listings=None):
    """Rows of `ncu --page source --print-source sass --csv`: a kernel's name row
    (first cell one of KERNEL_LABELS), a header row with 'Address', 'Source' and the
    'Warp Stall Sampling (All Samples)' column, then one row per instruction. Columns
    are found by name. Prints, per kernel, the samples by opcode and the `top`
    instructions; with `listings` (read_listings) each instruction's source line and
    the `top` source lines by samples."""
    out, every = {}, {}
    kernel, cols = "?", None
    with open(path, newline="", errors="replace") as f:
        for row in csv.reader(f):
            if not row:
                continue
            head = row[0].strip().strip('"')
            if head in KERNEL_LABELS and len(row) > 1:
                kernel, cols = row[1], None
                continue
            if "Address" in row and "Source" in row and any(c.startswith("Warp Stall Sampling (All") for c in row):
                stall = next(i for i, n in enumerate(row) if n.startswith("Warp Stall Sampling (All"))
                cols = (row.index("Address"), row.index("Source"), stall)
                continue
            if cols is None or max(cols) >= len(row):
                continue
            try:
                n = float(row[cols[2]].replace(",", "").strip() or 0)
            except ValueError:
                continue
            every.setdefault(kernel, []).append((row[cols[0]].strip(), row[cols[1]].strip(), n))
            if n > 0:
                out.setdefault(kernel, []).append((n, row[cols[0]].strip(), row[cols[1]].strip()))
    if not out:
        print("(no SASS rows with warp-stall samples found)")
    for kernel, rows in out.items():
        total = sum(r[0] for r in rows) or 1.0
        by_op = {}
        for n, _, text in rows:
            by_op[opcode(text)] = by_op.get(opcode(text), 0.0) + n
        ops = ", ".join(f"{o} {100 * v / total:.1f}%" for o, v in sorted(by_op.items(), key=lambda kv: -kv[1])[:10])
        print(f"== {kernel[:110]}\n   warp-stall samples by opcode ({total:.0f} in all): {ops}")
        where = {}  # address -> (kernel line, innermost line)
        if listings is not None:
            fn = listing_of(every[kernel], listings)
            if fn is None:
                print("   (no function of the listings has these instructions: no source lines)")
            else:
                where = {addr: r[1:] for (addr, _, _), r in zip(every[kernel], listings[fn])}
        print(f"   top {top} instructions:")
        for n, addr, text in sorted(rows, key=lambda r: -r[0])[:top]:
            at = f"  [{where[addr][0]}" + (f" < {where[addr][1]}]" if where[addr][1] != where[addr][0] else "]") \
                if addr in where else ""
            print(f"   {100 * n / total:5.1f}%  {addr:>8}  {text[:80]}{at}")
        if where:
            by_line = {}
            for n, addr, _ in rows:
                by_line[where[addr][0]] = by_line.get(where[addr][0], 0.0) + n
            print(f"   top {top} source lines (the kernel's own, inlined calls counted at their call):")
            for line, n in sorted(by_line.items(), key=lambda kv: -kv[1])[:top]:
                print(f"   {100 * n / total:5.1f}%  {line}")


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
    ap.add_argument("--sass", help="the SASS view (--print-source sass --csv)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--lines", nargs="+", metavar="LISTING",
                    help="nvdisasm -gi -c listings of the binary's cubins: source lines for the SASS view")
    a = ap.parse_args()
    for p in (a.source_csv, a.raw_csv, a.sass, *(a.lines or [])):
        if p and not os.path.isfile(p):
            print(f"ncu_hotspots: '{p}' is not a file", file=sys.stderr)
            return 2
    if a.raw_csv:
        stall_reasons(a.raw_csv)
    source_hotspots(a.source_csv, a.top)
    if a.sass:
        sass_hotspots(a.sass, a.top, read_listings(a.lines) if a.lines else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
