#!/usr/bin/env bash
# scripts/ctest-gpu-resources with a fake nvidia-smi on PATH: the spec lists the
# GPUs it reports, CTest accepts it, and two tests asking for `gpus:1` that run
# at the same time get different GPUs (CTEST_RESOURCE_GROUP_0_GPUS), the id
# tests/gpu/ctest_resources.cpp turns into CUDA_VISIBLE_DEVICES.
#   tests/scale_out/ctest_gpu_resources_test.sh SOURCE_DIR
set -euo pipefail
src=$1
gen="$src/scripts/ctest-gpu-resources"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'EOT'
#!/bin/sh
# What `nvidia-smi --query-gpu=index --format=csv,noheader` prints on a 2-GPU machine.
[ "$*" = "--query-gpu=index --format=csv,noheader" ] || { echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 9; }
printf '0\n1\n'
EOT
chmod +x "$tmp/bin/nvidia-smi"
export PATH="$tmp/bin:$PATH"
unset CUDA_VISIBLE_DEVICES

"$gen" >"$tmp/spec.json"
python3 - "$tmp/spec.json" <<'EOT' || fail "spec does not list GPUs 0 and 1 with one slot each"
import json, sys
spec = json.load(open(sys.argv[1]))
assert spec["version"] == {"major": 1, "minor": 0}, spec
assert spec["local"] == [{"gpus": [{"id": "0", "slots": 1}, {"id": "1", "slots": 1}]}], spec
EOT
"$gen" 3 | grep -q '"slots": 3' || fail "SLOTS_PER_GPU not applied"
CUDA_VISIBLE_DEVICES=5,7 "$gen" | grep -q '"gpus": \[{"id": "5", "slots": 1}, {"id": "7", "slots": 1}\]' ||
  fail "CUDA_VISIBLE_DEVICES not honoured"
# No GPU, a failing nvidia-smi, a bad slot count: one line, exit 2.
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver" >&2\nexit 9\n' >"$tmp/bin/nvidia-smi"
set +e
"$gen" >/dev/null 2>"$tmp/err"; rc=$?
set -e
[[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] || fail "failing nvidia-smi: rc $rc, $(cat "$tmp/err")"
set +e
"$gen" 0 >/dev/null 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "SLOTS_PER_GPU 0 accepted"

# CTest itself with the spec: two tests, each holding its GPU for a while.
mkdir "$tmp/proj"
cat >"$tmp/proj/CTestTestfile.cmake" <<EOT
add_test(a sh -c "echo \\\$CTEST_RESOURCE_GROUP_0_GPUS > $tmp/a.gpu; sleep 2")
add_test(b sh -c "echo \\\$CTEST_RESOURCE_GROUP_0_GPUS > $tmp/b.gpu; sleep 2")
set_tests_properties(a b PROPERTIES RESOURCE_GROUPS gpus:1)
EOT
(cd "$tmp/proj" && ctest -j2 --resource-spec-file "$tmp/spec.json" >"$tmp/ctest.log" 2>&1) ||
  { cat "$tmp/ctest.log"; fail "ctest refused the spec"; }
a=$(cat "$tmp/a.gpu"); b=$(cat "$tmp/b.gpu")
[[ "$a" =~ ^id:[01],slots:1$ && "$b" =~ ^id:[01],slots:1$ && "$a" != "$b" ]] ||
  fail "tests got '$a' and '$b', expected id:0 and id:1"
echo "ok: spec for GPUs 0,1; concurrent tests got $a and $b"
