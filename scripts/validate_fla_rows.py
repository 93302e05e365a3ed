"""The rows files of scripts/validate-fla (its --jsonl: one JSON object a line, a judged
tensor, a refusal or an --explain-policy row) read back and tabulated: `--table` (one
session's rows, tensor by tensor: docs/validating-fla/tables.md) and `--status` (each case at
its latest rows across sessions: the table of docs/validating-fla.md). Imported by
scripts/validate-fla, which runs and judges the ops; nothing here runs an op or judges one.
"""
import json
import os

# FLA's asserted ratio per tensor in its own tests (tests/ops/test_gated_delta.py and
# siblings, fla-core 0.6.0: assert_close(name, ref, tri, ratio)): 0.005 for outputs
# and final states, 0.008 for most gradients, 0.02 for dg/dbeta. Used only to print FLA's
# verdict next to ours; ttrcheck's verdict never depends on it.
FLA_RATIO = {"o": 0.005, "ht": 0.005, "dq": 0.008, "dk": 0.008, "dv": 0.008, "dh0": 0.008,
             "dg": 0.02, "dbeta": 0.02}


def range_excused(r):
    """A pass with an infinite ratio: an excused range finding (NaN/Inf where the exact
    intermediates leave the dtype's range, gate/range.hpp)."""
    return r["verdict"] == "pass" and r["max_ratio"] == float("inf")


def fla_fails(r):
    """FLA's own criterion on a row: relative RMS at or over FLA_RATIO for its tensor, unless
    the greatest absolute difference is at most 1e-6 (its assert_close); False without one."""
    return r.get("rel_rms") is not None and not (
        r["rel_rms"] < FLA_RATIO.get(r["tensor"], 0.008) or (r.get("max_abs") or 0) <= 1e-6)


class RowsError(Exception):
    """A rows file --table or --status cannot read: its message names the file and line."""


TEXT_KEYS = ("op", "suite", "case", "dtype", "direction", "tensor", "error")
ROW_KEYS = {"explain": ("op", "suite", "case", "dtype", "direction", "explain", "best"),
            "error": ("op", "suite", "dtype", "error"),
            "tensor": ("op", "suite", "case", "dtype", "direction", "tensor", "max_ratio", "verdict")}


def read_rows(paths):
    """Every row of these JSONL rows files (--jsonl's), as (file, row) in order; a file that
    is missing or not a regular file, a line that is not a JSON object, or a row without
    the keys of its kind raises RowsError naming the file and line."""
    out = []
    for p in paths:
        if not os.path.isfile(p):
            raise RowsError(f"{p}: not a regular file")
        with open(p, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise RowsError(f"{p}:{n}: not JSON ({e.msg})") from None
                kind = "explain" if isinstance(r, dict) and "explain" in r else \
                    "error" if isinstance(r, dict) and "error" in r else "tensor"
                missing = [k for k in ROW_KEYS[kind] if not isinstance(r, dict) or k not in r]
                if missing:
                    raise RowsError(f"{p}:{n}: not a validate-fla row ({kind} row without {', '.join(missing)})")
                bad = [k for k in ROW_KEYS[kind] if k in TEXT_KEYS and not isinstance(r[k], str)]
                bad += [k for k in ("runner", "note") if k in r and not isinstance(r[k], str)]
                if kind == "error" and not isinstance(r.get("case", ""), (str, type(None))):
                    bad.append("case")
                if kind == "tensor":
                    if not isinstance(r["max_ratio"], (int, float)) or isinstance(r["max_ratio"], bool):
                        bad.append("max_ratio")
                    if r["verdict"] not in ("pass", "FAIL", "absent"):
                        bad.append("verdict")
                    bad += [k for k in ("rel_rms", "max_abs") if r.get(k) is not None and (
                        not isinstance(r[k], (int, float)) or isinstance(r[k], bool))]
                if kind == "explain":
                    if not (isinstance(r["explain"], dict) and all(
                            isinstance(v, dict) and isinstance(v.get("max_ratio"), (int, float))
                            and isinstance(v.get("passed"), bool) for v in r["explain"].values())):
                        bad.append("explain")
                    if r["best"] is not None and not isinstance(r["best"], str):
                        bad.append("best")
                if bad:
                    raise RowsError(f"{p}:{n}: not a validate-fla row (bad {', '.join(bad)})")
                out.append((p, r))
    return out


def table(paths):
    """One Markdown row per op x dtype x suite x direction x tensor: ttrcheck's verdict and
    worst ratio over the suite's cases (and which case), FLA's relative RMS (worst over the
    same cases) and FLA's verdict at its own ratio; then one row per refusal."""
    rows = [r for _, r in read_rows(paths)]
    groups, errors = {}, []
    explained = [r for r in rows if "explain" in r]
    rows = [r for r in rows if "explain" not in r]
    for r in rows + explained:
        if r.get("runner"):  # not the GPU: the op's name says where it ran, and groups apart
            r["op"] = f"{r['op']} ({r['runner']})"
    for r in rows:
        if "error" in r:
            errors.append(r)
        elif r["verdict"] != "absent":
            groups.setdefault((r["op"], r["dtype"], r["suite"], r["direction"], r["tensor"]), []).append(r)
    out = ["| op | dtype | suite | dir | tensor | ttrcheck | worst ratio (case) | FLA rel. RMS | FLA verdict (ratio) | note |",
           "|" + "---|" * 10]
    for (op, dtype, suite, direction, tensor), rs in sorted(groups.items()):
        bad = [r for r in rs if r["verdict"] == "FAIL"]
        w = max(rs, key=lambda r: r["max_ratio"])
        lim = FLA_RATIO.get(tensor, 0.008)
        rels = [r["rel_rms"] for r in rs if r.get("rel_rms") is not None]
        nan = any(x != x for x in rels)
        rel = max((x for x in rels if x == x), default=None)
        fla_fail = [r for r in rs if fla_fails(r)]
        rng = [r for r in rs if range_excused(r)]  # said as such
        verdict = f"FAIL {len(bad)}/{len(rs)}" if bad else f"pass {len(rs)}/{len(rs)}"
        if rng:
            verdict += f" ({len(rng)} range)"
        fla = "-" if rel is None else (f"FAIL {len(fla_fail)}/{len(rs)}" if fla_fail else "pass")
        notes = sorted({r["note"] for r in rs if r.get("note")} | ({"NaN in FLA's ratio"} if nan else set()))
        out.append(f"| {op} | {dtype} | {suite} | {direction[:3]} | {tensor} | {verdict} | {w['max_ratio']:.3g} "
                   f"({w['case']}) | {'-' if rel is None else f'{rel:.2e}'} | {fla} ({lim}) | {'; '.join(notes)} |")
    if errors:
        out += ["", "| op | dtype | suite | FLA raised, or why not judged |", "|---|---|---|---|"]
        for r in sorted(errors, key=lambda r: (r["op"], r["dtype"], r["suite"])):
            msg = " ".join(r["error"].split()).replace("|", "\\|")  # one table line, whatever FLA printed
            where = r["suite"] + (f".{r['case']}" if r.get("case") else "")
            out.append(f"| {r['op']} | {r['dtype']} | {where} | {msg[:150]} |")
    if explained:
        # --explain-policy rows: each policy's worst ratio (pass/FAIL; "FAIL at 0" where it failed
        # at a row whose exact value is 0, which the subnormal floor alone bounds) and the
        # smallest policy it passes.
        policies = list(dict.fromkeys(p for r in explained for p in r["explain"]))
        out += ["", "| op | dtype | case | dir | " + " | ".join(policies) + " | explained by |",
                "|" + "---|" * (5 + len(policies))]
        for r in sorted(explained, key=lambda r: (r["op"], r["dtype"], r["suite"], r["case"], r["direction"])):
            cells = ["–" if p not in r["explain"] else f"{r['explain'][p]['max_ratio']:.3g} "
                     + ("pass" if r['explain'][p]['passed'] else "FAIL at 0" if r['explain'][p].get("floor") else "FAIL")
                     for p in policies]
            out.append(f"| {r['op']} | {r['dtype']} | {r['suite']}.{r['case']} | {r['direction'][:3]} | "
                       + " | ".join(cells) + f" | {r['best'] or 'none'} |")
    return "\n".join(out)


STATUS_SUITES = ("tiny", "standard", "stress", "varlen", "production")


def status(paths):
    """One Markdown row per op x dtype (and runner), one column per suite: where each stands
    at its latest judgment. `paths` are rows files oldest first; a case judged again in a
    later file (re-captured, or re-judged under a mended model) counts at its latest rows
    only, per tensor and direction, and one whose latest attempt raised counts as raised. A
    cell: ttrcheck's verdict over the suite's judged cases (failing tensors of judged ones),
    the worst ratio and its tensor, the smallest policy --explain-policy named for failing
    cases, how many tensors FLA's own criterion fails, how many cases only raised, and on a
    failure the file its latest rows came from."""
    latest, raised, explained = {}, {}, {}
    order_of = {p: i for i, p in enumerate(paths)}
    for p, r in read_rows(paths):
        order, tag = order_of[p], os.path.splitext(os.path.basename(p))[0]
        case = (r["op"], r.get("runner"), r["dtype"], r["suite"], r.get("case"))
        if "explain" in r:
            explained[case + (r["direction"],)] = r.get("best")
        elif "error" in r:
            raised[case] = order
        elif r["verdict"] != "absent":
            latest[case + (r["direction"], r["tensor"])] = (order, tag, r)
    judged_at = {}  # per case, and per suite (key[:4]) for an error row that names no case
    for k, (order, _, _) in latest.items():
        for key in (k[:5], k[:4] + (None,)):
            judged_at[key] = max(order, judged_at.get(key, -1))
    cells = {}
    for k, (order, tag, r) in latest.items():  # a case whose latest attempt raised is counted as raised only
        if raised.get(k[:5], -1) <= judged_at[k[:5]]:
            cells.setdefault(k[:4], []).append((k, tag, r))
    for case, order in raised.items():  # raised at its latest attempt: no later judgment
        if judged_at.get(case, -1) < order:
            cells.setdefault(case[:4], [])
    def cell(key):
        rows = cells.get(key)
        if rows is None:
            return "–"
        stuck = [c for c, o in raised.items() if c[:4] == key and judged_at.get(c, -1) < o]
        parts = []
        if rows:
            cases = len({k[4] for k, _, _ in rows})
            bad = [(k, tag, r) for k, tag, r in rows if r["verdict"] == "FAIL"]
            rng = [r for _, _, r in rows if range_excused(r)]
            finite = [x for x in rows if not range_excused(x[2])]
            head = f"FAIL {len(bad)} of {len(rows)} tensors" if bad else "pass"
            head += f", {cases} case{'s' if cases > 1 else ''}"
            if finite:
                w = max(finite, key=lambda x: x[2]["max_ratio"])[2]
                head += f", worst {w['max_ratio']:.3g} {w['tensor']}"
            if rng:
                head += f" ({len(rng)} range)"
            parts.append(head)
            best = {explained.get(k[:5] + (k[5],)) for k, _, _ in bad} - {None}
            if bad and best:
                parts.append("explained by " + "/".join(sorted(best)))
            fla = [r for _, _, r in rows if fla_fails(r)]
            if fla:
                parts.append(f"FLA's criterion fails {len(fla)}")
            if bad:
                parts.append("as of " + ", ".join(sorted({tag for _, tag, _ in bad})))
        if stuck:  # an error row without a case stands for the whole suite
            n = sum(c[4] is not None for c in stuck)
            parts.append("raised" + (f" on {n} case{'s' if n > 1 else ''}" if n == len(stuck) else ""))
        return "; ".join(parts)
    out = []
    for runner in sorted({k[1] for k in cells}, key=lambda x: x or ""):
        out += ["", f"**{runner or 'GPU'}**", "", "| op | dtype | " + " | ".join(STATUS_SUITES) + " |",
                "|" + "---|" * (2 + len(STATUS_SUITES))]
        for op, dtype in sorted({(k[0], k[2]) for k in cells if k[1] == runner}):
            out.append(f"| {op} | {dtype} | " + " | ".join(cell((op, runner, dtype, s)) for s in STATUS_SUITES) + " |")
    return "\n".join(out[1:])
