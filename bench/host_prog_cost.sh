#!/usr/bin/env bash
# What the host programs cost in the kernel (CPU machine, root): BPF run-time
# statistics (kernel.bpf_stats_enabled) of each cw_* tracing program over
# SECS seconds of a host-wide `causeway trace`, idle and under a loopback TCP
# load (stress-ng --sock: a busy network's wake-ups from softirqs). Per
# program: runs/s, ns a run (the statistics' own two clock reads included),
# and CPU-ms per second across all CPUs. Given several binaries, each load
# runs them in turn, ROUNDS times (to compare two builds in one run).
# usage: [ROUNDS=1] bench/host_prog_cost.sh [SECS] [BINARY...]   (default 5 build/causeway)
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}; shift || true
BINS=${*:-build/causeway}
ROUNDS=${ROUNDS:-1}
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
snap() { bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("cw_") and p.get("type") == "tracing":
        print(p["name"], p.get("run_cnt", 0), p.get("run_time_ns", 0))'; }
for round in $(seq 1 "$ROUNDS"); do
  for load in idle sock; do
    for bin in $BINS; do
      db=/tmp/cw-host-prog-cost.db; rm -f $db*
      "$bin" trace --live off --duration $((SECS + 4))s --db $db > /dev/null 2>&1 &
      sleep 2
      [ $load = sock ] && { stress-ng --sock 1 --timeout $((SECS + 1))s > /dev/null 2>&1 & }
      sleep 0.5
      snap > /tmp/cw-hpc-a
      sleep "$SECS"
      snap > /tmp/cw-hpc-b
      wait
      echo "== round $round, $load, $bin, $SECS s"
      python3 - "$SECS" /tmp/cw-hpc-a /tmp/cw-hpc-b <<'PY'
import sys
secs = float(sys.argv[1])
a = {l.split()[0]: l.split()[1:] for l in open(sys.argv[2])}
print(f"{'program':26} {'runs/s':>9} {'ns/run':>7} {'cpu-ms/s':>9}")
for l in open(sys.argv[3]):
    n, c, t = l.split()
    c0, t0 = a.get(n, ["0", "0"])
    dc, dt = int(c) - int(c0), int(t) - int(t0)
    if dc:
        print(f"{n:26} {dc/secs:9.0f} {dt/dc:7.0f} {dt/secs/1e6:9.2f}")
PY
    done
  done
done
