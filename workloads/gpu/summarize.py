"""The table of workloads/gpu/validate.sh: for each planted mode and each run,
the chain explain put first and its Python line, scored against the planted
cause and line; then, per mode, in how many runs the top chain was the same,
the planted cause came first, and the planted line was named.
usage: summarize.py planted.py DBDIR MODE..."""
import collections
import json
import os
import re
import sys

planted, dbdir, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
expected = {
    "clean": None, "contention": "cpu_contention", "pageable": "memcpy_bound", "churn": "allocator_churn",
    "sync-storm": "sync_bound", "launch-bound": "launch_bound", "input-bound": "input_bound", "mmap-io": "io_stall",
    "graph-recapture": "graph_recapture", "shared": "gpu_shared", "host-bound": "host_bound", "leak": "memory_leak",
    "oom": "out_of_memory", "oob": "call_failures", "torch-cupy-crash": "call_failures",
    "fault-mid": "call_failures", "churn-vary": "allocator_churn", "gil": "gil_contention",
    "lock": "lock_contention", "pinning": "pinning", "contention-backward": "cpu_contention",
    "item-loop": "sync_bound", "static-loop": "sync_bound",
}
markers = {}
for n, line in enumerate(open(planted), 1):
    if "# CALL: " in line:
        markers[line.split("# CALL: ")[1].split()[0]] = n
markers["shared"] = markers.get("clean")  # the same loop, its sync slowed by the other process
markers["static-loop"] = "step_sync"     # a C++ program: its function (native frame)


def runs_of(mode):
    pat = re.compile(re.escape(mode) + r"\.(\d+)\.json$")
    found = sorted((int(m.group(1)), f) for f in os.listdir(dbdir) if (m := pat.match(f)))
    if not found and os.path.exists(os.path.join(dbdir, mode + ".json")):
        found = [(1, mode + ".json")]
    return [f for _, f in found]


def score(mode, path):
    try:
        j = json.load(open(os.path.join(dbdir, path)))
    except Exception as e:
        return {"top": f"(no explain: {e})", "ok": False, "line_ok": False, "where": "", "sev": "", "drops": "?"}
    chains = j.get("chains", [])
    top = chains[0] if chains else None
    want = expected.get(mode)
    frame = top.get("frame") if top else None
    where = f"{os.path.basename(frame['file'])}:{frame['line']}" if frame else (top or {}).get("no_frame_reason", "")
    mark = markers.get(mode)
    if isinstance(mark, str):
        line_ok = bool(frame) and mark in frame.get("func", "")
        where = frame["func"] if frame else where
    else:
        line_ok = bool(frame) and frame["file"].endswith("planted.py") and frame["line"] == mark
    if want is None:
        ok = not top or top["severity"] not in ("HIGH", "CRITICAL")
        line_ok = True
    else:
        ok = bool(top) and top["root_cause"] == want
    return {"top": top["root_cause"] if top else "none", "sev": top["severity"] if top else "", "ok": ok,
            "line_ok": ok and line_ok, "where": where, "drops": j.get("data", {}).get("drops", "?")}


print("| planted | expected first | runs | same top chain | planted cause first | with the line | "
      "top chains (severity) | lines named | drops |")
print("|---|---|---|---|---|---|---|---|---|")
totals = collections.Counter()
for m in modes:
    results = [score(m, f) for f in runs_of(m)]
    n = len(results)
    if not n:
        print(f"| {m} | {expected.get(m) or 'no HIGH chain'} | 0 | | | | (not run) | | |")
        continue
    tops = collections.Counter(f"{r['top']} {r['sev']}".strip() for r in results)
    same = max(collections.Counter(r["top"] for r in results).values())
    first = sum(r["ok"] for r in results)
    lined = sum(r["line_ok"] for r in results)
    wheres = collections.Counter(r["where"] for r in results if r["where"])
    drops = sum(r["drops"] for r in results if isinstance(r["drops"], int))
    totals.update(modes=1, runs=n, all_same=same == n, all_first=first == n, lines4=lined >= min(4, n) or
                  expected.get(m) is None)
    print(f"| {m} | {expected.get(m) or 'no HIGH chain'} | {n} | {same}/{n} | {first}/{n} | "
          f"{'' if expected.get(m) is None else f'{lined}/{n}'} | "
          f"{', '.join(f'{k} x{v}' for k, v in tops.most_common())} | "
          f"{', '.join(f'{k} x{v}' for k, v in wheres.most_common(2))} | {drops} |")
print(f"\n{totals['modes']} planted loops, {totals['runs']} runs: the same top chain in every run for "
      f"{totals['all_same']}, the planted cause first in every run for {totals['all_first']}, the planted "
      f"line in at least 4 of 5 runs for {totals['lines4']}")
