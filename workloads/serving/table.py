#!/usr/bin/env python3
"""The client's numbers from loadgen.py's truth files.
  table.py TRUTH.json                 one run's table (and the short and the
                                      long prompts' apart, where it had both)
  table.py --twins DIR ROW...         per row, DIR/ROW.*.truth.json pooled
                                      (all runs' requests), beside its twin
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loadgen import summarize, table  # noqa: E402

TWIN = {"long-prompts": "clean", "gc": "clean", "sampling": "clean", "detok": "clean",
        "contention": "pinned", "overload": "clean"}


def load(path):
    with open(path) as f:
        return json.load(f)


def twins(folder, rows):
    pooled = {}
    for row in rows:
        recs, wall = [], 0.0
        for path in sorted(glob.glob(os.path.join(folder, f"{row}.*.truth.json"))):
            t = load(path)
            recs += t["requests"]
            wall += t["summary"].get("wall_s") or 0.0
        if recs:
            pooled[row] = summarize(recs, wall)
    head = (f"{'row':14}{'twin':8}{'n':>6}{'ttft p50':>10}{'p99':>9}{'tpot p50':>10}{'p99':>8}"
            f"{'dur p99':>9}{'req/s':>7}  vs twin: ttft p99, tpot p50")
    print(head)
    for row, s in pooled.items():
        twin = TWIN.get(row)
        t = pooled.get(twin)
        vs = ""
        if t and twin != row:
            vs = f"  x{s['ttft_ms']['p99'] / t['ttft_ms']['p99']:.2f}, x{s['tpot_ms']['p50'] / t['tpot_ms']['p50']:.2f}"
        print(f"{row:14}{twin or '-':8}{s['count']:6d}{s['ttft_ms']['p50']:10.1f}{s['ttft_ms']['p99']:9.1f}"
              f"{s['tpot_ms']['p50']:10.2f}{s['tpot_ms']['p99']:8.2f}{s['duration_ms']['p99']:9.1f}"
              f"{s.get('throughput_rps', 0):7.1f}{vs}")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--twins":
        twins(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 2:
        t = load(sys.argv[1])
        print(table(summarize(t["requests"], t["summary"].get("wall_s"))))
        if any(r["long"] for r in t["requests"]):  # the long prompts' and the others' (their victims')
            for label, long in (("short prompts: ", False), ("long prompts: ", True)):
                print(table(summarize([r for r in t["requests"] if r["long"] == long]), label))
    else:
        sys.exit("usage: table.py TRUTH.json | table.py --twins DIR ROW...")


if __name__ == "__main__":
    main()
