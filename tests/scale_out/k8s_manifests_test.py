#!/usr/bin/env python3
"""The Kubernetes job files of scripts/scale-out/ (docs/scale-out.md), without a
cluster: the campaign is an Indexed Job whose TTR_SHARD_COUNT equals its
completions, every pod writes its own shard directory, and the merge Job reads
exactly those. Then the pods' and the merge's shell commands run here as 8
local "pods" (JOB_COMPLETION_INDEX 0..7; the CUDA target and budget swapped for
a small CPU campaign), and the merged output must equal the single-process
campaign's, file for file.

    k8s_manifests_test.py SOURCE_DIR TTRCHECK
"""
import filecmp
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import yaml


def container(doc):
    (c,) = doc["spec"]["template"]["spec"]["containers"]
    return c


def main():
    src, ttrcheck = pathlib.Path(sys.argv[1]), os.path.abspath(sys.argv[2])
    campaign = yaml.safe_load((src / "scripts/scale-out/k8s-campaign.yaml").read_text())
    merge = yaml.safe_load((src / "scripts/scale-out/k8s-merge.yaml").read_text())
    spec = campaign["spec"]
    assert spec["completionMode"] == "Indexed", spec
    n = spec["completions"]
    env = {e["name"]: e["value"] for e in container(campaign)["env"]}
    assert env["TTR_SHARD_COUNT"] == str(n), f"TTR_SHARD_COUNT {env['TTR_SHARD_COUNT']} != completions {n}"
    assert spec["parallelism"] <= n
    pod = container(campaign)["args"][0]
    merge_cmd = container(merge)["args"][0]
    assert "$JOB_COMPLETION_INDEX" in pod and "--shard" not in pod, pod
    assert container(campaign)["volumeMounts"][0]["mountPath"] == container(merge)["volumeMounts"][0]["mountPath"]

    tmp = pathlib.Path(tempfile.mkdtemp())
    try:
        # The same commands on a small CPU campaign, /results in a temporary directory.
        def local(cmd):
            cmd = cmd.replace("/results", str(tmp / "results")).replace("ttrcheck ", ttrcheck + " ", 1)
            for old, new in (("--target cuda:bf16", "--target cpu:fp32"), ("--budget 400000cases", "--budget 64cases"),
                             ("--layer gated_delta_rule", "--layer kaczmarz_delta_rule --mutant kaczmarz-eps-dropped")):
                assert old in cmd or "merge" in cmd, (old, cmd)
                cmd = cmd.replace(old, new)
            return cmd

        for i in range(n):
            e = dict(os.environ, JOB_COMPLETION_INDEX=str(i), **env)
            for k in ("SLURM_ARRAY_TASK_ID", "PYTEST_XDIST_WORKER"):
                e.pop(k, None)
            r = subprocess.run(["/bin/sh", "-c", local(pod)], env=e, capture_output=True, text=True)
            assert r.returncode == 0, f"pod {i}: exit {r.returncode}: {r.stderr}"
            assert f"shard {i}/{n} from JOB_COMPLETION_INDEX" in r.stderr, r.stderr
        r = subprocess.run(["/bin/sh", "-c", local(merge_cmd)], capture_output=True, text=True)
        assert r.returncode == 0, f"merge: {r.stderr}"
        out = tmp / "single"
        args = [a for a in local(pod).split(";")[0].split() if "shard-" not in a]
        args = args[:args.index("--out")] + ["--out", str(out)]
        r = subprocess.run(args, capture_output=True, text=True)
        assert r.returncode in (0, 1), r.stderr
        merged = next((tmp / "results").glob("*/merged"))
        cmp = filecmp.dircmp(out, merged)
        assert not cmp.left_only and not cmp.right_only, (cmp.left_only, cmp.right_only)
        _, mismatch, errors = filecmp.cmpfiles(out, merged, os.listdir(out), shallow=False)
        assert not mismatch and not errors, (mismatch, errors)
        print(f"ok: {n} local pods merged equal the single-process campaign ({len(os.listdir(out))} files)")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
