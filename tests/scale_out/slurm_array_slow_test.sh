#!/usr/bin/env bash
# A real scheduler (LABELS slow; docs/scale-out.md): a single-node Slurm on
# localhost — its own munged, slurmctld and slurmd, configured in a temporary
# directory, on free ports — runs a 4-task array fuzz campaign submitted with
# scripts/scale-out/slurm-submit (tasks 1-4: the array does not start at 0;
# ttrcheck reads its shard from SLURM_ARRAY_TASK_*), then the merge job; the
# merged findings must equal the single-process campaign's, file for file.
# Every process it started is stopped on exit, failure included: the daemons by
# their pids, and any job step left behind by the SLURM_CONF in its environment.
#
#   tests/scale_out/slurm_array_slow_test.sh SOURCE_DIR TTRCHECK
# Needs root and Debian's slurm-wlm and munge (apt-get install slurm-wlm munge);
# without them it says so and exits 77 (CTest: skipped).
set -uo pipefail
src=$(cd "$1" && pwd)
export TTRCHECK
TTRCHECK=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")

for tool in munged munge slurmctld slurmd sbatch sinfo squeue scancel; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not found (apt-get install slurm-wlm munge)"; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (slurmd runs jobs as their users)"; exit 77; }

tmp=$(mktemp -d /tmp/ttr-slurm.XXXXXX)
chmod 711 "$tmp"  # munged wants its socket's directory searchable
daemons=()
cleanup() {
  local rc=$?
  [[ -n "${SLURM_CONF:-}" ]] && scancel --quiet --user=root 2>/dev/null
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null; done
  [[ -f "$tmp/munged.pid" ]] && kill "$(cat "$tmp/munged.pid")" 2>/dev/null
  sleep 1
  # Job steps (slurmstepd) and their children carry our SLURM_CONF.
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}; pid=${pid%/environ}
    { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qx "SLURM_CONF=$tmp/slurm.conf" && kill -9 "$pid" 2>/dev/null
  done
  for p in "${daemons[@]}"; do kill -9 "$p" 2>/dev/null; done
  sleep 0.2
  for p in "${daemons[@]}" $(cat "$tmp/munged.pid" 2>/dev/null); do
    kill -0 "$p" 2>/dev/null && { echo "FAIL: process $p still running after cleanup" >&2; rc=1; }
  done
  if [[ $rc -ne 0 ]]; then
    echo "--- logs ($tmp/log) ---"
    tail -n 20 "$tmp"/log/* 2>/dev/null
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/run"
read -r ctld_port slurmd_port < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
host=$(hostname -s)
head -c 1024 /dev/urandom >"$tmp/munge.key"
chmod 600 "$tmp/munge.key"
cat >"$tmp/slurm.conf" <<EOF
ClusterName=ttrcheck-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=30 State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf

munged --force --key-file="$tmp/munge.key" --socket="$tmp/munge.sock" --pid-file="$tmp/munged.pid" \
  --log-file="$tmp/log/munged.log" --seed-file="$tmp/munged.seed" || fail "munged did not start"
slurmctld -D -i >"$tmp/log/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D -N "$host" >"$tmp/log/slurmd.out" 2>&1 &
daemons+=($!)
for _ in $(seq 60); do
  [[ "$(sinfo -h -o %T 2>/dev/null)" == idle ]] && break
  sleep 0.5
done
[[ "$(sinfo -h -o %T 2>/dev/null)" == idle ]] || fail "the node did not come up: $(sinfo 2>&1 | tr '\n' ' ')"
echo "slurm up: $host, ports $ctld_port/$slurmd_port"

# The campaign: the kaczmarz mutant gives NaN findings in several shards (and a
# reproducer two shards share), so the merge's cap and deduplication matter.
args=(fuzz --layer kaczmarz_delta_rule --target cpu:fp32 --mutant kaczmarz-eps-dropped --budget 200cases --seed 1
      --max-findings 4)
# Tasks 1-4 (sbatch --array=1-4): shards 0-3 through SLURM_ARRAY_TASK_MIN.
array=$(sbatch --parsable --array=1-4 --chdir="$tmp/run" "$src/scripts/scale-out/campaign.sbatch" "$tmp/run" "${args[@]}")
array=${array%%;*}
timeout 300 sbatch --wait --parsable --dependency=afterany:"$array" --chdir="$tmp/run" \
  "$src/scripts/scale-out/merge.sbatch" "$tmp/run" >/dev/null || fail "the merge job failed: $(cat "$tmp"/run/ttrcheck-merge-*.log)"
for t in 1 2 3 4; do
  grep -q "^shard $((t - 1))/4 from SLURM_ARRAY_TASK_ID$" "$tmp/run/ttrcheck-${array}_$t.log" ||
    fail "task $t: no 'shard $((t - 1))/4 from SLURM_ARRAY_TASK_ID' in its log"
done

# And through the submit script: 2 shards, waiting for the merge.
timeout 300 "$src/scripts/scale-out/slurm-submit" --wait 2 "$tmp/run2" -- "${args[@]}" || fail "slurm-submit --wait failed"

"$TTRCHECK" "${args[@]}" --out "$tmp/single" >/dev/null
[[ $? -le 1 ]] || fail "the single-process campaign failed"
diff -r "$tmp/single" "$tmp/run/merged" || fail "4 Slurm shards merged differ from the single-process campaign"
diff -r "$tmp/single" "$tmp/run2/merged" || fail "2 Slurm shards merged differ from the single-process campaign"
echo "ok: 4-task and 2-task array campaigns merged equal the single-process campaign"
