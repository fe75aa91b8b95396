#!/usr/bin/env bash
# The agent's own cost at a given event rate (CPU machine, root): a paced
# generator (workloads/launch_storm, through the stand-in libcuda, real
# uprobes) runs at RATE launches/s for SECS seconds while `causeway trace
# --comm launch_storm` records it; causeway's CPU time (user+sys, its own
# process only: the generator is not its child) and peak RSS come from
# /usr/bin/time. Each rate under the default storage and --launch-sampling off.
# usage: bench/agent_cost.sh [SECS] [RATE...]   (default 5; 10000 100000 1000000)
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}; shift || true
RATES=${*:-10000 100000 1000000}
LIB=build/workloads/lib/libcuda.so.1
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
printf '%-8s %-9s %-12s %-12s %-8s %-9s %-8s %s\n' mode rate achieved launches cpu% rss_mb drops rows
for mode in 64 off; do
  for rate in $RATES; do
    n=$((rate * SECS))
    db=/tmp/cw-agent-cost.db; rm -f $db*
    /usr/bin/time -f "%U %S %e %M" -o /tmp/cw-agent-time build/causeway trace --live off \
      --comm launch_storm --lib $LIB --launch-sampling $mode --duration $((SECS + 3))s --db $db \
      > /dev/null 2>&1 &
    sleep 1.5
    out=$(build/workloads/launch_storm $LIB $n 0 0 $rate)
    wait
    read -r u s e m < /tmp/cw-agent-time
    achieved=$(echo "$out" | sed -n 's/.*(\([0-9]*\) launches\/s)/\1/p')
    read -r calls drops rows < <(python3 - "$db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
calls = c.execute("SELECT coalesce(sum(calls), 0) FROM op_stats WHERE op = 'cuLaunchKernel'").fetchone()[0]
drops = c.execute("SELECT coalesce(sum(count), 0) FROM drops").fetchone()[0]
rows = c.execute("SELECT count(*) FROM cuda_call_events").fetchone()[0]
print(calls, drops, rows)
PY
)
    cpu=$(echo "($u + $s) * 100 / $e" | bc -l)
    printf '%-8s %-9s %-12s %-12s %-8.1f %-9.1f %-8s %s\n' "$mode" "$rate" "$achieved" "$calls" "$cpu" \
      "$(echo "$m / 1024" | bc -l)" "$drops" "$rows"
  done
done
