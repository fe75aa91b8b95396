#!/usr/bin/env bash
# What one synchronising call costs under each way of tracing it, on a GPU
# host (root): one Python process (depth-24 stack, like a model's forward)
# loops `t.item()` (cudaMemcpyAsync DtoH + cudaStreamSynchronize on an idle
# GPU) in blocks and logs each block's µs per iteration; causeway attaches
# (--pid) in windows that alternate with untraced ones, ROUNDS times:
#   U default U no-stacks U driver-only U runtime-only ...
# (driver-only: --layers driver,nccl; runtime-only: --layers runtime,nccl).
# Each window's median block against its untraced neighbours: the added µs
# per .item() isolates the trap pairs (two layers) from the stack captures.
# ALT="NAME=BINARY ..." adds a default window for each other binary (a
# previous build, a variant), in the same rounds.
# usage: bench/gpu_sync_cost.sh CAUSEWAY [ROUNDS] [WIN_S]
set -uo pipefail
C=${1:?causeway binary}
ROUNDS=${2:-3}
WIN=${3:-6}
OUT=${OUT:-./out}
mkdir -p "$OUT"
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
L="$OUT/sync.blocks" WL="$OUT/sync.windows"
python3 - "$L" <<'PY' > /dev/null 2>&1 &
import sys, time, torch
log = open(sys.argv[1], "w", buffering=1)
t = torch.ones(1, device="cuda")
def deep(n, f):
    return deep(n - 1, f) if n else f()
def block():
    for _ in range(2000):
        t.item()
while True:
    s = time.perf_counter()
    deep(24, block)
    log.write("%.6f %.4f\n" % (time.time(), (time.perf_counter() - s) / 2000 * 1e6))
PY
P=$!
sleep 20
: > "$WL"
untraced() { local s; s=$(date +%s.%N); sleep "$WIN"; echo "none $s $(date +%s.%N)" >> "$WL"; }
window() {
  local name=$1 s bin=$C; shift
  if [ "${1:-}" = "--bin" ]; then bin=$2; shift 2; fi
  untraced
  s=$(date +%s.%N)
  $bin trace --live off --pid $P --duration ${WIN}s --db /tmp/sc.db "$@" > "$OUT/sync.$name.txt" 2>&1
  echo "$name $s $(date +%s.%N)" >> "$WL"
  rm -f /tmp/sc.db*
}
for r in $(seq "$ROUNDS"); do
  window default
  window no-stacks --no-stacks
  window driver-only --layers driver,nccl
  window runtime-only --layers runtime,nccl
  window runtime-only-no-stacks --layers runtime,nccl --no-stacks
  for a in ${ALT:-}; do window "${a%%=*}" --bin "${a#*=}"; done
done
untraced
kill $P; wait $P 2>/dev/null
python3 - "$L" "$WL" <<'PY'
import statistics as st, sys
blocks = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
wins = [(n, float(s), float(e)) for n, s, e in (l.split() for l in open(sys.argv[2]) if l.strip())]
def med(a, b):
    v = [us for t, us in blocks if a <= t <= b]
    return st.median(v) if len(v) >= 3 else None
rows = {}
for i, (name, s, e) in enumerate(wins):
    if name == "none":
        continue
    around = [med(w[1] + 0.5, w[2]) for w in (wins[i - 1], wins[i + 1] if i + 1 < len(wins) else None) if w]
    base = st.fmean([x for x in around if x])
    m = med(s + 1.5, e - 0.2)
    if m:
        rows.setdefault(name, []).append((m - base, m, base))
print("| tracing | added µs per .item() (median) | spread | windows | µs traced / untraced |")
print("|---|---|---|---|---|")
for name, v in rows.items():
    d = sorted(x[0] for x in v)
    print(f"| {name} | {st.median(d):+.2f} | {d[0]:+.2f} … {d[-1]:+.2f} | {len(v)} | "
          f"{st.median(x[1] for x in v):.2f} / {st.median(x[2] for x in v):.2f} |")
PY
