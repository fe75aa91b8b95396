#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No file in src/ runs over LIMIT lines (issue 64): a file that holds several
concerns is split by concern, each file named after what it holds.

Files over the limit that are still to be split are listed in WAITING with
their size when the test was written: each may shrink but not grow, and one
that has come under the limit must leave the list (the test says so), so the
list only gets shorter.

  file_length.py SRC_DIR [LIMIT]   exits 1 and lists each long file
"""
import os
import sys

SOURCES = ('.cpp', '.h', '.hpp', '.c')

# path under SRC_DIR: lines when listed (split, then remove the entry)
WAITING = {
    'analyze/critical_path.cpp': 963,  # the path builder: the passes refactor (issue 64) takes it apart
    'demo/scenarios.cpp': 901,
}


def line_count(path):
    with open(path, 'rb') as f:
        return sum(1 for _ in f)


def problems(src, limit, waiting):
    out = []
    seen = set()
    for d, _, files in sorted(os.walk(src)):
        for name in sorted(files):
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(d, name)
            rel = os.path.relpath(path, src)
            n = line_count(path)
            if rel in waiting:
                seen.add(rel)
                if n > waiting[rel]:
                    out.append(f'{path}: {n} lines, more than the {waiting[rel]} it had when listed as '
                               f'waiting to be split: split it')
                elif n <= limit:
                    out.append(f'{path}: {n} lines, under {limit} now: remove it from WAITING in {__file__}')
            elif n > limit:
                out.append(f'{path}: {n} lines (over {limit}): split it by concern')
    out += [f'{rel}: listed in WAITING but not in {src}: remove the entry' for rel in sorted(set(waiting) - seen)]
    return out


def self_check(limit):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        def write(rel, n):
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), 'w') as f:
                f.write('x\n' * n)
        write('a/ok.cpp', limit)
        write('a/long.cpp', limit + 1)
        write('a/long.txt', limit + 1)
        write('b/grew.h', limit + 5)
        write('b/shrank.cpp', limit)
        found = problems(d, limit, {'b/grew.h': limit + 4, 'b/shrank.cpp': limit + 9, 'gone.cpp': limit + 1})
        assert len(found) == 4 and ['long.cpp' in found[0], 'grew.h' in found[1], 'shrank.cpp' in found[2],
                                    'gone.cpp' in found[3]] == [True] * 4, found


def main():
    src = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 800
    self_check(limit)
    bad = problems(src, limit, WAITING)
    for b in bad:
        print(b)
    print(f'{len(bad)} problem(s); {len(WAITING)} file(s) over {limit} lines waiting to be split: '
          f'{", ".join(sorted(WAITING))}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
