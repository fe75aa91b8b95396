#!/usr/bin/env bash
# Records/s and the agent's own CPU per record, by kind of record (CPU
# machine, root). For each kind a workload runs at its top speed while
# `causeway trace --comm NAME` (whole tracer, default settings) records it;
# the tracer's CPU (utime+stime of its own process, /proc/PID/stat) is read
# just before the workload starts and just after it ends, so start-up (BPF
# verification, discovery) is left out and reported apart.
#   stack:  workloads/py_sync_flood.py: cudaStreamSynchronize from a 40-deep
#           Python stack (a rare call: a row and a stack each)
#   launch: workloads/launch_storm through the stand-in libcuda: launches,
#           aggregated in the kernel (default --launch-sampling 64)
#   host:   workloads/sleep_storm: 50 us sleeps, one off-CPU interval each
# usage: [CAUSEWAY=path/to/causeway] bench/record_cost.sh [REPS] [KINDS]
#        (default 3 repetitions of: stack launch host; medians in docs/performance.md)
set -uo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
KINDS=${2:-stack launch host}
BIN=${CAUSEWAY:-build/causeway}
CUDART=/usr/local/cuda/lib64/libcudart.so.13
LIBCUDA=build/workloads/lib/libcuda.so.1
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
tick=$(getconf CLK_TCK)
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run_kind() {  # kind comm cmd...
  local kind=$1 comm=$2; shift 2
  local db=/tmp/cw-record-cost.db
  rm -f $db*
  $BIN trace --live off --comm "$comm" --lib $LIBCUDA --db $db > /tmp/cw-record-cost.log 2>&1 &
  local tracer=$!
  sleep 2
  local c0 t0 c1 t1 out
  c0=$(cpu_of $tracer); t0=$(date +%s.%N)
  out=$("$@" 2>&1 | tail -1)
  sleep 0.3  # the last drain (50 ms) and commit
  c1=$(cpu_of $tracer); t1=$(date +%s.%N)
  kill -INT $tracer; wait $tracer
  python3 - "$db" "$kind" "$c0" "$c1" "$t0" "$t1" "$tick" "$out" <<'PY'
import sqlite3, sys
db, kind, c0, c1, t0, t1, tick, out = sys.argv[1:]
c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
q = lambda s: c.execute(s).fetchone()[0] or 0
cpu = (float(c1) - float(c0)) / float(tick)
wall = float(t1) - float(t0)
if kind == "stack":
    n = q("SELECT count(*) FROM cuda_call_events WHERE stack_id IS NOT NULL")
elif kind == "launch":
    n = q("SELECT sum(calls) FROM launch_stats")
else:
    n = q("SELECT count(*) FROM offcpu_events")
py = q("SELECT count(*) FROM stack_frames WHERE kind = 'python'")
rows = q("SELECT count(*) FROM cuda_call_events") + q("SELECT count(*) FROM offcpu_events")
drops = q("SELECT sum(count) FROM drops")
print(f"{kind:7s} {n:9d} records {n / wall:9.0f}/s  agent cpu {cpu:6.2f} s = {cpu / max(n, 1) * 1e6:6.2f} us/record"
      f"  rows {rows:8d} drops {drops:6d} python frames {py}  [{out}]")
PY
}

for r in $(seq "$REPS"); do
  for k in $KINDS; do
    case $k in
    stack) run_kind stack python3.11 /usr/bin/python3.11 workloads/py_sync_flood.py 300000 40 --delay 0.5 $CUDART ;;
    launch) run_kind launch launch_storm build/workloads/launch_storm $LIBCUDA 2000000 0 0 ;;
    host) run_kind host sleep_storm build/workloads/sleep_storm $CUDART 100000 50 ;;
    esac
  done
done
