#!/usr/bin/env bash
# scripts/shard-gpus with a fake nvidia-smi (two GPUs) and a CPU campaign: each
# shard runs with CUDA_VISIBLE_DEVICES set to its GPU (shard k on GPU k mod 2),
# and the merged output equals the unsharded campaign, file for file.
#   tests/scale_out/shard_gpus_test.sh SOURCE_DIR TTRCHECK
set -euo pipefail
src=$1
ttrcheck=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir "$tmp/bin"
printf '#!/bin/sh\nprintf "0\\n1\\n"\n' >"$tmp/bin/nvidia-smi"
# A ttrcheck that notes which GPU each shard was given.
cat >"$tmp/bin/ttrcheck-probe" <<EOT
#!/bin/sh
for a in "\$@"; do case "\$prev" in --shard) echo "\${CUDA_VISIBLE_DEVICES:-unset}" > "$tmp/gpu.\${a%%/*}";; esac; prev=\$a; done
exec "$ttrcheck" "\$@"
EOT
chmod +x "$tmp/bin/nvidia-smi" "$tmp/bin/ttrcheck-probe"
export PATH="$tmp/bin:$PATH"
unset CUDA_VISIBLE_DEVICES SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX PYTEST_XDIST_WORKER

args=(fuzz --layer kaczmarz_delta_rule --target cpu:fp32 --mutant kaczmarz-eps-dropped --budget 60cases --seed 1
      --max-findings 4)
set +e
"$ttrcheck" "${args[@]}" --out "$tmp/single" >/dev/null 2>&1
rc_single=$?
"$src/scripts/shard-gpus" --shards 3 "$tmp/run" -- ttrcheck-probe "${args[@]}" >"$tmp/log" 2>&1
rc=$?
set -e
cat "$tmp/log"
[[ $rc -eq $rc_single ]] || fail "shard-gpus exit $rc, the unsharded campaign's $rc_single"
[[ "$(cat "$tmp/gpu.0") $(cat "$tmp/gpu.1") $(cat "$tmp/gpu.2")" == "0 1 0" ]] ||
  fail "shards got GPUs $(cat "$tmp"/gpu.*), expected 0 1 0"
diff -r "$tmp/single" "$tmp/run/merged" || fail "merged shards differ from the unsharded campaign"
# Without --shards: one shard per GPU.
"$src/scripts/shard-gpus" "$tmp/run2" -- ttrcheck-probe "${args[@]}" >/dev/null 2>&1 || [[ $? -eq 1 ]]
[[ -d "$tmp/run2/shard-1" && ! -e "$tmp/run2/shard-2" ]] || fail "expected two shards for two GPUs"
diff -r "$tmp/single" "$tmp/run2/merged" || fail "two-shard merge differs"
# Refusals: --out given, a non-empty OUT.
set +e
"$src/scripts/shard-gpus" "$tmp/run3" -- ttrcheck-probe "${args[@]}" --out x >/dev/null 2>&1; a=$?
"$src/scripts/shard-gpus" "$tmp/run" -- ttrcheck-probe "${args[@]}" >/dev/null 2>&1; b=$?
set -e
[[ $a -eq 2 && $b -eq 2 ]] || fail "refusals: --out $a, non-empty OUT $b (expected 2, 2)"
echo "ok"
