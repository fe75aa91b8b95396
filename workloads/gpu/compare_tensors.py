"""Compare causeway's tensors with PyTorch's snapshot taken in the same process
(workloads/gpu/tensors.py SNAPSHOT.json): the bytes live tensors held at the
snapshot's moment, by the line of the workload that made them (its innermost
frame in that file; "no line": a thread with no Python stack, as the autograd
thread's gradients), top 5 by bytes on each side.
usage: compare_tensors.py TRACE.db SNAPSHOT.json
Prints a markdown table and a last line `agree: yes|no` (the same top-5 lines,
each within 1%)."""
import json
import sqlite3
import sys

db_path, snap_path = sys.argv[1], sys.argv[2]
snap = json.load(open(snap_path))
pid, t, file = snap["pid"], snap["wall_ns"], snap["file"]
db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)

line_of = {}


def line(stack_id):
    if stack_id is None:
        return "no line"
    if stack_id not in line_of:
        row = db.execute("SELECT line FROM stack_frames WHERE stack_id = ? AND kind = 'python' AND file = ? "
                         "ORDER BY depth LIMIT 1", (stack_id, file)).fetchone()
        line_of[stack_id] = str(row[0]) if row else "no line"
    return line_of[stack_id]


ours = {}
for stack_id, nbytes in db.execute(
        "SELECT stack_id, bytes FROM tensor_allocations WHERE pid = ? AND ts_ns <= ? "
        "AND (freed_ts_ns IS NULL OR freed_ts_ns > ?)", (pid, t, t)):
    e = ours.setdefault(line(stack_id), {"bytes": 0, "tensors": 0})
    e["bytes"] += nbytes
    e["tensors"] += 1
theirs = snap["by_line"]


def top(d):
    return [k for k, _ in sorted(d.items(), key=lambda kv: -kv[1]["bytes"])[:5]]


rows = []
agree = top(ours) == top(theirs)
print("| line | torch snapshot | causeway | difference |")
print("|---|---|---|---|")
for k in sorted(set(top(ours)) | set(top(theirs)), key=lambda k: -theirs.get(k, ours.get(k))["bytes"]):
    a, b = theirs.get(k, {"bytes": 0, "tensors": 0}), ours.get(k, {"bytes": 0, "tensors": 0})
    diff = (b["bytes"] - a["bytes"]) / a["bytes"] if a["bytes"] else float("inf")
    agree = agree and abs(diff) <= 0.01
    print(f"| {k} | {a['bytes'] / 2**20:.1f} MiB ({a['tensors']}) | {b['bytes'] / 2**20:.1f} MiB ({b['tensors']}) "
          f"| {100 * diff:+.2f}% |")
print(f"all live: torch {sum(v['bytes'] for v in theirs.values()) / 2**20:.1f} MiB, "
      f"causeway {sum(v['bytes'] for v in ours.values()) / 2**20:.1f} MiB")
print("agree:", "yes" if agree else "no")
