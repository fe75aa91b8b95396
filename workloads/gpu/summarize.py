"""The table of workloads/gpu/validate.sh: for each planted mode, the chain
explain put first, its Python line, and whether both are the planted ones.
usage: summarize.py planted.py DBDIR MODE..."""
import json
import os
import sys

planted, dbdir, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
expected = {
    "clean": None, "contention": "cpu_contention", "pageable": "memcpy_bound", "churn": "allocator_churn",
    "sync-storm": "sync_bound", "launch-bound": "launch_bound", "input-bound": "input_bound", "mmap-io": "io_stall",
    "graph-recapture": "graph_recapture", "shared": "gpu_shared", "host-bound": "host_bound", "leak": "memory_leak",
    "oom": "out_of_memory", "oob": "call_failures",
}
markers = {}
for n, line in enumerate(open(planted), 1):
    if "# CALL: " in line:
        markers[line.split("# CALL: ")[1].split()[0]] = n
markers["shared"] = markers.get("clean")  # the same loop, its sync slowed by the other process

print("| planted | expected first | explain's first | severity | its line | planted line | cause | line | drops |")
print("|---|---|---|---|---|---|---|---|---|")
right = lines_right = 0
for m in modes:
    try:
        j = json.load(open(os.path.join(dbdir, m + ".json")))
    except Exception as e:
        print(f"| {m} | {expected.get(m)} | (no explain: {e}) | | | | no | no | |")
        continue
    chains = j.get("chains", [])
    top = chains[0] if chains else None
    want = expected.get(m)
    frame = top.get("frame") if top else None
    where = f"{os.path.basename(frame['file'])}:{frame['line']}" if frame else (top or {}).get("no_frame_reason", "")
    line_ok = bool(frame) and frame["file"].endswith("planted.py") and frame["line"] == markers.get(m)
    if want is None:
        ok = not top or top["severity"] not in ("HIGH", "CRITICAL")
        line_ok = True
    else:
        ok = bool(top) and top["root_cause"] == want
    right += ok
    lines_right += ok and line_ok
    drops = j.get("data", {}).get("drops", "?")
    print(f"| {m} | {want or 'no HIGH chain'} | {top['root_cause'] if top else 'none'} | "
          f"{top['severity'] if top else ''} | {where} | {markers.get(m, '')} | {'yes' if ok else 'NO'} | "
          f"{'yes' if line_ok else 'NO'} | {drops} |")
print(f"\n{right} of {len(modes)} first; {lines_right} of {len(modes)} first with the planted line")
