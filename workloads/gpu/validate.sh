#!/usr/bin/env bash
# On the GPU host: trace each planted loop (workloads/gpu/planted.py, and the
# CUDA program static_loop.cu) as a new user would (`causeway trace -- python3
# planted.py MODE SECONDS`), explain it, and summarise which chain came first
# and with which line, over RUNS runs of each (default 5), the runs of all
# modes interleaved so that the VM's slow spells spread over them.
#   RUNS=5 SECONDS=6 workloads/gpu/validate.sh CAUSEWAY OUTDIR [MODE...]
set -uo pipefail
cw=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
runs=${RUNS:-5}
secs=${SECONDS_PER_RUN:-6}
modes=${*:-clean contention pageable churn sync-storm launch-bound input-bound mmap-io graph-recapture shared host-bound leak oom oob torch-cupy-crash fault-mid churn-vary gil lock pinning contention-backward item-loop static-loop}
mkdir -p "$out/dbs"
"$cw" check --json > "$out/check.json" 2>&1
case " $modes " in *" static-loop "*) nvcc -O2 -o /tmp/static_loop "$here/static_loop.cu" || exit 1 ;; esac
: > "$out/explain.txt"
for run in $(seq "$runs"); do
  for m in $modes; do
    db="$out/dbs/$m.$run.db"
    rm -f "$db"
    if [ "$m" = static-loop ]; then cmd=(/tmp/static_loop "$secs"); else cmd=(python3 "$here/planted.py" "$m" "$secs"); fi
    start=$(date +%s%N)
    timeout 120 "$cw" trace --live off --db "$db" -- "${cmd[@]}" > "$out/dbs/$m.$run.trace.txt" 2>&1
    end=$(date +%s%N)
    "$cw" explain --json --db "$db" > "$out/dbs/$m.$run.json" 2> "$out/dbs/$m.$run.err"
    { echo "===== $m run $run (trace $(( (end - start) / 1000000 )) ms)"; tail -4 "$out/dbs/$m.$run.trace.txt"
      "$cw" explain --db "$db" 2>&1 | head -60; } >> "$out/explain.txt"
    # Keep the explain output; the trace files are large.
    [ "${KEEP_DBS:-0}" = 1 ] || rm -f "$db" "$db-wal" "$db-shm"
  done
done
python3 "$here/summarize.py" "$here/planted.py" "$out/dbs" $modes > "$out/summary.md"
cat "$out/summary.md"
