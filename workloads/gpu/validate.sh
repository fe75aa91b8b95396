#!/usr/bin/env bash
# On the GPU host: trace each planted PyTorch loop (workloads/gpu/planted.py)
# as a new user would (`causeway trace -- python3 planted.py MODE`), explain
# it, and summarise which chain came first and with which line.
#   workloads/gpu/validate.sh CAUSEWAY OUTDIR [MODE...]
set -uo pipefail
cw=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
modes=${*:-clean contention pageable churn sync-storm launch-bound input-bound mmap-io graph-recapture shared host-bound leak oom oob}
mkdir -p "$out/dbs"
"$cw" check --json > "$out/check.json" 2>&1
: > "$out/explain.txt"
for m in $modes; do
  db="$out/dbs/$m.db"
  rm -f "$db"
  start=$(date +%s%N)
  "$cw" trace --live off --db "$db" -- python3 "$here/planted.py" "$m" 8 > "$out/dbs/$m.trace.txt" 2>&1
  end=$(date +%s%N)
  "$cw" explain --json --db "$db" > "$out/dbs/$m.json" 2> "$out/dbs/$m.err"
  { echo "===== $m (trace $(( (end - start) / 1000000 )) ms)"; tail -4 "$out/dbs/$m.trace.txt"
    "$cw" query "$db" "SELECT count(*) AS gpu_samples, max(util_gpu) AS max_util, max(mem_used) AS max_mem_used,
      max(sm_clock) AS max_sm_clock, max(throttle) AS throttle_bits, max(power_mw) AS max_power_mw FROM gpu_samples" 2>&1
    "$cw" query "$db" "SELECT pid, count(*) AS samples, max(sm_util) AS max_sm_util, max(mem_used) AS max_mem_used
      FROM gpu_process_samples GROUP BY pid" 2>&1
    "$cw" explain --db "$db" 2>&1; } >> "$out/explain.txt"
done
python3 "$here/summarize.py" "$here/planted.py" "$out/dbs" $modes > "$out/summary.md"
cat "$out/summary.md"
