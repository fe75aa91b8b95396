#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No function in src/ runs over LIMIT lines (issue 50): a function that holds
several steps is split into one named function per step.

A brace scan of each .cpp with comments and string/char literals blanked: a
`{` at namespace/class level that does not open a namespace, class, struct,
enum, union, `extern "C"` or an initializer (`= {`, `kOps = {`) opens a
function, and everything to its matching `}` (lambdas included) is its body.

  function_length.py SRC_DIR [LIMIT]   exits 1 and lists each long function
"""
import os
import re
import sys

OPENS_SCOPE = re.compile(r'\b(namespace|struct|class|enum|union)\b[^;{}()]*$|extern\s*""\s*$')
INITIALIZER = re.compile(r'=\s*$|=\s*[\w:<>, ]*$')


def blank(text):
    """Comments and literals out, line breaks kept (line numbers stay true)."""
    keep_lines = lambda m: re.sub(r'[^\n]', ' ', m.group(0))
    text = re.sub(r'/\*.*?\*/', keep_lines, text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'R"(\w*)\(.*?\)\1"', lambda m: '""' + '\n' * m.group(0).count('\n'), text, flags=re.S)
    text = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)
    return re.sub(r"'(?:[^'\\\n]|\\.)'", "''", text)


def long_functions(text, limit):
    """(first line, lines, signature) of each function body over `limit` lines."""
    t = blank(text)
    stack, out, line, last = [], [], 1, 0
    for i, ch in enumerate(t):
        if ch == '\n':
            line += 1
        elif ch == '{':
            before = t[last:i]
            last = i + 1
            scope = OPENS_SCOPE.search(before) or INITIALIZER.search(before.strip())
            top = all(kind == 'scope' for kind, _, _ in stack)
            sig = ' '.join(before.split())
            stack.append(('function' if top and not scope else 'scope' if top else 'inner', line, sig))
        elif ch in '};':
            last = i + 1
            if ch == '}' and stack:
                kind, first, sig = stack.pop()
                if kind == 'function' and line - first + 1 > limit:
                    out.append((first, line - first + 1, sig))
    return out


def self_check(limit):
    body = '\n'.join(['  x++;'] * limit)
    sample = ('namespace a {\nstruct S { int f() { return 1; } };\nconstexpr int k[] = {\n1,\n};\n'
              'int g() {\n' + body + '\n  auto l = [] { return "}"; };\n}\n'
              'int h() {\n  return 0;  // }\n}\n}  // namespace a\n')
    found = long_functions(sample, limit)
    assert [(f, n) for f, n, _ in found] == [(6, limit + 3)], found


def main():
    src = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    self_check(limit)
    bad = []
    for d, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if f.endswith('.cpp'):
                p = os.path.join(d, f)
                for first, n, sig in long_functions(open(p, encoding='utf-8', errors='replace').read(), limit):
                    bad.append(f'{p}:{first}: {n} lines: {sig[:80]}')
    for b in bad:
        print(b)
    print(f'{len(bad)} function(s) over {limit} lines')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
