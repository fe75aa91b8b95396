#!/usr/bin/env python3
"""Golden traces: `causeway explain --json` on real traces, pinned (ctest golden_explain).

Each NAME.db.xz here is a trace recorded by `causeway trace` (xz -9e); beside
it, NAME.explain.json is what `causeway explain --json --db NAME.db` printed,
normalised. `check` explains every trace again and fails, with a unified diff
per trace, if any output moved; `pin` rewrites the pinned outputs after a
deliberate change (README.md: the commit says why a verdict moved).

usage: golden.py check CAUSEWAY [NAME...]
       golden.py pin CAUSEWAY [NAME | PATH.db ...]

`pin` with no NAME re-pins every trace; a PATH.db adds that trace (copied,
compressed here as NAME.db.xz, NAME being its file name without .db) and pins
it: adding a trace is `golden.py pin CAUSEWAY /tmp/run/foo.db`.

Normalisation drops one field, `db` (top level): the path of the trace as
explain was given it, a fresh temporary folder on every run. Nothing else
varied: each trace was explained five times (from different folders, one run
under another TZ and locale) and the outputs were byte-identical but for `db`;
explain's JSON writer (src/present/explain_format.cpp, to_json) prints no
clock of its own and its keys are sorted (nlohmann::json). Timestamps in the
output (window, accounts, chain text) come from the trace and stay pinned, as
do verdicts, severities, lines, counts and every derived number. If a future
explain adds a field that varies run to run, drop it in DROPPED and say why
here.

Numbers: integers and strings compare exactly; floats (shares, GPU busy
fractions) compare to a relative 1e-9, so that a build with another compiler
or libm rounding a last bit differently does not fail the test; any real
movement of a share is far larger. Rounded numbers inside text fields
("30% of each 22.6 ms step") compare exactly.
"""
import argparse
import concurrent.futures
import difflib
import json
import lzma
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE_SUFFIX = ".db.xz"
PINNED_SUFFIX = ".explain.json"
DROPPED = ["db"]  # see the docstring
FLOAT_REL_TOL = 1e-9
EXPLAIN_TIMEOUT_S = 600
SIZE_BUDGET = 12 * 1000 * 1000  # bytes of .db.xz in all (README.md)


def trace_names():
    return sorted(f[: -len(TRACE_SUFFIX)] for f in os.listdir(HERE) if f.endswith(TRACE_SUFFIX))


def trace_path(name):
    return os.path.join(HERE, name + TRACE_SUFFIX)


def pinned_path(name):
    return os.path.join(HERE, name + PINNED_SUFFIX)


def normalise(out):
    for key in DROPPED:
        out.pop(key, None)
    return out


def dump(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def explain(causeway, name, tmp):
    """The normalised output of explain on trace NAME, and its seconds."""
    db = os.path.join(tmp, name + ".db")
    try:
        with lzma.open(trace_path(name)) as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        start = time.monotonic()
        r = subprocess.run([causeway, "explain", "--json", "--db", db], capture_output=True, text=True,
                           timeout=EXPLAIN_TIMEOUT_S)
        seconds = time.monotonic() - start
    except (OSError, lzma.LZMAError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(str(e)) from e
    finally:
        for f in (db, db + "-wal", db + "-shm"):
            if os.path.exists(f):
                os.unlink(f)
    if r.returncode != 0:
        raise RuntimeError(f"causeway explain exited with {r.returncode}: {r.stderr.strip()}")
    try:
        return normalise(json.loads(r.stdout)), seconds
    except ValueError as e:
        raise RuntimeError(f"causeway explain printed no JSON ({e})") from e


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
                and not isinstance(b, bool) and math.isclose(a, b, rel_tol=FLOAT_REL_TOL, abs_tol=0.0))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def explain_all(causeway, names, jobs):
    """{name: (output, seconds) or RuntimeError}, explained `jobs` at a time."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="causeway-golden-") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(explain, causeway, n, tmp): n for n in names}
            for f in concurrent.futures.as_completed(futures):
                try:
                    results[futures[f]] = f.result()
                except RuntimeError as e:
                    results[futures[f]] = RuntimeError(f"{futures[f]}: {e}")
    return results


def check(causeway, names, jobs):
    problems = []
    for name in names:
        if not os.path.exists(pinned_path(name)):
            problems.append(f"{name}: no pinned output; run: golden.py pin CAUSEWAY {name}")
    orphans = sorted(f[: -len(PINNED_SUFFIX)] for f in os.listdir(HERE)
                     if f.endswith(PINNED_SUFFIX) and not os.path.exists(trace_path(f[: -len(PINNED_SUFFIX)])))
    problems += [f"{o}: pinned output without a trace ({o}{TRACE_SUFFIX})" for o in orphans]
    names = [n for n in names if os.path.exists(pinned_path(n))]
    start = time.monotonic()
    results = explain_all(causeway, names, jobs)
    moved = []
    for name in names:
        res = results[name]
        if isinstance(res, RuntimeError):
            problems.append(str(res))
            continue
        out, seconds = res
        with open(pinned_path(name)) as f:
            pinned_text = f.read()
        if same(json.loads(pinned_text), out):
            print(f"ok    {name} ({seconds:.1f} s)", flush=True)
            continue
        moved.append(name)
        print(f"MOVED {name} ({seconds:.1f} s)", flush=True)
        sys.stdout.writelines(difflib.unified_diff(
            pinned_text.splitlines(keepends=True), dump(out).splitlines(keepends=True),
            fromfile=f"pinned/{name}{PINNED_SUFFIX}", tofile=f"now/{name}{PINNED_SUFFIX}", n=4))
    print(f"{len(names)} traces in {time.monotonic() - start:.1f} s ({jobs} at a time)")
    for p in problems:
        print("FAIL  " + p)
    if moved:
        print(f"moved: {' '.join(moved)}\nIf the change is deliberate: tests/golden/golden.py pin CAUSEWAY "
              f"{' '.join(moved)}, and say in the commit message why each verdict moved (tests/golden/README.md).")
    return 1 if moved or problems else 0


def add_trace(path):
    """Compress the trace at PATH here (xz -9e); its name."""
    name = os.path.basename(path)
    if not name.endswith(".db"):
        raise SystemExit(f"{path}: a trace to add must be a .db file")
    name = name[: -len(".db")]
    wal = path + "-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        raise SystemExit(f"{path} has a non-empty -wal file (still being written, or not checkpointed): "
                         f"let the trace end, or copy it with `sqlite3 {path} .backup COPY.db`")
    if os.path.exists(trace_path(name)):
        raise SystemExit(f"{name}{TRACE_SUFFIX} is already here: rename {path}, or remove the old trace first")
    with open(path, "rb") as src, lzma.open(trace_path(name), "wb", preset=9 | lzma.PRESET_EXTREME) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    print(f"added {name}{TRACE_SUFFIX} ({os.path.getsize(trace_path(name))} bytes)")
    return name


def pin(causeway, args, jobs):
    names = [add_trace(a) if a.endswith(".db") else a for a in args] or trace_names()
    missing = [n for n in names if not os.path.exists(trace_path(n))]
    if missing:
        raise SystemExit(f"no such trace here: {' '.join(missing)} (known: {' '.join(trace_names())})")
    results = explain_all(causeway, names, jobs)
    failed = False
    for name in names:
        res = results[name]
        if isinstance(res, RuntimeError):
            print(f"FAIL  {res}")
            failed = True
            continue
        out, seconds = res
        old = open(pinned_path(name)).read() if os.path.exists(pinned_path(name)) else None
        with open(pinned_path(name), "w") as f:
            f.write(dump(out))
        state = "new" if old is None else ("unchanged" if old == dump(out) else "re-pinned")
        print(f"{state:10s}{name} ({seconds:.1f} s)")
    total = sum(os.path.getsize(trace_path(n)) for n in trace_names())
    print(f"traces here: {total / 1e6:.2f} MB compressed" +
          (f", over the {SIZE_BUDGET / 1e6:.0f} MB budget (README.md)" if total > SIZE_BUDGET else ""))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", choices=["check", "pin"])
    ap.add_argument("causeway", help="the causeway binary")
    ap.add_argument("traces", nargs="*", help="trace names (default: all); for pin also PATH.db to add one")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="explains at a time (default: CPUs)")
    a = ap.parse_args()
    causeway = os.path.abspath(a.causeway)
    if not os.access(causeway, os.X_OK):
        raise SystemExit(f"{a.causeway}: not an executable causeway binary")
    jobs = max(1, a.jobs)
    if a.verb == "pin":
        return pin(causeway, a.traces, jobs)
    unknown = [n for n in a.traces if not os.path.exists(trace_path(n))]
    if unknown:
        raise SystemExit(f"no such trace here: {' '.join(unknown)} (known: {' '.join(trace_names())})")
    return check(causeway, a.traces or trace_names(), jobs)


if __name__ == "__main__":
    sys.exit(main())
