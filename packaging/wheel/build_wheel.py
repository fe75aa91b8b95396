#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The wheel: `pip install causeway-VERSION-py3-none-manylinux_2_28_x86_64.whl`
puts the release binary on the PATH of the environment it goes into, as
py-spy's wheels do. Python's standard library only (no network, no build
backend): the binary as a script of the wheel's .data folder, which pip
copies into the environment's bin/ with its executable bit, beside the
METADATA, WHEEL and RECORD files of the wheel format (PEP 427, PEP 491).

  build_wheel.py BINARY OUTDIR [--floor 2.28]   writes OUTDIR/<the wheel>
The version is the binary's own (`BINARY version`); the floor names the
platform tag and must be what tests/install/glibc_floor.py measured.
"""
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile

SUMMARY = 'eBPF agent that explains why GPU workloads are slow (Linux, root)'


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    return f'{name},sha256={digest},{len(data)}'


def binary_version(binary):
    out = subprocess.run([binary, 'version'], check=True, capture_output=True, text=True).stdout
    m = re.search(r'\b(\d+\.\d+\.\d+)\b', out)
    if not m:
        sys.exit(f'build_wheel.py: no version in `{binary} version`: {out.strip()!r}')
    return m.group(1)


def build(binary, outdir, floor):
    version = binary_version(binary)
    # Stripped, as the .deb's: the debug symbols are the .deb's .debug file.
    stripped = os.path.join(outdir, 'causeway.wheel-stripped')
    subprocess.run(['strip', '-o', stripped, binary], check=True)
    with open(stripped, 'rb') as f:
        exe = f.read()
    os.unlink(stripped)
    tag = f'py3-none-manylinux_{floor.replace(".", "_")}_x86_64'
    dist = f'causeway-{version}'
    metadata = (f'Metadata-Version: 2.1\nName: causeway\nVersion: {version}\nSummary: {SUMMARY}\n'
                'Home-page: https://github.com/causeway/causeway\nLicense: Apache-2.0 AND GPL-2.0-only\n'
                'Classifier: Operating System :: POSIX :: Linux\n'
                'Classifier: Topic :: System :: Monitoring\n\n'
                'causeway attaches eBPF probes to the GPU libraries and kernel tracepoints and explains\n'
                'slow or failing GPU work as causal chains with the Python line and the fix.\n'
                'Tracing needs root: `sudo "$(which causeway)" trace -- python train.py`.\n').encode()
    wheel = f'Wheel-Version: 1.0\nGenerator: causeway build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n'.encode()
    files = [(f'{dist}.data/scripts/causeway', exe, 0o755),
             (f'{dist}.dist-info/METADATA', metadata, 0o644),
             (f'{dist}.dist-info/WHEEL', wheel, 0o644)]
    record_name = f'{dist}.dist-info/RECORD'
    record = '\n'.join([record_line(n, d) for n, d, _ in files] + [f'{record_name},,']) + '\n'
    files.append((record_name, record.encode(), 0o644))
    path = os.path.join(outdir, f'{dist}-{tag}.whl')
    # Fixed timestamps: the same binary gives the same wheel.
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    print(f'wheel: {path} ({os.path.getsize(path) // 1024} KiB)')
    return path


def main(argv):
    floor = '2.28'
    if '--floor' in argv:
        i = argv.index('--floor')
        if i + 1 >= len(argv) or not re.fullmatch(r'\d+\.\d+', argv[i + 1]):
            sys.exit('build_wheel.py: --floor needs a glibc version such as 2.28')
        floor = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) != 2:
        sys.exit('usage: build_wheel.py BINARY OUTDIR [--floor 2.28]')
    binary, outdir = argv
    if not os.access(binary, os.X_OK):
        sys.exit(f'build_wheel.py: {binary} is not an executable')
    os.makedirs(outdir, exist_ok=True)
    build(binary, outdir, floor)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
