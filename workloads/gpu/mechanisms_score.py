"""Scores one row of workloads/gpu/mechanisms.sh: for a planted mode, the top
chain's cause and line against the planted ones (lib_mechanisms.py's
`# CALL:` lines); for a twin, clean when no chain is MEDIUM or above, and
never the twin's mechanism above LOW.
usage: mechanisms_score.py TAG EXPLAIN_JSON TRACE_LOG"""
import json
import os
import re
import sys

tag, path, log = sys.argv[1], sys.argv[2], sys.argv[3]
mode = tag.rsplit("_", 1)[0]
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib_mechanisms.py")
marks = {}
for n, line in enumerate(open(src), 1):
    m = re.search(r"# CALL: (\w+)", line)
    if m:
        marks[m.group(1)] = n
# The planted cause, and the lines that name it (any of them).
want = {"cudnn_autotune": ("autotuning", {marks["cudnn_forward"], marks["cudnn_backward"], marks["cudnn_conv"]}),
        "triton_autotune": ("autotuning", {marks["triton_call"]}),
        "graph_recapture": ("graph_recapture", {marks["graph_capture"], marks["graph_capture_body"]}),
        "memlimit": ("memory_limit", {marks["memlimit_read"]}),
        "threads": ("thread_oversubscription", {marks["cpu_matmul"], marks["set_threads"]})}
twin_of = {"cudnn_fixed": "autotuning", "triton_fixed": "autotuning", "graph_once": "graph_recapture",
           "memlimit_room": "memory_limit", "threads_fit": "thread_oversubscription"}
sev = ["LOW", "MEDIUM", "HIGH", "CRITICAL"]
try:
    j = json.load(open(path))
except Exception as e:  # a trace that failed says so in its log
    print(f"{tag}: no explanation ({e})")
    sys.exit(0)
chains = j.get("chains", [])
top = chains[0] if chains else None
step = next((l.strip() for l in open(log, errors="replace") if " steps=" in l), "no step line")


def describe(c):
    if not c:
        return "none"
    f = c.get("frame") or {}
    return f"{c['root_cause']} {c['severity']} line={f.get('line')}"


if mode in want:
    cause, lines = want[mode]
    ok = bool(top) and top["root_cause"] == cause and (top.get("frame") or {}).get("line") in lines
    verdict = "right" if ok else "wrong"
else:
    worst = max((sev.index(c["severity"]) for c in chains), default=-1)
    own = max((sev.index(c["severity"]) for c in chains if c["root_cause"] == twin_of[mode]), default=-1)
    ok = worst < sev.index("MEDIUM") and own < sev.index("MEDIUM")
    verdict = "clean" if ok else f"FALSE {sev[worst]}"
print(f"{tag}: {verdict} | top {describe(top)} | chains {len(chains)} | {step}")
for c in chains[:4]:
    print(f"    {describe(c)}: {c['evidence'][0]['text'][:220] if c['evidence'] else ''}")
