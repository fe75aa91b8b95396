#!/usr/bin/env python3
"""Finds flaky tests: runs the e2e and golden suites RUNS times on a clean
clone of a revision and lists every test that ever failed, with how often and
its failure lines (issue 70; the result goes in docs/reliability.md).

usage: bench/flaky_tests.py [--runs N] [--rev REV] [--labels REGEX]
                            [--filter REGEX] [--keep DIR]
  --runs N        how many times the suites run (default 5)
  --rev REV       the revision cloned (default HEAD of this checkout)
  --labels REGEX  ctest labels to run (default 'privileged|golden': the e2e
                  tests with real probes and the golden traces)
  --filter REGEX  only tests whose name matches (ctest -R), e.g. 'Path\\.'
  --keep DIR      build and clone there and keep them (default: a temp dir,
                  removed at the end)

Run it as root on a quiet machine (the e2e tests attach real probes, and a
busy machine is what they must withstand, not what they should measure).
Exit status 0 when every test passed every run, 1 when any failed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def clone_and_build(rev, work):
    src = os.path.join(work, "src")
    sh(["git", "clone", "-q", "--no-hardlinks", repo, src])
    sh(["git", "-C", src, "checkout", "-q", rev])
    print(f"flaky: building {rev} in {src}", flush=True)
    sh(["bash", ".ci/build"], cwd=src, stdout=subprocess.DEVNULL)
    return src


def run_once(src, labels, name_filter, junit):
    cmd = ["ctest", "--test-dir", os.path.join(src, "build"), "-L", labels, "-j1",
           "--timeout", "600", "--output-junit", junit]
    if name_filter:
        cmd += ["-R", name_filter]
    start = time.monotonic()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return rc, time.monotonic() - start


def failures(junit):
    """{test name: the first lines of its failure output} from ctest's JUnit file."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.get("status") in ("fail", "failed") or case.find("failure") is not None:
            text = case.findtext("system-out") or ""
            lines = [l for l in text.splitlines() if "Failure" in l or "Expected" in l or "Which is" in l
                     or "actual" in l.lower() or "error" in l.lower()]
            out[case.get("name")] = "\n".join((lines or text.splitlines()[-8:])[:8])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--labels", default="privileged|golden")
    ap.add_argument("--filter", default="")
    ap.add_argument("--keep", default="")
    a = ap.parse_args()
    rev = subprocess.run(["git", "-C", repo, "rev-parse", "--short", a.rev], check=True,
                         capture_output=True, text=True).stdout.strip()
    work = a.keep or tempfile.mkdtemp(prefix="cw-flaky-")
    os.makedirs(work, exist_ok=True)
    try:
        src = clone_and_build(rev, work)
        failed = {}  # name -> [(run, lines)]
        for i in range(1, a.runs + 1):
            junit = os.path.join(work, f"run{i}.xml")
            rc, secs = run_once(src, a.labels, a.filter, junit)
            f = failures(junit)
            total = sum(1 for _ in ET.parse(junit).getroot().iter("testcase"))
            print(f"flaky: run {i} of {a.runs}: {total - len(f)} of {total} passed, {secs:.0f} s"
                  + (f" (ctest exit {rc})" if rc and not f else ""), flush=True)
            for name, lines in f.items():
                failed.setdefault(name, []).append((i, lines))
        print(f"\n{rev}, {a.runs} runs, labels {a.labels}" + (f", filter {a.filter}" if a.filter else ""))
        if not failed:
            print("no test failed")
            return 0
        for name, runs in sorted(failed.items()):
            print(f"\n{name}: failed {len(runs)} of {a.runs} (runs {', '.join(str(r) for r, _ in runs)})")
            print("  " + runs[0][1].replace("\n", "\n  "))
        return 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
