#!/usr/bin/env bash
# On the GPU host: trace each planted row as a new user would, explain it, and
# summarise which chain came first and with which line, over RUNS runs of
# each (default 5), the runs of all rows interleaved so that the VM's slow
# spells spread over them.
#   RUNS=5 SECONDS_PER_RUN=5 workloads/gpu/validate.sh CAUSEWAY OUTDIR [ROW...]
# A row is
#   MODE                   planted.py MODE (the single-cause loops), or static-loop
#   SHAPE:CAUSE            shapes.py SHAPE CAUSE (programs shaped like real ones)
#   SHAPE:CAUSE@attach     the same, already running for ATTACH_AFTER s (default
#                          8) when `trace --pid` starts, and traced for the run's
#                          seconds
#   SHAPE:hang             traced for HANG_TRACE_S (default 18) s while it hangs
#                          (`--duration`), then the program is killed
#   SHAPE:hang@attach      hanging for a while when `trace --pid` starts
#                          (HANG_ATTACH_AFTER s after its start, default 16),
#                          traced for HANG_ATTACH_TRACE_S (default 8) s, then
#                          killed (a call found in flight at attach is judged
#                          on what the trace saw: 5 s of a quiet process)
# The trace files are deleted unless KEEP_DBS=1.
# LANES=N LANE=I (workloads/gpu/lanes.sh): this copy runs every Nth of the
# (run, row) items from the I-th, its explain output in explain.I.txt; the
# caller summarises.
set -uo pipefail
cw=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
runs=${RUNS:-5}
secs=${SECONDS_PER_RUN:-5}
rows=${*:-clean contention pageable churn sync-storm launch-bound input-bound mmap-io graph-recapture shared host-bound leak oom oob torch-cupy-crash fault-mid churn-vary gil lock pinning contention-backward item-loop static-loop}
lanes=${LANES:-1} lane=${LANE:-0}
xtxt="$out/explain.txt"
[ "$lanes" -gt 1 ] && xtxt="$out/explain.$lane.txt"
mkdir -p "$out/dbs"
[ "$lane" = 0 ] && "$cw" check --json > "$out/check.json" 2>&1
case " $rows " in *" static-loop "*) nvcc -O2 -o /tmp/static_loop "$here/static_loop.cu" || exit 1 ;; esac
: > "$xtxt"
item=0
for run in $(seq "$runs"); do
  for row in $rows; do
    item=$((item + 1))
    (( (item - 1) % lanes == lane )) || continue
    name=${row//:/-}
    name=${name//@/-}
    db="$out/dbs/$name.$run.db"
    rm -f "$db" "$db-wal" "$db-shm"
    start=$(date +%s%N)
    case "$row" in
      static-loop) timeout 120 "$cw" trace --live off --db "$db" -- /tmp/static_loop "$secs" ;;
      *:hang)
        # The trace's child keeps hanging after the trace stops: killed by
        # its pid (another lane may run the same row).
        timeout 120 "$cw" trace --live off --duration "${HANG_TRACE_S:-18}s" --db "$db" -- \
          python3 "$here/shapes.py" "${row%%:*}" hang 60 &
        tp=$!
        sleep 3
        # A backstop: the agent ends its command when it stops (SIGTERM).
        # timeout's child is the agent, whose child is the job.
        kid=$(pgrep -P "$(pgrep -P "$tp" | paste -sd,)" -f shapes.py)
        wait "$tp"
        [ -n "$kid" ] && kill -9 $kid ;;
      *:hang@attach)
        python3 "$here/shapes.py" "${row%%:*}" hang 120 &
        job=$!
        sleep "${HANG_ATTACH_AFTER:-16}"
        timeout 120 "$cw" trace --live off --pid "$job" --duration "${HANG_ATTACH_TRACE_S:-8}s" --db "$db"
        kill -9 "$job"; wait "$job" ;;
      *@attach)
        r=${row%@attach}
        python3 "$here/shapes.py" "${r%%:*}" "${r#*:}" $(( ${ATTACH_AFTER:-8} + secs + 4 )) &
        job=$!
        sleep "${ATTACH_AFTER:-8}"
        timeout 120 "$cw" trace --live off --pid "$job" --duration "${secs}s" --db "$db"
        wait "$job" ;;
      *:*) timeout 120 "$cw" trace --live off --db "$db" -- python3 "$here/shapes.py" "${row%%:*}" "${row#*:}" "$secs" ;;
      *) timeout 120 "$cw" trace --live off --db "$db" -- python3 "$here/planted.py" "$row" "$secs" ;;
    esac > "$out/dbs/$name.$run.trace.txt" 2>&1
    end=$(date +%s%N)
    # Written whole or not at all: a run stopped by a deadline is not scored.
    "$cw" explain --json --db "$db" > "$out/dbs/$name.$run.json.part" 2> "$out/dbs/$name.$run.err" &&
      mv "$out/dbs/$name.$run.json.part" "$out/dbs/$name.$run.json"
    { echo "===== $row run $run (trace $(( (end - start) / 1000000 )) ms)"; tail -4 "$out/dbs/$name.$run.trace.txt"
      "$cw" explain --db "$db" 2>&1 | head -60; } >> "$xtxt"
    rm -f "$db-wal" "$db-shm"
    if [ "${KEEP_DBS:-0}" = 1 ]; then
      # Compressed beside the next run, on two CPUs the planted rows leave
      # alone (the last two of the lane's).
      taskset -c "$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0))[-2:])))')" \
        nice -n 19 xz -T2 -3 -f "$db" &
    else
      rm -f "$db"
    fi
  done
done
wait
[ "$lanes" -gt 1 ] && exit 0
python3 "$here/summarize.py" "$out/dbs" $rows > "$out/summary.md"
cat "$out/summary.md"
