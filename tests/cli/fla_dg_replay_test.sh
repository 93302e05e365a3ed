#!/usr/bin/env bash
# FLA's fused-recurrent gla/simple_gla backward, replayed in fp32 on the CPU
# (docs/validating-fla/replay_fused_recurrent_dg.py: every operation rounded to fp32 in
# the kernel's order, dg by its reverse running sum), against ttrcheck's model of that
# algorithm, the backward form sequential_dg_sum (reference/family/gated_linear_dg_sum.hpp):
#  1. the replay's dg equals `ttrcheck run --form sequential_dg_sum --arith fp32 --backward`
#     bit for bit (two independent writings of one fp32 algorithm), on both tiny cases;
#  2. `check --form sequential_dg_sum` passes the replay's candidate (tiny.basic, where the
#     exact dg_0 is 0 and the replay leaves a residue there), and `check --form
#     sequential` still fails it, at token 0: the gap docs/validating-fla.md describes.
#   tests/cli/fla_dg_replay_test.sh SOURCE_DIR TTRCHECK
set -euo pipefail
src=$1
ttrcheck=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
replay=$src/docs/validating-fla/replay_fused_recurrent_dg.py

for layer in gla simple_gla; do
  "$ttrcheck" vectors --layer $layer --suite tiny --backward --out "$tmp/v" >/dev/null 2>&1
  for case in basic with_state; do
    stem=$tmp/v/$layer.tiny.$case.backward
    python3 "$replay" $stem.inputs.safetensors $stem.oracle.safetensors "$tmp/cand.$layer.$case.safetensors" >/dev/null
    "$ttrcheck" run --layer $layer --in $stem.inputs.safetensors --out "$tmp/run.$layer.$case.safetensors" \
      --backward --form sequential_dg_sum --arith fp32
    python3 - "$tmp/cand.$layer.$case.safetensors" "$tmp/run.$layer.$case.safetensors" <<'PY' || fail "$layer $case: dg differs"
import json, struct, sys
def dg(path):
    b = open(path, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    assert h['dg']['dtype'] == 'F32', h['dg']['dtype']
    s, e = h['dg']['data_offsets']
    return b[8 + n + s:8 + n + e]
a, b = dg(sys.argv[1]), dg(sys.argv[2])
sys.exit(0 if a == b and len(a) > 0 else 1)
PY
  done
  stem=$tmp/v/$layer.tiny.basic.backward
  common=(check --layer $layer --in $stem.inputs.safetensors --candidate "$tmp/cand.$layer.basic.safetensors"
          --backward --dtype fp32 --oracle $stem.oracle.safetensors)
  "$ttrcheck" "${common[@]}" --form sequential_dg_sum >"$tmp/own.txt" || { cat "$tmp/own.txt"; fail "$layer: the replay fails its own model"; }
  set +e
  "$ttrcheck" "${common[@]}" --form sequential >"$tmp/direct.txt"
  rc=$?
  set -e
  [ $rc -eq 1 ] || { cat "$tmp/direct.txt"; fail "$layer: the direct model gave exit $rc, expected 1 (dg fails at t = 0)"; }
  # the row: check  tensor  max abs err  max ratio  worst (b,t,h)  NaN  Inf  verdict
  grep -E "/backward +dg +[^ ]+ +[^ ]+ +\(0,0,[0-9]+\) .*FAIL" "$tmp/direct.txt" >/dev/null ||
    { cat "$tmp/direct.txt"; fail "$layer: dg's worst row is not token 0"; }
done
echo "fla_dg_replay: ok"
