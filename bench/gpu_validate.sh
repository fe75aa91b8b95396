#!/usr/bin/env bash
# Runs on a GPU host (root): per-call cost by probe tier on a launch-bound
# loop, cudaMalloc/free and memcpy loops, PyTorch training-step overhead, and
# what a trace of a real training loop contains. Results in $OUT (or ./out).
# usage: bench/gpu_validate.sh CAUSEWAY_BINARY [REPS]
set -uo pipefail
C=${1:?causeway binary}
REPS=${2:-3}
OUT=${OUT:-./out}
mkdir -p "$OUT"
W=$(cd "$(dirname "$0")/../workloads/gpu" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
{
  date -u; uname -r; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  nproc
} > "$OUT/machine.txt" 2>&1
nvcc -O2 -o /tmp/launch_loop "$W/launch_loop.cu" || exit 1
$C check > "$OUT/check.txt" 2>&1

t() { # tier, then the command; prints the command's first output line
  local tier=$1; shift
  case $tier in
    none) "$@" ;;
    entry) $C trace --live off --no-host --probe-tier entry --db /tmp/b.db -- "$@" | head -1 ;;
    full) $C trace --live off --db /tmp/b.db -- "$@" | head -1 ;;
    driver) $C trace --live off --layers driver --db /tmp/b.db -- "$@" | head -1 ;;
    runtime) $C trace --live off --layers runtime --db /tmp/b.db -- "$@" | head -1 ;;
  esac
}
{
  for rep in $(seq "$REPS"); do
    for tier in none entry full driver runtime; do
      for mode in "launch 200000" "malloc 20000" "memcpy 50000"; do
        echo "$rep $tier $(t $tier /tmp/launch_loop $mode)"
      done
    done
  done
} > "$OUT/percall.txt" 2>&1

{
  for rep in $(seq "$REPS"); do
    for model in "300 transformer" "300 elementwise"; do
      echo "$rep none $(python3 "$W/torch_train.py" $model 2>&1 | tail -1)"
      echo "$rep full $($C trace --live off --db /tmp/torch.db -- python3 "$W/torch_train.py" $model 2>&1 | head -1)"
      echo "$rep nostacks $($C trace --live off --no-stacks --db /tmp/torch.db -- python3 "$W/torch_train.py" $model 2>&1 | head -1)"
    done
  done
} > "$OUT/torch.txt" 2>&1

# What a trace of a real training loop holds.
$C trace --live off --db /tmp/content.db -- python3 "$W/torch_train.py" 100 transformer > "$OUT/content_trace.txt" 2>&1
q() { echo "== $1"; python3 - "$1" <<'PY'
import sqlite3, sys
con = sqlite3.connect("file:/tmp/content.db?mode=ro", uri=True)
cur = con.execute(sys.argv[1])
print("|".join(d[0] for d in cur.description))
for r in cur.fetchall(): print("|".join(str(x) for x in r))
PY
}
{
  q "SELECT layer, op, count(*) AS n, sum(kernel IS NOT NULL) AS named, round(avg(dur_ns)) AS avg_ns, max(dur_ns) AS max_ns FROM cuda_calls GROUP BY layer, op ORDER BY n DESC"
  q "SELECT op, layer, calls, errors, nested, dropped FROM op_stats ORDER BY calls DESC"
  q "SELECT kernel, count(*) AS launches FROM cuda_calls WHERE kernel IS NOT NULL AND op LIKE '%aunch%' GROUP BY kernel ORDER BY launches DESC LIMIT 15"
  q "SELECT kind, count(*), sum(bytes) FROM cuda_calls WHERE kind IS NOT NULL GROUP BY kind"
  q "SELECT source, sum(count) FROM drops GROUP BY source"
  q "SELECT count(*) AS offcpu_rows, sum(dur_ns) FROM offcpu"
  q "SELECT pid, comm, substr(cmdline, 1, 80) FROM processes"
  q "SELECT c.op, f.func, f.file, f.line, count(*) AS calls FROM cuda_calls c JOIN stack_frames f ON f.stack_id = c.stack_id AND f.kind = 'python' AND f.file LIKE '%torch_train.py' WHERE c.op NOT LIKE '%aunch%' GROUP BY 1, 2, 3, 4 ORDER BY calls DESC LIMIT 25"
  q "SELECT count(*) AS calls_with_stack, count(DISTINCT stack_id) AS stacks FROM cuda_calls WHERE stack_id IS NOT NULL"
  q "SELECT s.stack_id, s.depth, s.kind, s.func, s.file, s.line, substr(s.module, -40) FROM stack_frames s WHERE s.stack_id = (SELECT stack_id FROM cuda_calls WHERE op = 'cudaMalloc' AND stack_id IS NOT NULL LIMIT 1) ORDER BY depth LIMIT 40"
} > "$OUT/content.txt" 2>&1
cp /tmp/content.db "$OUT/content.db" 2>/dev/null
