#!/bin/sh
# Builds the libFuzzer targets (clang, ASan+UBSan, coverage) in build-fuzz and
# runs each for RUNS inputs (default 1,000,000) on JOBS cores, from the seeds.
# usage: bench/fuzz/run_fuzz.sh [RUNS] [JOBS]   (from the repository root)
# Results: build-fuzz/fuzz-logs/<target>.log; a crash leaves crash-* files there.
set -eu
RUNS=${1:-1000000}
JOBS=${2:-1}
B=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCAUSEWAY_FUZZ=ON -DCAUSEWAY_SANITIZE=ON >/dev/null
ninja -C $B make_fuzz_seeds fuzz_event_decoder fuzz_elf_symbols fuzz_trace_db fuzz_sql_guard
SEEDS=$B/bench/fuzz/seeds
$B/bench/fuzz/make_fuzz_seeds $SEEDS
mkdir -p $B/fuzz-logs
export CW_FUZZ_TRACE=$SEEDS/db/trace.db
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1   # a UBSan report is a failure
status=0
for pair in fuzz_event_decoder:events fuzz_elf_symbols:elf fuzz_trace_db:db fuzz_sql_guard:sql; do
  t=${pair%%:*}
  seeds=${pair#*:}
  work=$B/bench/fuzz/corpus/$t
  mkdir -p $work
  per_job=$(( RUNS / JOBS ))
  echo "== $t: $RUNS runs on $JOBS jobs"
  (cd $B/fuzz-logs && for j in $(seq 1 $JOBS); do
     ../bench/fuzz/$t -runs=$per_job -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
       ../bench/fuzz/corpus/$t ../bench/fuzz/seeds/$seeds > $t.$j.log 2>&1 &
   done; wait) || true
  cat $B/fuzz-logs/$t.*.log > $B/fuzz-logs/$t.log
  execs=$(grep -h '^stat::number_of_executed_units' $B/fuzz-logs/$t.*.log | awk '{s += $2} END {print s + 0}')
  crashes=$(grep -c -h -E 'ERROR: (AddressSanitizer|libFuzzer)|runtime error:|deadly signal' $B/fuzz-logs/$t.log || true)
  echo "$t: executions=$execs sanitizer/crash reports=$crashes"
  [ "$crashes" = 0 ] || status=1
done
exit $status
