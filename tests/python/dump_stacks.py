"""Prints each recorded call of a trace file with its stack (for reading a
GPU-host run by eye; docs/python.md): python3 tests/python/dump_stacks.py trace.db"""
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
seen = set()
for op, sid, n in db.execute(
        "SELECT op, stack_id, count(*) FROM cuda_calls WHERE stack_id IS NOT NULL "
        "GROUP BY op, stack_id ORDER BY min(ts_ns)"):
    print(f"{op} x{n} stack {sid}")
    for depth, kind, func, file, line, module in db.execute(
            "SELECT depth, kind, func, file, line, module FROM stack_frames WHERE stack_id = ? "
            "ORDER BY depth", (sid,)):
        where = f"{file}:{line}" if kind == "python" else module
        print(f"  {depth:2} {kind:6} {func[:90]}  {where}")
print("calls without stack:",
      db.execute("SELECT op, count(*) FROM cuda_calls WHERE stack_id IS NULL GROUP BY op").fetchall())
