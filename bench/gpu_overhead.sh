#!/usr/bin/env bash
# Always-on overhead on a GPU host (root), measured inside one process
# (../shared/MEASURING.md): one long PyTorch loop logs every step; causeway
# attaches (--pid) in windows that alternate with untraced windows:
#   U  auto  U  always  U   (repeated ROUNDS times, then a last U)
# auto: the default (--launch-duty auto) for AUTO_S seconds; its first
#   LEARN_S seconds (every launch probed while it learns the launch rate) are
#   reported apart from its steady state.
# always: --launch-duty always (every launch probed: an incident capture).
# Then a second process of the same loop runs torch.profiler (CPU + CUDA
# activities) in every other WIN_S window (CW_PROFILE_WINDOWS).
# Each traced window is compared with the mean of its two untraced
# neighbours; the table gives the median ratio and its spread.
# MODES (default "auto always") picks the traced windows of each round:
# auto, always, nostacks (auto --no-stacks), export (auto with --live lines,
# the periodic explain, --prometheus scraped each second and --otlp).
# alt: a default window for each ALT="NAME=BINARY ..." (a previous build).
# attach: the default attached for ATTACH_S seconds (default 20) to the loop
#   already running; its steps are binned by the second since the trace
#   began, each bin against the untraced neighbours' median step (no
#   learning phase may cost more than the steady state), and its drops.
#   attach-noexplain / attach-nosample: the same without the periodic explain
#   (--explain-every off) / the CPU sampler (--cpu-sample-hz 0), each its own
#   table. attach-nostacks / attach-notorch / attach-always: without Python
#   stacks / without PyTorch's allocator probes / every launch probed, no
#   windows. TIMELINE=1: the agent logs its windows (-v, epoch-stamped) and
#   a sampler logs the agent's and the workload's CPU every 50 ms
#   ($OUT/MODEL.NAME.cpu) for bench/attach_timeline.py. ROWS=1: each attached
#   window's op counts against its rows and its drops ($OUT/MODEL.NAME.rows).
# attach-var: attached with other options, for each VARS="NAME=FLAG,FLAG ...".
# PROF=0 leaves torch.profiler out.
# usage: bench/gpu_overhead.sh CAUSEWAY MODEL [ROUNDS] [WIN_S] [AUTO_S]
set -uo pipefail
C=${1:?causeway binary}
MODEL=${2:?transformer | decode | elementwise}
ROUNDS=${3:-3}
WIN=${4:-8}
AUTO=${5:-32}
LEARN=${LEARN_S:-12}
OUT=${OUT:-./out}
mkdir -p "$OUT"
W=$(cd "$(dirname "$0")/../workloads/gpu" && pwd)
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
L="$OUT/$MODEL.steps" WL="$OUT/$MODEL.windows"
python3 "$W/torch_train.py" 100000000 "$MODEL" "$L" > /dev/null 2>&1 &
P=$!
sleep 25   # import torch, CUDA init, warm-up
: > "$WL"
mark() { echo "$1 $2 $(date +%s.%N)" >> "$WL"; }
untraced() { local s; s=$(date +%s.%N); sleep "$WIN"; echo "none $s $(date +%s.%N)" >> "$WL"; }
# The exporters' sinks (export windows): an OTLP receiver that answers 200
# and a scraper of /metrics once a second.
if [[ " ${MODES:-} " == *" export "* ]]; then
  python3 -c "
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers['Content-Length'])); self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 14318), H).serve_forever()" & RECV=$!
  (while sleep 1; do curl -s -o /dev/null 127.0.0.1:19464/metrics 2>/dev/null || \
     python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:19464/metrics', timeout=1).read()" 2>/dev/null; done) & SCRAPE=$!
fi
window() {  # window NAME SECONDS [--bin BINARY] causeway-flags...
  local name=$1 secs=$2 s bin=$C; shift 2
  if [ "${1:-}" = "--bin" ]; then bin=$2; shift 2; fi
  untraced
  s=$(date +%s.%N)
  $bin ${TIMELINE:+-v} trace --pid $P --duration ${secs}s --db /tmp/ov.db "$@" > "$OUT/$MODEL.$name$r.txt" 2>&1 &
  local tp=$!
  if [ -n "${TIMELINE:-}" ]; then
    # Every 50 ms: the agent's and the workload's CPU (utime stime, in ticks)
    # and the workload's context switches, to tell a cost in the workload's
    # own time (traps, faults) from a stall (it waits) or the agent's work;
    # then the CPU the workload's main thread last ran on and those of the
    # agent's threads that are running (R), to see them share a core.
    while kill -0 $tp 2>/dev/null; do
      echo "$(date +%s.%N) $(cut -d' ' -f14,15 /proc/$tp/stat 2>/dev/null) $(cut -d' ' -f14,15 /proc/$P/stat) $(grep -h ctxt /proc/$P/task/$P/status | tr -dc '0-9 \n' | tr '\n' ' ')$(cut -d' ' -f39 /proc/$P/task/$P/stat) $(cat /proc/$tp/task/*/stat 2>/dev/null | awk '$3 == "R" {printf "%s,", $39}')"
      sleep 0.05
    done > "$OUT/$MODEL.$name$r.cpu" &
  fi
  wait $tp
  echo "$name $s $(date +%s.%N)" >> "$WL"
  # ROWS=1: each op's counted calls against its rows, and the drops (an
  # attached trace must lose no row of a call that is not duty-cycled).
  [ -n "${ROWS:-}" ] && python3 - /tmp/ov.db > "$OUT/$MODEL.$name$r.rows" 2>&1 <<'PY'
import sqlite3, sys
con = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
for r in con.execute("SELECT o.name, s.calls, s.nested, s.dropped, s.shed, "
                     "(SELECT count(*) FROM cuda_call_events c WHERE c.op_id = s.op_id) "
                     "FROM op_counts s JOIN ops o ON o.id = s.op_id ORDER BY s.calls DESC"):
    print("op", *r)
for r in con.execute("SELECT source, sum(count) FROM drops GROUP BY source"):
    print("drop", *r)
PY
  rm -f /tmp/ov.db*
}
for r in $(seq "$ROUNDS"); do
  for m in ${MODES:-auto always}; do
    case $m in
      auto) window auto "$AUTO" --live off ;;
      attach) window attach "${ATTACH_S:-20}" --live off ;;
      # what of the first seconds' cost is the agent's own periodic work
      attach-noexplain) window attach-noexplain "${ATTACH_S:-20}" --live off --explain-every off ;;
      attach-nosample) window attach-nosample "${ATTACH_S:-20}" --live off --cpu-sample-hz 0 ;;
      # what of the first windows' cost is the stacks, the allocator's probes,
      # or the probes going on and off (always: every launch, no windows)
      attach-nostacks) window attach-nostacks "${ATTACH_S:-20}" --live off --no-stacks ;;
      attach-notorch) window attach-notorch "${ATTACH_S:-20}" --live off --layers runtime --layers driver --layers nccl ;;
      attach-always) window attach-always "${ATTACH_S:-20}" --live off --launch-duty always ;;
      # the default attached with another build, for each ALT="NAME=BINARY ..."
      attach-alt) for a in ${ALT:-}; do window "attach-${a%%=*}" "${ATTACH_S:-20}" --bin "${a#*=}" --live off; done ;;
      # attached with other options, for each VARS="NAME=FLAG,FLAG ..." (what
      # each part of the probes costs, e.g. always=--launch-duty,always)
      attach-var) for a in ${VARS:-}; do f=${a#*=}; window "attach-${a%%=*}" "${ATTACH_S:-20}" --live off ${f//,/ }; done ;;
      always) window always "$WIN" --live off --launch-duty always ;;
      nostacks) window auto-nostacks "$AUTO" --live off --no-stacks ;;  # what the stack captures cost
      # the default with every exporter on: the live lines, the periodic
      # explain, /metrics scraped each second, OTLP every 10 s
      alt) for a in ${ALT:-}; do window "auto-${a%%=*}" "$AUTO" --bin "${a#*=}" --live off; done ;;
      export) window auto-export "$AUTO" --live lines --explain-every 5s --prometheus 127.0.0.1:19464 \
                --otlp http://127.0.0.1:14318 ;;
    esac
  done
done
[ -n "${RECV:-}" ] && kill $RECV $SCRAPE 2>/dev/null
untraced
kill $P; wait $P 2>/dev/null
# torch.profiler in a process of its own (its teardown slows what follows).
PL="$OUT/$MODEL.prof.steps"
: > "$PL"
if [ "${PROF:-1}" != 0 ]; then
  CW_PROFILE_WINDOWS=$WIN python3 "$W/torch_train.py" 100000000 "$MODEL" "$PL" > /dev/null 2>&1 &
  P=$!
  sleep $((25 + 2 * WIN * ${PROF_ROUNDS:-$ROUNDS} + WIN))
  kill $P; wait $P 2>/dev/null
fi
python3 - "$L" "$WL" "$PL" "$MODEL" "$LEARN" <<'PY'
# Each window's 10th-percentile step: the VM adds seconds-long runs of slow
# steps (steal) to any window, traced or not, which move a window's median by
# up to 40% but its fast quantile by ~2% (docs/performance.md).
import statistics as st, sys
steps = [l.split() for l in open(sys.argv[1]) if l.strip()]
steps = [(float(t), float(ms)) for t, ms, *_ in steps]
wins = [(n, float(s), float(e)) for n, s, e in (l.split() for l in open(sys.argv[2]) if l.strip())]
learn = float(sys.argv[5])
def q(a, b, p=0.1):
    v = sorted(ms for t, ms in steps if a <= t <= b)
    return v[int(len(v) * p)] if len(v) >= 20 else None
rows = {}
for i, (name, s, e) in enumerate(wins):
    if name == "none":
        continue
    around = [q(w[1] + 1.0, w[2] - 0.2) for w in (wins[i - 1], wins[i + 1] if i + 1 < len(wins) else None) if w]
    around = [x for x in around if x]
    if not around:  # neither neighbour held 20 steps (the VM stalled): no base
        continue
    base = st.fmean(around)
    # leave out attach (1.5 s) and detach (0.2 s); auto: learning apart
    parts = {name: (s + 1.5, e - 0.2)} if not name.startswith("auto") else {
        name + ", first %gs (learning)" % learn: (s + 1.5, s + learn), name + ", steady": (s + learn + 0.5, e - 0.2)}
    for label, (a, b) in parts.items():
        m = q(a, b)
        if m:
            rows.setdefault(label, []).append((m / base - 1, m, base))
# torch.profiler: its first profiled window against the unprofiled one
# before it (after its first stop the process never returns to its speed).
prof = [l.split() for l in open(sys.argv[3]) if l.strip()]
prof = [(float(t), float(ms), int(p)) for t, ms, p in prof]
first = next((k for k, x in enumerate(prof) if x[2]), None)
if first:
    end = next((k for k in range(first, len(prof)) if not prof[k][2]), len(prof))
    def pq(xs):
        xs = sorted(ms for t, ms, _ in xs if t > xs[0][0] + 1.5)
        return xs[int(len(xs) * 0.1)] if len(xs) >= 20 else None
    u, p = pq(prof[:first]), pq(prof[first:end])
    if u and p:
        rows["torch.profiler (CPU+CUDA activities)"] = [(p / u - 1, p, u)]
print(f"| {sys.argv[4]} | added (median) | spread | windows | step p10, traced / untraced |")
print("|---|---|---|---|---|")
for label, v in rows.items():
    r = sorted(x[0] for x in v)
    print(f"| {label} | {100 * st.median(r):+.2f}% | {100 * r[0]:+.2f} … {100 * r[-1]:+.2f}% | {len(v)} | "
          f"{st.median(x[1] for x in v):.3f} / {st.median(x[2] for x in v):.3f} ms |")
PY
for f in "$OUT/$MODEL".auto*.txt; do [ -e "$f" ] && grep -h "launches: probed" "$f"; done
# attach: each second since attaching, against the untraced neighbours.
for A in $(awk '$1 ~ /^attach/ { print $1 }' "$WL" | sort -u); do
python3 - "$L" "$WL" "$MODEL" "$A" <<'PY'
import statistics as st, sys
steps = [l.split() for l in open(sys.argv[1]) if l.strip()]
steps = [(float(t), float(ms)) for t, ms, *_ in steps]
wins = [(n, float(s), float(e)) for n, s, e in (l.split() for l in open(sys.argv[2]) if l.strip())]
def med(a, b):
    v = [ms for t, ms in steps if a <= t < b]
    return st.median(v) if len(v) >= 5 else None
bins, base_spread = {}, []
for i, (name, s, e) in enumerate(wins):
    if name != sys.argv[4]:
        continue
    nb = [w for w in (wins[i - 1], wins[i + 1] if i + 1 < len(wins) else None) if w and w[0] == "none"]
    ref = [med(w[1] + 1.0, w[2] - 0.2) for w in nb]
    ref = [x for x in ref if x]
    if not ref:
        continue
    base = st.fmean(ref)
    # the untraced windows' own spread, second by second, for scale
    for w in nb:
        for k in range(int(w[2] - w[1]) - 1):
            m = med(w[1] + k, w[1] + k + 1)
            if m: base_spread.append(m / base - 1)
    for k in range(int(e - s)):
        m = med(s + k, s + k + 1)
        if m: bins.setdefault(k, []).append(m / base - 1)
print(f"| {sys.argv[3]} {sys.argv[4]}: second since attaching | added (median of rounds) | spread | rounds |")
print("|---|---|---|---|")
for k in sorted(bins):
    r = sorted(bins[k])
    print(f"| {k}-{k + 1} s | {100 * st.median(r):+.2f}% | {100 * r[0]:+.2f} … {100 * r[-1]:+.2f}% | {len(r)} |")
steady = sorted(x for k, v in bins.items() if k >= 5 for x in v)
if steady:
    print(f"| steady (5 s on) | {100 * st.median(steady):+.2f}% | {100 * steady[0]:+.2f} … {100 * steady[-1]:+.2f}% | |")
if base_spread:
    b = sorted(base_spread)
    print(f"| untraced, second by second | {100 * st.median(b):+.2f}% | {100 * b[len(b) // 10]:+.2f} … {100 * b[-len(b) // 10 - 1]:+.2f}% (p10-p90) | |")
PY
grep -h "drop\|lost" "$OUT/$MODEL".$A[0-9]*.txt | sort | uniq -c | head -5
done
