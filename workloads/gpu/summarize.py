"""The table of workloads/gpu/validate.sh: for each planted row and each run,
the chain explain put first and its Python line, scored against the planted
cause and line; then, per row, in how many runs the top chain was the same,
the planted cause came first, and the planted line was named.
usage: summarize.py DBDIR ROW...
A row is a planted.py MODE, static-loop, or SHAPE:CAUSE[@attach] of shapes.py
(whose EXPECTED table gives the cause and whether it has a line)."""
import ast
import collections
import json
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
dbdir, rows = sys.argv[1], sys.argv[2:]

planted_expected = {
    "clean": None, "contention": "cpu_contention", "pageable": "memcpy_bound", "churn": "allocator_churn",
    "sync-storm": "sync_bound", "launch-bound": "launch_bound", "input-bound": "input_bound", "mmap-io": "io_stall",
    "graph-recapture": "graph_recapture", "shared": "gpu_shared", "host-bound": "host_bound", "leak": "memory_leak",
    "oom": "out_of_memory", "oob": "call_failures", "torch-cupy-crash": "call_failures",
    "fault-mid": "call_failures", "churn-vary": "allocator_churn", "gil": "gil_contention",
    "lock": "lock_contention", "pinning": "pinning", "contention-backward": "cpu_contention",
    "item-loop": "sync_bound", "static-loop": "sync_bound",
}


def markers_of(path):
    """`# CALL: KEY` markers: KEY -> [(file name, line)], each line of the
    plant (pinning's register and unregister): naming any of them is right."""
    found = {}
    for n, line in enumerate(open(path), 1):
        if "# CALL: " in line:
            found.setdefault(line.split("# CALL: ")[1].split()[0], []).append((os.path.basename(path), n))
    return found


planted_marks = markers_of(os.path.join(here, "planted.py"))
planted_marks["shared"] = planted_marks.get("clean")  # the same loop, its sync slowed by the other process
shape_marks = markers_of(os.path.join(here, "shapes.py"))
shape_expected = {}
for node in ast.parse(open(os.path.join(here, "shapes.py")).read()).body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EXPECTED" for t in node.targets):
        shape_expected = ast.literal_eval(node.value)


def expectation(row):
    """(root cause or None for clean, the marker (file, line) / function name / None)."""
    if row == "static-loop":
        return "sync_bound", "step_sync"  # a C++ program: its function (native frame)
    if ":" not in row:
        return planted_expected.get(row), planted_marks.get(row)
    shape, cause = row.split("@")[0].split(":")
    want, has_line = shape_expected.get(cause, (None, False))
    mark = shape_marks.get(f"{shape}:{cause}") or shape_marks.get(cause)
    return want, (mark if has_line else None)


def file_name(row):
    return row.replace(":", "-").replace("@", "-")


def runs_of(row):
    pat = re.compile(re.escape(file_name(row)) + r"\.(\d+)\.json$")
    found = sorted((int(m.group(1)), f) for f in os.listdir(dbdir) if (m := pat.match(f)))
    return [f for _, f in found]


def score(row, path):
    try:
        j = json.load(open(os.path.join(dbdir, path)))
    except Exception as e:
        return {"top": f"(no explain: {e})", "ok": False, "line_ok": False, "where": "", "sev": "", "drops": "?"}
    chains = j.get("chains", [])
    top = chains[0] if chains else None
    want, mark = expectation(row)
    frame = top.get("frame") if top else None
    where = f"{os.path.basename(frame['file'])}:{frame['line']}" if frame else (top or {}).get("no_frame_reason", "")
    if isinstance(mark, str):
        line_ok = bool(frame) and mark in frame.get("func", "")
        where = frame["func"] if frame else where
    elif mark is None:
        line_ok = True
    else:
        line_ok = bool(frame) and (os.path.basename(frame["file"]), frame["line"]) in mark
    if want is None:
        ok = not top or top["severity"] not in ("HIGH", "CRITICAL", "MEDIUM")
        line_ok = True
    else:
        ok = bool(top) and top["root_cause"] == want
    return {"top": top["root_cause"] if top else "none", "sev": top["severity"] if top else "", "ok": ok,
            "line_ok": ok and line_ok, "where": where, "drops": j.get("data", {}).get("drops", "?")}


print("| planted | expected first | runs | same top chain | planted cause first | with the line | "
      "top chains (severity) | lines named | drops |")
print("|---|---|---|---|---|---|---|---|---|")
totals = collections.Counter()
for r in rows:
    want, mark = expectation(r)
    results = [score(r, f) for f in runs_of(r)]
    n = len(results)
    if not n:
        print(f"| {r} | {want or 'nothing above LOW'} | 0 | | | | (not run) | | |")
        continue
    tops = collections.Counter(f"{x['top']} {x['sev']}".strip() for x in results)
    same = max(collections.Counter(x["top"] for x in results).values())
    first = sum(x["ok"] for x in results)
    lined = sum(x["line_ok"] for x in results)
    wheres = collections.Counter(x["where"] for x in results if x["where"])
    drops = sum(x["drops"] for x in results if isinstance(x["drops"], int))
    has_line = want is not None and mark is not None
    totals.update(rows=1, runs=n, all_same=same == n, first=first, lined=lined if has_line else first,
                  first_all=first == n, good4=(lined if has_line else first) >= min(4, n))
    print(f"| {r} | {want or 'nothing above LOW'} | {n} | {same}/{n} | {first}/{n} | "
          f"{f'{lined}/{n}' if has_line else '(no line)'} | "
          f"{', '.join(f'{k} x{v}' for k, v in tops.most_common())} | "
          f"{', '.join(f'{k} x{v}' for k, v in wheres.most_common(2))} | {drops} |")
print(f"\n{totals['rows']} rows, {totals['runs']} runs: the same top chain in every run for {totals['all_same']}; "
      f"the planted cause first in {totals['first']} runs ({totals['first_all']} rows in every run); "
      f"cause first with its line (where it has one) in {totals['lined']} runs; "
      f"at least 4 of 5 (or all, under 5 runs) for {totals['good4']} rows")
