"""scripts/validate-fla --judge: runs captured elsewhere (here: NumPy ports through
ttrcheck.harness.execute, as --capture saves FLA's runs on the GPU machine) judged by the
script without torch: the same rows as judging in process, exit 1 on a failing run,
exit 2 and one line on a file that is not a captured run."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from test_harness_numpy import linear_attn
from ttrcheck.fla import NATIVE
from ttrcheck.harness import NumpyBackend, execute, validate_numpy

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "validate-fla")


def capture(fn, folder, name, lean=False):
    os.makedirs(folder, exist_ok=True)
    for e in execute(fn, NumpyBackend(), "linear_attn", suites=["tiny"], dtypes=["fp32"], form="sequential",
                     adapter=NATIVE, with_oracle=False):
        e.fn_name = name
        e.save(os.path.join(folder, f"{name}.{e.suite}.{e.case}.{e.dtype}.npz"), lean=lean)


def judge(*args):
    return subprocess.run([sys.executable, SCRIPT, "--judge", *args], capture_output=True, text=True)


@pytest.mark.parametrize("lean", [False, True])
def test_judged_rows_are_the_in_process_rows(tmp_path, lean):
    """Also from lean captures (the inputs made again from the seed, as --capture saves them)."""
    def with_dk_bug(**kw):
        return linear_attn(**kw, bug="dk")
    for fn, name, rc in ((linear_attn, "good_port", 0), (with_dk_bug, "dk_bug", 1)):
        folder = str(tmp_path / name)
        capture(fn, folder, name, lean)
        if lean:  # the tiny cases' inputs are exact in fp32: none of them was saved
            for f in os.listdir(folder):
                with np.load(os.path.join(folder, f)) as z:
                    assert not any(k.startswith(("inputs/", "backward_inputs/")) for k in z.files), f
        rows = str(tmp_path / f"{name}.jsonl")
        p = judge(folder, "--jsonl", rows)
        assert p.returncode == rc, p.stdout + p.stderr
        got = [json.loads(line) for line in open(rows)]
        inline = validate_numpy(fn, "linear_attn", suites=["tiny"], dtypes=["fp32"], form="sequential")
        keys = ("suite", "case", "dtype", "direction", "tensor", "max_ratio", "verdict")
        assert sorted(tuple(r[k] for k in keys) for r in got) == \
            sorted(tuple(getattr(r, k) for k in keys) for r in inline.rows)
        assert all(r["op"] == name for r in got)
        assert {(r["direction"], r["tensor"]) for r in got if r["verdict"] == "FAIL"} == \
            (set() if rc == 0 else {("backward", "dk")})


def test_a_file_that_is_not_a_captured_run_exits_2_in_one_line(tmp_path):
    bad = tmp_path / "chunk_kda.tiny.basic.bf16.npz"
    bad.write_bytes(b"PK\x03\x04 truncated")
    p = judge(str(bad))
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "chunk_kda.tiny.basic.bf16.npz: not a captured run" in p.stderr


def test_a_run_the_oracle_cannot_take_is_one_error_row_and_the_others_are_judged(tmp_path):
    # As stress.value_edges cast to fp16 on the GPU: an input the op saw as +Inf.
    from ttrcheck.harness import Execution
    folder = tmp_path / "cap"
    capture(linear_attn, str(folder), "port")
    files = sorted(folder.glob("*.npz"))
    assert len(files) == 2
    e = Execution.load(str(files[0]))
    e.inputs["v"] = e.inputs["v"].copy()
    e.inputs["v"].flat[0] = float("inf")
    e.save(str(files[0]))
    rows = tmp_path / "rows.jsonl"
    p = judge(str(folder), "--jsonl", str(rows))
    assert p.returncode == 1, p.stdout + p.stderr
    got = [json.loads(line) for line in open(rows)]
    errors = [r for r in got if "error" in r]
    assert len(errors) == 1 and errors[0]["case"] == e.case
    assert errors[0]["error"].startswith("not judged:") and "'v'" in errors[0]["error"]
    judged = {r["case"] for r in got if "error" not in r}
    assert judged == {Execution.load(str(files[1])).case}


def test_rows_of_another_runner_say_so_and_are_tabled_apart(tmp_path):
    # The same runs judged twice: once as a GPU capture, once as a capture the Triton
    # interpreter made (capture.json names the runner): the table keeps two groups.
    import re
    runner = "Triton interpreter, CPU"
    for where, meta in (("gpu", None), ("cpu", {"keep_guard": False, "seed": 0, "runner": runner})):
        folder = tmp_path / where
        capture(linear_attn, str(folder), "port")
        if meta:
            (folder / "capture.json").write_text(json.dumps(meta))
        p = judge(str(folder), "--jsonl", str(tmp_path / f"{where}.jsonl"))
        assert p.returncode == 0, p.stdout + p.stderr
    gpu = [json.loads(line) for line in open(tmp_path / "gpu.jsonl")]
    cpu = [json.loads(line) for line in open(tmp_path / "cpu.jsonl")]
    assert cpu and all(r["runner"] == runner for r in cpu) and all("runner" not in r for r in gpu)
    t = subprocess.run([sys.executable, SCRIPT, "--table", str(tmp_path / "gpu.jsonl"), str(tmp_path / "cpu.jsonl")],
                       capture_output=True, text=True)
    assert t.returncode == 0, t.stderr

    def runs(prefix):  # the runs each group of the table counts ("pass n/n")
        return sum(int(m.group(1)) for line in t.stdout.splitlines() if line.startswith(prefix)
                   for m in [re.search(r"\| pass \d+/(\d+)", line)])
    assert runs("| port |") == len(gpu) and runs(f"| port ({runner}) |") == len(cpu)


def test_table_marks_failures_at_exact_zero_rows(tmp_path):
    """--table: an explanation row's policy that failed at a row whose exact value is 0
    (the floor-bound failures of ttrcheck.explain_policy's notes) reads "FAIL at 0";
    other failures "FAIL"; rows written before the flag existed read as before."""
    rows = tmp_path / "rows.jsonl"
    explain = {"fp32": {"max_ratio": 2.0e4, "passed": False, "tensors": {"dh0": 2.0e4}, "floor": True},
               "tf32": {"max_ratio": 12.0, "passed": False, "tensors": {"o": 12.0}, "floor": False},
               "fp16": {"max_ratio": 3.0, "passed": True, "tensors": {"o": 3.0}},
               "bf16": {"max_ratio": 90.0, "passed": False, "tensors": {"o": 90.0}}}
    row = {"op": "chunk_linear_attn", "suite": "varlen", "case": "empty_sequences", "dtype": "bf16",
           "direction": "backward", "explain": explain, "best": "fp16", "seconds": 1.0}
    rows.write_text(json.dumps(row) + "\n")
    p = subprocess.run([sys.executable, SCRIPT, "--table", str(rows)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("| chunk_linear_attn"))
    assert "| 2e+04 FAIL at 0 | 12 FAIL | 3 pass | 90 FAIL | fp16 |" in line, line


def script_on_numpy(monkeypatch):
    """scripts/validate-fla as a module, its device stood in for by a NumPy backend."""
    import importlib.util
    import types
    from importlib.machinery import SourceFileLoader
    loader = SourceFileLoader("validate_fla_script", SCRIPT)
    vf = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(vf)
    fake = types.ModuleType("ttrcheck.torch")
    fake.TorchBackend = lambda device: NumpyBackend()
    monkeypatch.setitem(sys.modules, "ttrcheck.torch", fake)
    return vf


def test_after_a_fault_that_loses_the_cuda_context_the_rest_goes_to_fresh_processes(monkeypatch, tmp_path):
    # On the H100 (2026-12-06) one chunk_gla case faulted ("misaligned address") and every
    # later case of the process raised the same error, reported as if it were theirs. The
    # device and its lost context are stood in for here: a NumPy backend, and a probe that
    # reports the context lost once the first case has raised.
    import argparse
    vf = script_on_numpy(monkeypatch)
    faulted = []
    monkeypatch.setattr(vf, "context_lost", lambda device: bool(faulted) and device == "cuda")

    def faults_first(**kw):
        if not faulted:
            faulted.append(True)
            raise RuntimeError("CUDA error: misaligned address")
        return linear_attn(**kw)

    a = argparse.Namespace(seed=0, cases=None, forward_only=False, device="cuda")
    extra = dict(layer="linear_attn", form="sequential", adapter=NATIVE)
    runs, errors, left = vf.executions(faults_first, "port", "tiny", "fp32", a, extra, with_oracle=False)
    assert runs == [] and left == ["with_state"]
    assert [(e["case"], e["error"]) for e in errors] == [("basic", "RuntimeError: CUDA error: misaligned address")]
    # The rest: that case, then the op's other suite/dtype pairs, then the other ops, each a
    # fresh process of this script with the caller's other options.
    cmds = vf.resume_argv(["--jsonl", "r.jsonl", "--capture", "cap"], "port", "tiny", "fp32", left,
                          [("varlen", "fp32")], ["chunk_gla"])
    assert [c[2:] for c in cmds] == [
        ["--jsonl", "r.jsonl", "--capture", "cap", "--ops", "port", "--runs", "tiny/fp32", "--cases", "with_state"],
        ["--jsonl", "r.jsonl", "--capture", "cap", "--ops", "port", "--runs", "varlen/fp32"],
        ["--jsonl", "r.jsonl", "--capture", "cap", "--ops", "chunk_gla"]]
    assert cmds[0][:2] == [sys.executable, os.path.abspath(SCRIPT)]
    assert vf.resume_argv([], "port", "tiny", "fp32", [], [], []) == []
    # main() wired up: the pair's rows first, then the three processes, in order.
    import subprocess as sp
    spawned = []
    monkeypatch.setattr(vf, "resolve", lambda name: (faults_first, dict(extra)))
    monkeypatch.setattr(vf.subprocess, "run", lambda cmd: spawned.append(cmd[2:]) or sp.CompletedProcess(cmd, 0))
    cap = tmp_path / "cap"
    monkeypatch.setattr(sys, "argv", ["validate-fla", "--ops", "chunk_linear_attn,chunk_gla", "--runs",
                                      "tiny/fp32,tiny/fp64", "--keep-guard", "--capture", str(cap)])
    faulted[:] = []
    a.device = "cuda"
    assert vf.main() == 1  # the faulting case is an error row
    assert sorted(os.listdir(cap)) == ["capture.json"]  # no run saved: the fault came first
    tail = ["--ops", "chunk_linear_attn,chunk_gla", "--runs", "tiny/fp32,tiny/fp64", "--keep-guard", "--capture", str(cap)]
    assert spawned == [tail + ["--ops", "chunk_linear_attn", "--runs", "tiny/fp32", "--cases", "with_state"],
                       tail + ["--ops", "chunk_linear_attn", "--runs", "tiny/fp64"],
                       tail + ["--ops", "chunk_gla"]]
    # On the CPU (or with the context alive) a raise loses nothing: the next case runs.
    faulted[:] = []
    a.device = "cpu"
    runs, errors, left = vf.executions(faults_first, "port", "tiny", "fp32", a, extra, with_oracle=False)
    assert left is None and [e["case"] for e in errors] == ["basic"] and [r.case for r in runs] == ["with_state"]


def test_an_error_row_is_in_the_rows_file_before_the_next_case_runs(monkeypatch, tmp_path):
    # On the H100 (2026-12-06, call 21) a lane's chunk_gla fp16 single_tokens failed to
    # compile, and the lane's time limit stopped it during the next case: the error row,
    # written only after the suite's last case, was lost. It is written as it comes now.
    vf = script_on_numpy(monkeypatch)
    monkeypatch.setattr(vf, "context_lost", lambda device: False)
    rows = tmp_path / "rows.jsonl"
    seen = []

    def first_refused(**kw):
        if not seen:
            seen.append("raised")
            raise RuntimeError("CompilationError: K >= 16")
        seen.append(rows.read_text())  # what a lane stopped here would have left
        return linear_attn(**kw)

    extra = dict(layer="linear_attn", form="sequential", adapter=NATIVE)
    monkeypatch.setattr(vf, "resolve", lambda name: (first_refused, dict(extra)))
    monkeypatch.setattr(sys, "argv", ["validate-fla", "--ops", "chunk_linear_attn", "--runs", "tiny/fp32",
                                      "--keep-guard", "--capture", str(tmp_path / "cap"), "--jsonl", str(rows)])
    assert vf.main() == 1  # the refused case is an error row
    assert len(seen) == 2
    before_next = [json.loads(ln) for ln in seen[1].splitlines()]
    assert [(r["case"], r["error"]) for r in before_next] == [("basic", "RuntimeError: CompilationError: K >= 16")]
    assert [json.loads(ln) for ln in rows.read_text().splitlines()] == before_next  # written once


def test_status_counts_each_case_at_its_latest_judgment(tmp_path):
    """--status: one cell per op x dtype x suite; a case re-judged in a later file (a mended
    model, a new capture) counts there only, an error row counts until a later file judges
    that case (or, naming no case, any case of the suite), a pass at an infinite ratio is an
    excused range finding, and FLA's criterion and --explain-policy's verdicts are counted."""
    def row(case, tensor, ratio, verdict, rel=1e-3, **kw):
        return dict(op="op", suite="standard", case=case, dtype="fp32", direction="backward", tensor=tensor,
                    max_ratio=ratio, verdict=verdict, rel_rms=rel, max_abs=1.0, **kw)
    old = [row("a", "dg", 1e38, "FAIL"), row("a", "dq", 2.0, "pass"), row("b", "dq", 3.0, "pass"),
           dict(op="op", suite="standard", case="c", dtype="fp32", error="CompilationError: K >= 16"),
           dict(op="op", suite="stress", dtype="fp32", error="NotImplementedError: no backward"),
           row("x", "dq", 9e3, "FAIL", rel=1e-1) | {"suite": "varlen"},
           dict(op="op", suite="varlen", case="x", dtype="fp32", direction="backward", explain={}, best="tf32")]
    new = [row("a", "dg", 1.5, "pass"), row("c", "dq", 4.0, "pass"), row("c", "dk", float("inf"), "pass"),
           row("s", "dq", 0.5, "pass") | {"suite": "stress"}]
    files = []
    for name, rows in (("old", old), ("new", new)):
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = subprocess.run([sys.executable, SCRIPT, "--status", *map(str, files)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    line = next(l for l in p.stdout.splitlines() if l.startswith("| op | fp32 |"))
    tiny, standard, stress, varlen, production = [c.strip() for c in line.split("|")[3:8]]
    assert (tiny, production) == ("–", "–")
    assert standard == "pass, 3 cases, worst 4 dq (1 range)"                # a at 1.5 now; c judged, not raised
    assert stress == "pass, 1 case, worst 0.5 dq"                            # the suite-wide error superseded
    assert varlen == "FAIL 1 of 1 tensors, 1 case, worst 9e+03 dq; explained by tf32; " \
                     "FLA's criterion fails 1; as of old"
    # The other order: the old rows are the latest, so a's dg fails and c raised.
    p = subprocess.run([sys.executable, SCRIPT, "--status", *map(str, files[::-1])], capture_output=True, text=True)
    standard = next(l for l in p.stdout.splitlines() if l.startswith("| op | fp32 |")).split("|")[4].strip()
    assert standard == "FAIL 1 of 3 tensors, 2 cases, worst 1e+38 dg; as of old; raised on 1 case"


def test_rows_files_that_are_not_rows_exit_2_in_one_line(tmp_path):
    """--table and --status on a missing file, a folder, or lines mutated from real rows
    (bytes flipped, keys dropped, values of the wrong type): exit 0 or 2 with one line on
    stderr, never a traceback."""
    import random
    good = [json.dumps(dict(op="op", suite="tiny", case="basic", dtype="fp32", direction="forward", tensor="o",
                            max_ratio=0.5, verdict="pass", rel_rms=1e-3, max_abs=1e-3)),
            json.dumps(dict(op="op", suite="tiny", case="basic", dtype="fp32", error="RuntimeError: x")),
            json.dumps(dict(op="op", suite="tiny", case="basic", dtype="fp32", direction="forward",
                            explain={"fp32": {"max_ratio": 0.5, "passed": True, "tensors": {"o": 0.5}}},
                            best="fp32"))]
    for args in (["--status", str(tmp_path / "missing.jsonl")], ["--table", str(tmp_path)]):
        p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not a regular file" in p.stderr
    rng = random.Random(5)
    for i in range(60):
        lines = list(good)
        j = rng.randrange(len(lines))
        r = json.loads(lines[j])
        how = i % 3
        if how == 0:    # a byte flipped
            b = bytearray(lines[j].encode())
            b[rng.randrange(len(b))] = rng.randrange(32, 127)
            lines[j] = b.decode(errors="replace")
        elif how == 1:  # a key dropped
            r.pop(rng.choice(sorted(r)))
            lines[j] = json.dumps(r)
        else:           # a value of the wrong type
            r[rng.choice(sorted(r))] = rng.choice([None, [], {}, "x", 1, True])
            lines[j] = json.dumps(r)
        f = tmp_path / f"m{i}.jsonl"
        f.write_text("\n".join(lines) + "\n")
        for mode in ("--table", "--status"):
            p = subprocess.run([sys.executable, SCRIPT, mode, str(f)], capture_output=True, text=True)
            assert p.returncode in (0, 2) and "Traceback" not in p.stderr, (lines[j], p.stderr)
            if p.returncode == 2:
                assert p.stderr.count("\n") == 1 and f"m{i}.jsonl:" in p.stderr, p.stderr


def test_the_auto_oracle_gives_the_mpfr_oracles_verdicts_and_ratios(tmp_path):
    """--oracle-tier auto (double-double where its estimated own error is negligible, MPFR
    slices elsewhere) judges captured runs to the same verdicts as MPFR-256, and ratios
    equal to 1e-9 relative (the two oracles differ by at most about a float64 ulp:
    docs/oracle-tiers.md); its rows say which oracle."""
    def with_dk_bug(**kw):
        return linear_attn(**kw, bug="dk")
    folder = str(tmp_path / "dk_bug")
    capture(with_dk_bug, folder, "dk_bug")
    got = {}
    for tier in ("mpfr", "auto"):
        rows = str(tmp_path / f"{tier}.jsonl")
        p = judge(folder, "--jsonl", rows, "--oracle-tier", tier)
        assert p.returncode == 1, p.stdout + p.stderr
        got[tier] = {(r["case"], r["direction"], r["tensor"]): r for r in map(json.loads, open(rows))}
    assert got["mpfr"].keys() == got["auto"].keys() and got["mpfr"]
    for k, m in got["mpfr"].items():
        a = got["auto"][k]
        assert a["verdict"] == m["verdict"], k
        assert abs(a["max_ratio"] - m["max_ratio"]) <= 1e-9 * max(abs(m["max_ratio"]), 1e-300), (k, a, m)
        assert "oracle_tier" not in m and a["oracle_tier"] == "auto" and a["note"].endswith("oracle auto")
    assert {k[1:] for k, r in got["auto"].items() if r["verdict"] == "FAIL"} == {("backward", "dk")}


def test_an_unknown_oracle_tier_is_refused():
    from ttrcheck import InputError
    from ttrcheck.harness import _oracle
    import pytest as pt
    with pt.raises(InputError, match=r"oracle_tier: 'dd' is not one of auto\|mpfr"):
        _oracle("linear_attn", {}, {}, False, "dd")
