"""Where the first seconds of an attached trace cost the workload: reads what
`TIMELINE=1 MODES=attach... bench/gpu_overhead.sh` left in OUT and prints, for
each attached mode, every second since attaching (medians over rounds): the
step against the untraced neighbours, the share of the second inside a launch
window, the time the agent spent attaching or detaching probes in it, the
return-site probes attached in it, the agent's CPU, the workload's user and
system CPU (a trap is the workload's system time), and the slowest step.
usage: python3 bench/attach_timeline.py OUT MODEL"""
import glob
import os
import re
import statistics as st
import sys

out, model = sys.argv[1], sys.argv[2]
steps = [l.split() for l in open(f"{out}/{model}.steps") if l.strip()]
steps = [(float(t), float(ms)) for t, ms, *_ in steps]
wins = [(n, float(s), float(e)) for n, s, e in (l.split() for l in open(f"{out}/{model}.windows") if l.strip())]
HZ = os.sysconf("SC_CLK_TCK")


def steps_in(a, b):
    return [ms for t, ms in steps if a <= t < b]


def med(a, b):
    v = steps_in(a, b)
    return st.median(v) if len(v) >= 3 else None


# SMT siblings (lscpu -p=CPU,CORE saved as OUT/cpus), else each CPU its own core
core = {}
try:
    for l in open(f"{out}/cpus"):
        if l[0].isdigit():
            c, k = l.strip().split(",")[:2]
            core[int(c)] = int(k)
except FileNotFoundError:
    pass


def sibling(a, b):
    return a == b or (a in core and core.get(a) == core.get(b))


log_re = re.compile(r"causeway: (\d+\.\d+) debug: (.*)")
rounds = {}
for i, (name, s, e) in enumerate(wins):
    if not name.startswith("attach"):
        continue
    r = sum(1 for w in wins[:i] if w[0] == name) + 1
    nb = [w for w in (wins[i - 1], wins[i + 1] if i + 1 < len(wins) else None) if w and w[0] == "none"]
    ref = [x for x in (med(w[1] + 1.0, w[2] - 0.2) for w in nb) if x]
    if not ref:
        continue
    base = st.fmean(ref)
    # the agent's log: window edges and toggle costs, return-site attaches
    on, toggles, retsites = [], [], []
    try:
        for line in open(f"{out}/{model}.{name}{r}.txt"):
            m = log_re.match(line)
            if not m:
                continue
            t, msg = float(m.group(1)), m.group(2)
            if msg.startswith("launch probes attached:") or msg.startswith("launch probes detached:"):
                us = int(re.search(r"in (\d+) us", msg).group(1))
                toggles.append((t - us / 1e6, t, "attached" in msg))
            elif msg.startswith("return-site probe"):
                retsites.append(t)
    except FileNotFoundError:
        pass
    # windows: from an attach's end to the next detach's start
    opened = None
    for a, b, is_on in toggles:
        if is_on:
            opened = b
        elif opened is not None:
            on.append((opened, a))
            opened = None
    if opened is not None:
        on.append((opened, e))
    cpu, placed = [], []
    try:
        for l in open(f"{out}/{model}.{name}{r}.cpu"):
            f = l.split()
            if len(f) >= 5:
                cpu.append((float(f[0]), int(f[1]) + int(f[2]), int(f[3]), int(f[4])))
            if len(f) >= 8:  # the main thread's CPU, then the running agent threads'
                placed.append((int(f[7]), [int(c) for c in f[8].split(",") if c] if len(f) > 8 else []))
    except FileNotFoundError:
        pass

    def cpu_delta(a, b, col):
        xs = [c for c in cpu if a <= c[0] < b]
        return (xs[-1][col] - xs[0][col]) / HZ / max(1e-9, xs[-1][0] - xs[0][0]) if len(xs) >= 2 else None

    def overlap(iv, a, b):
        return sum(max(0.0, min(y, b) - max(x, a)) for x, y in iv)

    for k in range(int(e - s)):
        a, b = s + k, s + k + 1
        m = med(a, b)
        v = steps_in(a, b)
        rounds.setdefault(name, {}).setdefault(k, []).append({
            "step": m / base - 1 if m else None,
            "mean": st.fmean(v) / base - 1 if v else None,
            "win": overlap(on, a, b),
            "toggle": overlap([(x, y) for x, y, _ in toggles], a, b),
            "retsites": sum(1 for t in retsites if a <= t < b),
            "agent": cpu_delta(a, b, 1), "utime": cpu_delta(a, b, 2), "stime": cpu_delta(a, b, 3),
            "max": max(v) / base if v else None,
        })
    # inside windows against outside, this round, whole steps only
    ins = [ms for t, ms in steps if any(x + 0.02 <= t <= y for x, y in on) and s <= t < e]
    outs = [ms for t, ms in steps if s + 1.5 <= t < e and not any(x - 0.05 <= t <= y + 0.05 for x, y in on)]
    if ins and outs:
        print(f"{name} round {r}: steps inside windows {st.median(ins) / base - 1:+.1%} (n={len(ins)}), "
              f"outside {st.median(outs) / base - 1:+.1%} (n={len(outs)}); {len(toggles)} toggles, "
              f"{sum(y - x for x, y, _ in toggles) * 1e3:.0f} ms toggling, {len(retsites)} return sites")
    # The VM's own stalls: the share of time in steps over 1.5x the base, in
    # the untraced neighbours against the trace; and the second after the
    # agent has gone (a cost still there is not the probes').
    def stalled(a, b):
        v = steps_in(a, b)
        return sum(ms - base for ms in v if ms > 1.5 * base) / 1e3 / max(1e-9, b - a)
    after = med(e, e + 1.0)
    shared = sum(1 for c, ag in placed if any(sibling(c, x) for x in ag))
    print(f"{name} round {r}: stalls {stalled(s + 1.5, e):.2%} of the trace's time, "
          f"{st.fmean(stalled(w[1] + 1.0, w[2]) for w in nb):.2%} untraced; the second after the agent left "
          f"{(after / base - 1) if after else float('nan'):+.1%}; an agent thread running on the workload "
          f"thread's core in {shared} of {len(placed)} samples")


def mid(xs):
    xs = [x for x in xs if x is not None]
    return st.median(xs) if xs else float("nan")


for name, ks in rounds.items():
    print(f"\n| {model} {name}: second | step (median) | step (mean) | in window | toggling | return sites | "
          f"agent CPU | workload user | workload sys | slowest step / base |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in sorted(ks):
        v = ks[k]
        print(f"| {k}-{k + 1} | {mid(x['step'] for x in v):+.1%} | {mid(x['mean'] for x in v):+.1%} | "
              f"{mid(x['win'] for x in v) * 1e3:.0f} ms | {mid(x['toggle'] for x in v) * 1e3:.0f} ms | "
              f"{mid(x['retsites'] for x in v):.0f} | {mid(x['agent'] for x in v):.2f} | {mid(x['utime'] for x in v):.2f} | "
              f"{mid(x['stime'] for x in v):.2f} | {mid(x['max'] for x in v):.2f} |")
