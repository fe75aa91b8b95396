"""Scores one cross-rank row (workloads/gpu/ranks.sh): the top chain against
the cause planted in ddp_ranks.py's MODE, and the truth without the tracer
from the ranks' own step logs (perf_counter before the step, after backward,
after the optimizer and the loss read-back).
usage: ranks_score.py TAG EXPLAIN_JSON STEPS_LOG_PREFIX"""
import json
import os
import re
import statistics
import sys

tag, path, steps = sys.argv[1], sys.argv[2], sys.argv[3]
mode = re.sub(r"_\d+(_merged)?$", "", tag)
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_ranks.py")
marks = {}
for n, line in enumerate(open(src), 1):
    m = re.search(r"# CALL: (\w+)$", line.rstrip())
    if m:
        marks[m.group(1)] = n
want = {"host": ("straggler_rank", marks["augment"]), "input": ("straggler_rank", marks["decode"]),
        "gpushare": ("straggler_rank", None), "hang": ("hung_collective", marks["hang"])}
try:
    j = json.load(open(path))
except Exception as e:  # a trace that failed says so in its log
    print(f"{tag}: no explanation ({e})")
    sys.exit(0)
chains = j.get("chains", [])
sev = ["LOW", "MEDIUM", "HIGH", "CRITICAL"]
top = chains[0] if chains else None
worst = max((sev.index(c["severity"]) for c in chains), default=-1)
drops = j.get("data", {}).get("drops", 0)


def describe(c):
    if not c:
        return "none"
    f = c.get("frame") or {}
    rank = next((e.get("rank") for e in c["evidence"] if "rank" in e), None)
    return f"{c['root_cause']} {c['severity']} rank={rank} line={f.get('line')}"


if mode in ("clean", "fsdp"):
    ok = worst < sev.index("MEDIUM")
    verdict = "clean" if ok else f"FALSE {sev[worst]}"
else:
    cause, line = want[mode]
    ok = bool(top) and top["root_cause"] == cause and (line is None or (top.get("frame") or {}).get("line") == line)
    # the planted rank is the last: its step log is the last one written
    ranks = sum(os.path.exists(f"{steps}.{r}.json") for r in range(64))
    rank = next((e.get("rank") for e in top["evidence"] if "rank" in e), None) if top else None
    if ok and cause == "straggler_rank" and ranks and rank != ranks - 1:
        ok = False
    verdict = "right" if ok else "wrong"
truth = []
for r in range(64):
    try:
        log = json.load(open(f"{steps}.{r}.json"))[10:]
    except Exception:
        break
    step = statistics.median(b[0] - a[0] for a, b in zip(log, log[1:])) * 1e3
    after = statistics.median(x[2] - x[1] for x in log) * 1e3
    truth.append(f"r{r} step {step:.1f} ms opt+readback {after:.1f} ms")
print(f"{tag}: {verdict} | top {describe(top)} | chains {len(chains)} | drops {drops} | {'; '.join(truth)}")
for c in chains[:4]:
    print(f"    {describe(c)}: {c['evidence'][0]['text'][:220] if c['evidence'] else ''}")
