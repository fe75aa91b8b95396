#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The newest glibc symbol version a binary needs, against a floor (issue 68).

  glibc_floor.py BINARY [FLOOR]      prints `newest: GLIBC_x.y (SYMBOL)`, every
                                     symbol above FLOOR (default 2.28) and exits
                                     1 if there is one; 2 on bad input
  glibc_floor.py --suggest BINARY [FLOOR [LIB...]]
                                     lines for cmake/glibc_floor_<FLOOR>.list:
                                     each symbol above FLOOR with the newest
                                     version at or below it that the LIBs
                                     (default the host's libc.so.6, libm.so.6)
                                     still hold, or `-` where they have none
                                     (then it is written in
                                     src/compat/glibc_floor.c)

Reads `objdump -T` (binutils): the dynamic symbols and the versions the
binary's references are bound to, which is what the loader checks at start.
"""
import re
import subprocess
import sys

REF = re.compile(r'\s(?:\*UND\*|\.\w+)\s+[0-9a-f]+\s+\(?(GLIBC_[0-9.]+)\)?\s+(\S+)\s*$')


def version(tag):
    return tuple(int(p) for p in tag[len('GLIBC_'):].split('.'))


def dynamic_symbols(path, undefined_only):
    try:
        out = subprocess.run(['objdump', '-T', path], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit('glibc_floor.py: needs objdump (binutils)')
    except subprocess.CalledProcessError as e:
        sys.exit(f'glibc_floor.py: objdump cannot read {path}: {e.stderr.strip()}')
    syms = []
    for line in out.splitlines():
        if undefined_only and '*UND*' not in line:
            continue
        m = REF.search(line)
        if m:
            syms.append((version(m.group(1)), m.group(1), m.group(2)))
    return syms


def parse_floor(text):
    if not re.fullmatch(r'\d+\.\d+', text):
        print(f'glibc_floor.py: the floor must read like 2.28, not {text!r}', file=sys.stderr)
        sys.exit(2)
    return tuple(int(p) for p in text.split('.'))


def check(path, floor):
    refs = dynamic_symbols(path, undefined_only=True)
    if not refs:
        print(f'glibc_floor.py: {path} needs no versioned glibc symbol (not a dynamic glibc binary?)',
              file=sys.stderr)
        return 2
    newest = max(refs)
    print(f'newest: {newest[1]} ({newest[2]})')
    above = sorted({(v, tag, name) for v, tag, name in refs if v > floor})
    for _, tag, name in above:
        print(f'above the floor: {name}@{tag}')
    if above:
        print(f'FAIL: {len(above)} symbol(s) above GLIBC_{floor[0]}.{floor[1]}')
        return 1
    print(f'PASS: nothing above GLIBC_{floor[0]}.{floor[1]}')
    return 0


def suggest(path, floor, libs):
    held = {}
    for lib in libs:
        for v, tag, name in dynamic_symbols(lib, undefined_only=False):
            if v <= floor and (name not in held or v > held[name][0]):
                held[name] = (v, tag)
    for name in sorted({name for v, _, name in dynamic_symbols(path, undefined_only=True) if v > floor}):
        print(f'{name} {held[name][1] if name in held else "-"}')
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == '--suggest':
        floor = parse_floor(argv[2]) if len(argv) > 2 else (2, 28)
        libs = argv[3:] or ['/lib/x86_64-linux-gnu/libc.so.6', '/lib/x86_64-linux-gnu/libm.so.6']
        return suggest(argv[1], floor, libs)
    if len(argv) not in (1, 2) or argv[0].startswith('-'):
        print(__doc__.strip().split('\n\n')[1], file=sys.stderr)
        return 2
    return check(argv[0], parse_floor(argv[1]) if len(argv) > 1 else (2, 28))


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
