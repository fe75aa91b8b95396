#!/usr/bin/env python3
"""A CPU burner pinned to the given CPUs (a neighbour on the engine's CPUs,
for server.py --mode contention): spins until SIGTERM or SIGINT.
usage: burners.py --cpus LIST"""
import argparse
import os
import signal
import sys

p = argparse.ArgumentParser(description="a CPU burner pinned to CPUs")
p.add_argument("--cpus", required=True, help="e.g. 1 or 2-3")
args = p.parse_args()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import parse_cpus  # noqa: E402

os.sched_setaffinity(0, parse_cpus(args.cpus))
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
signal.signal(signal.SIGINT, lambda *_: os._exit(0))
x = 0
while True:
    x += 1
