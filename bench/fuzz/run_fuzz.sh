#!/bin/sh
# Builds the libFuzzer targets (clang, ASan+UBSan, coverage) in build-fuzz and
# runs each for RUNS inputs (default 1,000,000) on JOBS cores, from the seeds.
# usage: bench/fuzz/run_fuzz.sh [RUNS] [JOBS] [TARGET...]   (from the repository root;
# no TARGET: all six)
# Results: build-fuzz/fuzz-logs/<target>.log; a crash leaves crash-* files there.
set -eu
RUNS=${1:-1000000}
JOBS=${2:-1}
shift $(( $# < 2 ? $# : 2 ))
# target:seed folder under seeds/
ALL="fuzz_event_decoder:events fuzz_elf_symbols:elf fuzz_trace_db:db fuzz_sql_guard:sql fuzz_py_frames:py fuzz_mcp_messages:mcp"
PAIRS=""
for t in "$@"; do
  p=$(printf '%s\n' $ALL | grep "^$t:") || { echo "unknown target $t" >&2; exit 2; }
  PAIRS="$PAIRS $p"
done
PAIRS=${PAIRS:-$ALL}
B=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCAUSEWAY_FUZZ=ON -DCAUSEWAY_SANITIZE=ON >/dev/null
ninja -C $B make_fuzz_seeds $(for p in $PAIRS; do printf '%s ' ${p%%:*}; done)
SEEDS=$B/bench/fuzz/seeds
$B/bench/fuzz/make_fuzz_seeds $SEEDS
mkdir -p $B/fuzz-logs
export CW_FUZZ_TRACE=$(pwd)/$SEEDS/db/trace.db   # absolute: the targets run in fuzz-logs/
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1   # a UBSan report is a failure
status=0
for pair in $PAIRS; do
  t=${pair%%:*}
  seeds=${pair#*:}
  work=$B/bench/fuzz/corpus/$t
  mkdir -p $work
  per_job=$(( RUNS / JOBS ))
  echo "== $t: $RUNS runs on $JOBS jobs"
  rm -f $B/fuzz-logs/$t.*.log
  start=$(date +%s)
  (cd $B/fuzz-logs && for j in $(seq 1 $JOBS); do
     ../bench/fuzz/$t -runs=$per_job -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
       ../bench/fuzz/corpus/$t ../bench/fuzz/seeds/$seeds > $t.$j.log 2>&1 &
   done; wait) || true
  cat $B/fuzz-logs/$t.*.log > $B/fuzz-logs/$t.log
  execs=$(grep -h '^stat::number_of_executed_units' $B/fuzz-logs/$t.*.log | awk '{s += $2} END {print s + 0}')
  crashes=$(grep -c -h -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|deadly signal' $B/fuzz-logs/$t.log || true)
  secs=$(( $(date +%s) - start ))
  echo "$t: executions=$execs seconds=$secs sanitizer/crash reports=$crashes"
  [ "$crashes" = 0 ] || status=1
  # A target that stopped early (it could not start, or was killed) did not do the work.
  if [ "$execs" -lt $(( per_job * JOBS )) ]; then
    echo "$t: FAILED: $execs of $(( per_job * JOBS )) runs (see $B/fuzz-logs/$t.log)"
    status=1
  fi
done
exit $status
