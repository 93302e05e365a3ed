#!/usr/bin/env python3
"""Report files validate against their schema; JUnit XML parses (docs/reports.md).

Usage: validate_reports.py TTRCHECK WORKDIR

Writes tiny vectors, checks a passing candidate (the chunk form in bf16) and a
failing one (the oracle with one NaN, so that "inf" ratios and locations occur),
validates both JSON reports against docs/schemas/report.schema.json, parses both
JUnit files, checks inputs outside the layer's guaranteed domain (a report with a
`domain` note), records a baseline and validates it against baseline.schema.json,
and validates one `ttrcheck proofs --json` result against proofs.schema.json.
Run by CTest (tests/CMakeLists.txt); needs python3-jsonschema.
"""
import json
import math
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
LAYER = "gated_delta_rule"


def run(ttrcheck, *args, expect):
    r = subprocess.run([ttrcheck, *args], capture_output=True, text=True)
    if r.returncode != expect:
        sys.exit(f"ttrcheck {' '.join(args)}: exit {r.returncode}, expected {expect}\n{r.stdout}{r.stderr}")
    return r


def read_safetensors(path, dtypes=("F64",)):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n :]
    tensors = {}
    for name, e in header.items():
        assert e["dtype"] in dtypes, f"{path}: {name} is {e['dtype']}"
        lo, hi = e["data_offsets"]
        size, code = (8, "d") if e["dtype"] == "F64" else (4, "f")
        tensors[name] = (e["shape"], list(struct.unpack(f"<{(hi - lo) // size}{code}", data[lo:hi])))
    return tensors, meta


def write_f32_safetensors(path, tensors, meta):
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def validator(name):
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(v, path):
    errors = sorted(v.iter_errors(json.loads(Path(path).read_text())), key=lambda e: list(e.path))
    if errors:
        sys.exit(f"{path} does not validate:\n" + "\n".join(f"  {list(e.path)}: {e.message}" for e in errors))


def parse_junit(path, failures):
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites", root.tag
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 1, f"{path}: {len(cases)} testcases"
    assert cases[0].get("classname") == LAYER and cases[0].get("name").startswith(LAYER + "/")
    got = len(cases[0].findall("failure"))
    assert got == failures, f"{path}: {got} failures, expected {failures}"
    assert int(root.get("failures")) == failures


def main():
    ttrcheck, work = sys.argv[1], Path(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    vec = work / "vectors"
    run(ttrcheck, "vectors", "--layer", LAYER, "--suite", "tiny", "--seed", "5", "--out", str(vec), expect=0)
    inputs = vec / f"{LAYER}.tiny.basic.inputs.safetensors"
    oracle = vec / f"{LAYER}.tiny.basic.oracle.safetensors"

    good = work / "good.safetensors"
    run(ttrcheck, "run", "--layer", LAYER, "--in", str(inputs), "--out", str(good), "--arith", "bf16", "--form",
        "chunk", expect=0)
    tensors, meta = read_safetensors(oracle)
    shape, o = tensors["o"]
    o[len(o) // 2] = math.nan
    bad = work / "nan.safetensors"
    write_f32_safetensors(bad, tensors, {"layer": LAYER})

    report_v = validator("report.schema.json")
    for name, cand, code in (("good", good, 0), ("nan", bad, 1)):
        report, junit = work / f"{name}.json", work / f"{name}.xml"
        run(ttrcheck, "check", "--layer", LAYER, "--in", str(inputs), "--candidate", str(cand), "--oracle", str(oracle),
            "--report", str(report), "--junit", str(junit), expect=code)
        validate(report_v, report)
        parse_junit(junit, failures=code)
    # A check whose inputs leave the layer's guaranteed domain (docs/domains.md)
    # carries a `domain` note: v scaled to 2^17 is beyond fp16's 65504.
    tensors_in, meta_in = read_safetensors(inputs, dtypes=("F64", "F32"))
    shape_v, v = tensors_in["v"]
    tensors_in["v"] = (shape_v, [x * 2.0**17 for x in v])
    big = work / "big.inputs.safetensors"
    write_f32_safetensors(big, tensors_in, meta_in)
    r = subprocess.run([ttrcheck, "check", "--layer", LAYER, "--in", str(big), "--candidate", str(good), "--dtype",
                        "fp16", "--form", "chunk", "--report", str(work / "domain.json")], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"check of out-of-domain inputs: exit {r.returncode}\n{r.stdout}{r.stderr}")
    validate(report_v, work / "domain.json")
    note = json.loads((work / "domain.json").read_text())["checks"][0]["domain"]
    assert note["form"] == "chunk" and note["violated"][0]["condition"] == "inputs", note
    assert note["violated"][0]["value"] == "inf" and note["violated"][0]["limit"] == 65504, note
    assert "domain: the inputs leave the guaranteed domain" in r.stdout, r.stdout
    # A condition that estimates the form's rounding noise is flagged as such: gka's
    # chunk backward with a fixed λ far above ‖H‖_F (κ = 1 + 0.25²/1), where Alg. 2's
    # reversed iterates overflow fp32 (docs/domains/gka.md, "reversal").
    gka_meta = {"layer": "gka", "config": json.dumps({"solver": "chebyshev", "iters": "30", "lambda": "1"})}
    gka_in = work / "gka.reversal.safetensors"
    write_f32_safetensors(gka_in, {"q": ([1, 1, 1, 2], [1.0, 1.0]), "k": ([1, 1, 1, 2], [0.25, 0.0]),
                                   "v": ([1, 1, 1, 1], [1.0]), "g": ([1, 1, 1], [0.0]), "do": ([1, 1, 1, 1], [1.0])},
                          gka_meta)
    gka_out = work / "gka.reversal.out.safetensors"
    run(ttrcheck, "run", "--layer", "gka", "--in", str(gka_in), "--out", str(gka_out), "--arith", "fp32", "--form", "chunk",
        "--backward", expect=0)
    r = subprocess.run([ttrcheck, "check", "--layer", "gka", "--in", str(gka_in), "--candidate", str(gka_out),
                        "--dtype", "fp32", "--form", "chunk", "--backward", "--report", str(work / "gka.json")],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"check of the gka reversal case: exit {r.returncode}\n{r.stdout}{r.stderr}")
    validate(report_v, work / "gka.json")
    violated = json.loads((work / "gka.json").read_text())["checks"][0]["domain"]["violated"]
    assert [v.get("rounding", False) for v in violated if v["condition"] == "reversal"] == [True], violated
    assert all(v.get("rounding", False) is False or v["condition"] == "reversal" for v in violated), violated
    assert "an estimate of the form's rounding noise" in r.stdout, r.stdout

    doc = json.loads((work / "nan.json").read_text())
    o_entry = doc["checks"][0]["tensors"][0]
    assert o_entry["name"] == "o" and o_entry["max_ratio"] == "inf" and o_entry["nan_count"] == 1, o_entry
    ht_entry = doc["checks"][0]["tensors"][1]
    assert ht_entry["worst"]["t"] is None, ht_entry  # a state row has no token

    # The oracle note (docs/oracle-tiers.md): a stored oracle says
    # so; a computed one is double-double with its estimated own error far below
    # 1/1000 of the bound on these benign inputs (nothing escalated), or MPFR-256
    # throughout when asked for.
    assert doc["checks"][0]["oracle"]["tier"] == "stored", doc["checks"][0]["oracle"]
    for tier, want in (("auto", "dd"), ("mpfr", "mpfr:256")):
        report = work / f"tier-{tier}.json"
        run(ttrcheck, "check", "--layer", LAYER, "--in", str(inputs), "--candidate", str(good), "--oracle-tier", tier,
            "--report", str(report), expect=0)
        validate(report_v, report)
        note = json.loads(report.read_text())["checks"][0]["oracle"]
        assert note["tier"] == want and note["escalated"] == [] and note["slices"] >= 1, note
        if tier == "auto":
            assert isinstance(note["estimated_error_ratio"], float) and 0 < note["estimated_error_ratio"] < 1e-3, note
            assert note["unit"] == "(b,h)", note
        else:
            assert note["estimated_error_ratio"] is None, note
    run(ttrcheck, "check", "--layer", LAYER, "--in", str(inputs), "--candidate", str(good), "--oracle-tier", "dd",
        expect=2)

    baseline = work / "baseline.json"
    run(ttrcheck, "baseline", "record", "--report", str(work / "good.json"), "--out", str(baseline), expect=0)
    validate(validator("baseline.schema.json"), baseline)
    run(ttrcheck, "baseline", "compare", "--baseline", str(baseline), "--report", str(work / "good.json"), expect=0)

    # A shard's gate report carries its shard record; a baseline of it too.
    shard = work / "shard"
    run(ttrcheck, "gate", "--layer", LAYER, "--case", "small", "--seeds", "2", "--no-cuda", "--shard", "1/2",
        "--out", str(shard), expect=0)
    validate(validator("report.schema.json"), shard / "report.json")
    doc = json.loads((shard / "report.json").read_text())
    assert doc["shard"]["index"] == 1 and doc["shard"]["count"] == 2, doc["shard"]
    assert len(doc["shard"]["check_units"]) == len(doc["checks"]) > 0, doc["shard"]
    assert all(c["oracle"]["tier"] == "dd" for c in doc["checks"]), [c["oracle"] for c in doc["checks"]]
    run(ttrcheck, "baseline", "record", "--report", str(shard / "report.json"), "--out", str(work / "b1.json"), expect=0)
    validate(validator("baseline.schema.json"), work / "b1.json")
    assert json.loads((work / "b1.json").read_text())["shard"]["index"] == 1

    proofs = work / "proofs.json"
    first = run(ttrcheck, "proofs", "--list", "--skip-slow", expect=0).stdout.split()[0]
    run(ttrcheck, "proofs", "--only", first, "--json", str(proofs), expect=0)
    validate(validator("proofs.schema.json"), proofs)
    shutil.rmtree(work)
    print("reports, JUnit, baseline and proofs files are valid")


if __name__ == "__main__":
    main()
