"""Packs the files of a validate.sh run (KEEP_DBS=1) into at most N tarballs
of at most 15 MiB each, every file xz-compressed on its own, so that the
device tool brings them back (8 files, 16 MiB each): traces recorded on the
GPU host can then be explained again on a machine without a GPU.
usage: pack.py SRCDIR OUTDIR [N]   (files that do not fit are named on stderr)
unpack: for t in traces*.tar; do tar -xf $t; done; xz -d *.xz"""
import os
import subprocess
import sys

src, out = sys.argv[1], sys.argv[2]
most = int(sys.argv[3]) if len(sys.argv) > 3 else 6
limit = 15 << 20
os.makedirs(out, exist_ok=True)
names = [f for f in os.listdir(src) if os.path.isfile(os.path.join(src, f)) and not f.endswith(("-wal", "-shm"))]
raw = [f for f in names if not f.endswith(".xz")]
if raw:
    subprocess.run(["xz", "-T0", "-6", "-k", "-f", *raw], cwd=src, check=True)
names = [f[:-3] if f.endswith(".xz") else f for f in names]
# Small files first (json, text), then the traces smallest first: the most rows fit.
packed = sorted(((f + ".xz", os.path.getsize(os.path.join(src, f + ".xz"))) for f in names),
                key=lambda x: (x[0].endswith(".db.xz"), x[1]))
bins = []
for name, size in packed:
    if size > limit:
        print(f"pack: {name} alone is {size >> 20} MiB; left out", file=sys.stderr)
        continue
    for b in bins:
        if b[0] + size <= limit:
            b[0] += size
            b[1].append(name)
            break
    else:
        if len(bins) < most:
            bins.append([size, [name]])
        else:
            print(f"pack: no room for {name}", file=sys.stderr)
for i, (size, group) in enumerate(bins):
    subprocess.run(["tar", "-C", src, "-cf", os.path.join(out, f"traces{i}.tar"), *group], check=True)
    print(f"traces{i}.tar: {len(group)} files, {size >> 20} MiB")
