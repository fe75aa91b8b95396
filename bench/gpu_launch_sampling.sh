#!/usr/bin/env bash
# Runs on a GPU host (root): the per-launch cost of each probe tier, in-kernel
# launch aggregation included, interleaved (every tier once per repetition,
# so drift of the VM hits all tiers alike), and the step-time overhead of a
# real PyTorch training loop under each mode. Prints medians; raw lines in $OUT.
# usage: bench/gpu_launch_sampling.sh CAUSEWAY_BINARY [REPS] [TORCH_REPS] [PARTS]
#   PARTS: any of launch,torch,content (default all three; each fits a 10-minute slot)
#   LOOPS='launch 200000;malloc 20000;memcpy 50000' picks the launch_loop modes (default: launch)
set -uo pipefail
C=${1:?causeway binary}
REPS=${2:-9}
TREPS=${3:-5}
PARTS=${4:-launch,torch,content}
OUT=${OUT:-./out}
N=${N:-64}   # --launch-sampling N
mkdir -p "$OUT"
W=$(cd "$(dirname "$0")/../workloads/gpu" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
{ date -u; uname -r; nvidia-smi -L; nproc; } > "$OUT/machine.txt" 2>&1
nvcc -O2 -o /tmp/launch_loop "$W/launch_loop.cu" || exit 1

tier() { # tier, command...: the command's own first output line
  local t=$1; shift
  case $t in
    none) "$@" ;;
    entry) $C trace --live off --no-host --probe-tier entry --db /tmp/b.db -- "$@" | head -1 ;;
    floor) $C trace --live off --no-host --probe-tier floor --db /tmp/b.db -- "$@" | head -1 ;;
    full) $C trace --live off --launch-sampling off --db /tmp/b.db -- "$@" | head -1 ;;
    sampled) $C trace --live off --launch-sampling "$N" --db /tmp/b.db -- "$@" | head -1 ;;
    sampled_nostacks) $C trace --live off --no-stacks --launch-sampling "$N" --db /tmp/b.db -- "$@" | head -1 ;;
  esac
  rm -f /tmp/b.db*
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

if [[ $PARTS == *launch* ]]; then
# LOOPS: which launch_loop modes (each with its call count)
IFS=';' read -ra loops <<< "${LOOPS:-launch 200000}"
for rep in $(seq "$REPS"); do
  for loop in "${loops[@]}"; do
    for t in none entry floor full sampled; do
      echo "$t $(tier $t /tmp/launch_loop $loop)"
    done
  done
done > "$OUT/launch.txt" 2>&1
for loop in "${loops[@]}"; do
  m=${loop%% *}
  echo "== µs per call, $loop: median of $REPS interleaved repetitions"
  for t in none entry floor full sampled; do
    echo "$t $(awk -v t=$t -v m=$m '$1 == t && $2 == m {print $4}' "$OUT/launch.txt" | median)"
  done
done
fi

if [[ $PARTS == *torch* ]]; then
for rep in $(seq "$TREPS"); do
  for model in transformer elementwise; do
    for t in none full sampled sampled_nostacks; do
      echo "$model $t $(tier $t python3 "$W/torch_train.py" 300 $model 2>&1 | grep step_ms | tail -1)"
    done
  done
done > "$OUT/torch.txt" 2>&1
echo "== ms per training step, median of $TREPS interleaved repetitions (300 steps after warm-up)"
for model in transformer elementwise; do
  for t in none full sampled sampled_nostacks; do
    echo "$model $t $(grep "^$model $t " "$OUT/torch.txt" | sed 's/.*step_ms=//' | median)"
  done
done
fi

# What a sampled trace holds, and explain's view of it.
[[ $PARTS == *content* ]] || exit 0
$C trace --live off --launch-sampling "$N" --db /tmp/s.db -- python3 "$W/torch_train.py" 100 transformer > "$OUT/sampled_trace.txt" 2>&1
python3 - <<'PY' > "$OUT/sampled_content.txt" 2>&1
import sqlite3
c = sqlite3.connect("file:/tmp/s.db?mode=ro", uri=True)
for sql in [
    "SELECT op, calls FROM op_stats WHERE op LIKE '%aunch%' ORDER BY calls DESC",
    "SELECT o.name, sum(s.calls), count(DISTINCT s.kernel_id), sum(s.kernel_id IS NULL) FROM launch_stats s JOIN ops o ON o.id = s.op_id GROUP BY 1",
    "SELECT op, count(*), sum(dur_ns >= 100000) FROM cuda_calls WHERE op LIKE '%aunch%' GROUP BY op",
    "SELECT count(*) FROM cuda_call_events",
    "SELECT source, sum(count) FROM drops GROUP BY source",
]:
    print("==", sql)
    for r in c.execute(sql): print(*r, sep="|")
PY
cat "$OUT/sampled_content.txt"
/usr/bin/time -f "explain %e s, %M KB" $C explain --json --db /tmp/s.db > "$OUT/sampled_explain.json" 2> "$OUT/sampled_explain_time.txt"
cat "$OUT/sampled_explain_time.txt"
ls -la /tmp/s.db
