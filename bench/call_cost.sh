#!/usr/bin/env bash
# The cost of a traced call against the entry+return uprobe floor, on a CPU
# machine (root; no GPU needed): workloads/gpu/launch_loop.cu built with nvcc
# links the CUDA runtime statically, and without a driver each launch returns
# an error at once, so the loop measures the probes alone. Tiers, interleaved
# (each repetition runs every tier once, so drift hits all alike):
#   none     no tracing
#   floor    `trace --probe-tier floor`: an entry uprobe that records a start
#            time and a uretprobe that sends one no-wakeup ring record
#   default  `trace` with its defaults (launch probes always on while the
#            loop runs: --launch-duty always, so windows do not dilute it)
# Prints the medians (us per call) and the added cost of the default over the
# floor's: the target is <= 1.10 (docs/performance.md).
#   bench/call_cost.sh [CAUSEWAY] [REPS] [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
C=${1:-build/causeway}
REPS=${2:-9}
N=${3:-300000}
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
loop=/tmp/cw_launch_loop
[ -x $loop ] || /usr/local/cuda/bin/nvcc -O2 -o $loop workloads/gpu/launch_loop.cu
db=/tmp/cw_call_cost.db
out=$(mktemp)
for r in $(seq "$REPS"); do
  for t in none floor default; do
    rm -f $db*
    case $t in
      none) line=$($loop launch "$N") ;;
      floor) line=$($C trace --live off --no-host --probe-tier floor --db $db -- $loop launch "$N" | head -1) ;;
      default) line=$($C trace --live off --launch-duty always --db $db -- $loop launch "$N" | head -1) ;;
    esac
    echo "$t ${line##* }" >> "$out"
  done
done
rm -f $db*
python3 - "$out" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    t, us = line.split()
    v.setdefault(t, []).append(float(us))
m = {t: statistics.median(x) for t, x in v.items()}
for t in ("none", "floor", "default"):
    print(f"{t:8s} {m[t]:.3f} us/call  (min {min(v[t]):.3f}, max {max(v[t]):.3f}, n {len(v[t])})")
ratio = (m["default"] - m["none"]) / (m["floor"] - m["none"])
print(f"added cost: default {m['default'] - m['none']:.3f} us, floor {m['floor'] - m['none']:.3f} us: {ratio:.2f}x the floor")
PY
rm -f "$out"
