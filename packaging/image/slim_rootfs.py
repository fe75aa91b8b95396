#!/usr/bin/env python3
"""Copy from a Debian root file system only the files of some packages and of
their dependency closure, with their dpkg records (.ci/image).

usage: slim_rootfs.py FULL_ROOT OUT_ROOT PACKAGE...
"""
import os
import re
import shutil
import sys


def fail(msg):
    sys.exit(f"slim_rootfs.py: {msg}")


def read_status(root):
    """dpkg's status file as {package: {field: value}} for installed packages."""
    pkgs = {}
    with open(os.path.join(root, "var/lib/dpkg/status"), encoding="utf-8") as f:
        for para in f.read().split("\n\n"):
            fields, last = {}, None
            for line in para.splitlines():
                if line[:1] in (" ", "\t") and last:
                    fields[last] += "\n" + line
                elif ":" in line:
                    last, value = line.split(":", 1)
                    fields[last] = value.strip()
            if fields.get("Status", "").endswith(" installed"):
                pkgs[fields["Package"]] = (fields, para)
    return pkgs


def closure(pkgs, wanted):
    provided = {}  # virtual packages ("awk") to what provides them ("mawk")
    for name, (fields, _) in sorted(pkgs.items()):
        for p in fields.get("Provides", "").split(","):
            provided.setdefault(re.sub(r"[ (].*", "", p.strip()), name)
    seen, todo = [], list(wanted)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in pkgs:
            fail(f"package {name} is not installed in the base")
        seen.append(name)
        fields = pkgs[name][0]
        for dep in ", ".join(filter(None, (fields.get("Pre-Depends"), fields.get("Depends")))).split(","):
            # "a (>= 1) | b": the first alternative that is installed
            alts = [re.sub(r"[ (].*|:any$", "", a.strip()) for a in dep.split("|") if a.strip()]
            got = next((a for a in alts if a in pkgs), None) or next((provided[a] for a in alts if a in provided), None)
            if alts and got is None:
                fail(f"{name} depends on {dep.strip()}, which is not installed")
            if got:
                todo.append(got)
    return seen


def canonical(root, path):
    """Path inside root with its folders' symlinks resolved (the file itself kept)."""
    parent, base = os.path.split(path.rstrip("/"))
    real = os.path.realpath(os.path.join(root, parent.lstrip("/")))
    if real != root and not real.startswith(root + "/"):
        fail(f"{path} leaves the root through a link")
    return os.path.join(real[len(root):] or "/", base)


def copy(root, out, rel):
    src, dst = root + rel, out + rel
    if os.path.lexists(dst):
        return
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.isdir(src) and not os.path.islink(src):
        os.mkdir(dst)
        shutil.copystat(src, dst)
    else:
        shutil.copy2(src, dst, follow_symlinks=False)


def main():
    if len(sys.argv) < 4:
        fail("usage: slim_rootfs.py FULL_ROOT OUT_ROOT PACKAGE...")
    root, out = os.path.realpath(sys.argv[1]), sys.argv[2]
    pkgs = read_status(root)
    names = closure(pkgs, sys.argv[3:])
    os.makedirs(out)
    # merged /usr: the top-level links first, so the files land under usr/
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(os.path.join(root, link)):
            os.symlink(os.readlink(os.path.join(root, link)), os.path.join(out, link))
    info = "/var/lib/dpkg/info"
    for name in names:
        arch = pkgs[name][0].get("Architecture", "all")
        listed = None
        for stem in (f"{name}:{arch}", name):
            if os.path.exists(f"{root}{info}/{stem}.list"):
                listed = stem
        if listed is None:
            fail(f"no file list for {name}")
        with open(f"{root}{info}/{listed}.list", encoding="utf-8") as f:
            for path in f.read().splitlines():
                if path in ("/", "/."):
                    continue
                copy(root, out, canonical(root, path))
        for ext in ("list", "md5sums", "conffiles", "shlibs", "symbols", "triggers"):
            if os.path.exists(f"{root}{info}/{listed}.{ext}"):
                copy(root, out, f"{info}/{listed}.{ext}")
    # dpkg's status with only these packages: what `dpkg -l` and image
    # scanners read.
    with open(out + "/var/lib/dpkg/status", "w", encoding="utf-8") as f:
        f.write("\n\n".join(pkgs[n][1].strip("\n") for n in sorted(names)) + "\n")
    # what a process needs to run: users, /tmp, and the trace file's folder
    os.makedirs(out + "/etc", exist_ok=True)
    with open(out + "/etc/passwd", "w") as f:
        f.write("root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    with open(out + "/etc/group", "w") as f:
        f.write("root:x:0:\nnogroup:x:65534:\n")
    for d, mode in (("/tmp", 0o1777), ("/var/lib/causeway", 0o700), ("/root", 0o700), ("/proc", 0o555),
                    ("/sys", 0o555), ("/dev", 0o755), ("/run", 0o755)):
        os.makedirs(out + d, exist_ok=True)
        os.chmod(out + d, mode)
    print("image packages: " + " ".join(sorted(names)))


main()
