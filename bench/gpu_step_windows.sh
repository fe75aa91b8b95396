#!/usr/bin/env bash
# Training-step overhead measured inside one process (GPU host, root): one
# long PyTorch training loop logs every step; causeway traces it (--pid) in
# windows, alternating with untraced windows of the same length and cycling
# through the modes. Steps in the first second of a window (attach, warm-up of
# the probes' maps) and the last 0.2 s are left out. Comparing windows of one
# process removes the run-to-run spread (GPU clocks, allocator state, VM noise)
# that separate runs carry (±3% on the H100 VM).
# usage: bench/gpu_step_windows.sh CAUSEWAY_BINARY [ROUNDS] [WINDOW_S] [MODEL]
set -uo pipefail
C=${1:?causeway binary}
ROUNDS=${2:-4}
WIN=${3:-5}
MODEL=${4:-transformer}
N=${N:-64}
OUT=${OUT:-./out}
mkdir -p "$OUT"
W=$(cd "$(dirname "$0")/../workloads/gpu" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
MODES=("full:--launch-sampling off" "sampled:--launch-sampling $N" "nostacks:--launch-sampling $N --no-stacks")
python3 "$W/torch_train.py" 1000000 "$MODEL" "$OUT/steps.log" > /dev/null 2>&1 &
P=$!
sleep 25   # import torch, CUDA init, warm-up
: > "$OUT/windows.txt"
for r in $(seq "$ROUNDS"); do
  for m in "${MODES[@]}"; do
    name=${m%%:*}; args=${m#*:}
    s=$(date +%s.%N); sleep "$WIN"; e=$(date +%s.%N)
    echo "none $s $e" >> "$OUT/windows.txt"
    s=$(date +%s.%N)
    $C trace --live off --pid $P --duration ${WIN}s $args --db /tmp/w.db > /dev/null 2>&1
    e=$(date +%s.%N)
    echo "$name $s $e" >> "$OUT/windows.txt"
    rm -f /tmp/w.db*
  done
done
s=$(date +%s.%N); sleep "$WIN"; e=$(date +%s.%N); echo "none $s $e" >> "$OUT/windows.txt"
kill $P; wait $P 2>/dev/null
python3 - "$OUT/steps.log" "$OUT/windows.txt" "$MODEL" <<'PY'
import statistics, sys
steps = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
wins = [l.split() for l in open(sys.argv[2]) if l.strip()]
by = {}
for name, s, e in wins:
    s, e = float(s) + 1.0, float(e) - 0.2
    by.setdefault(name, []).extend(ms for t, ms in steps if s <= t <= e)
base = statistics.median(by["none"])
print(f"{sys.argv[3]}: median step ms per mode ({len(wins)} windows, steps in window):")
for name, v in by.items():
    med = statistics.median(v)
    print(f"  {name:9s} {med:8.3f} ms  {100 * (med / base - 1):+6.2f}%  mean {statistics.fmean(v):8.3f}  n={len(v)}")
PY
