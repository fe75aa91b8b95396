#!/usr/bin/env python3
"""The agent's OCI image, run as the DaemonSet runs it, traces a process
outside its container (ctest fleet_container).

The image (.ci/image) is unpacked with umoci into a runtime bundle, and its
runtime spec is made from the rendered DaemonSet (kubectl kustomize
packaging/k8s/base), as a kubelet and its container runtime would: the
container's args and env, the host PID namespace, exactly the capabilities
it adds (nothing else), no new privileges, a read-only root, no seccomp
filter, and each hostPath volume bind-mounted read-only where the manifest
says so. runc runs it. Three host paths are swapped for the test's own: the
trace file's folder (a temporary one), containerd's state (a temporary one
that names a pod) and the GPU driver folder (the build's stand-in libcuda and
NVML). Outside the container, in a pod-shaped cgroup, the stand-in libcuda
loop (workloads/sync_loop) runs as root, then as another user from that
user's private folder; the agent inside must count the first's every
synchronisation, find the second by its maps (CAP_SYS_PTRACE,
CAP_DAC_READ_SEARCH) and name both one's container and pod, with NVML samples
read through the mounted driver folder.

usage: container_e2e.py --image OCI_TAR --workloads BUILD/workloads [--kubectl KUBECTL]
"""
import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE = "gpu-node-7"
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def die(msg):
    sys.exit(f"container_e2e: {msg}")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        die(f"{' '.join(cmd)} failed ({r.returncode}): {r.stdout}{r.stderr}")
    return r.stdout


def daemonset(kubectl):
    docs = list(yaml.safe_load_all(run([kubectl, "kustomize", os.path.join(ROOT, "packaging/k8s/base")])))
    ds = [d for d in docs if d and d["kind"] == "DaemonSet"]
    if len(ds) != 1:
        die(f"the base renders {len(ds)} DaemonSets, not 1")
    return ds[0]["spec"]["template"]["spec"]


def image_entrypoint(oci):
    """The image config's Entrypoint: the container's args follow it."""
    index = json.load(open(f"{oci}/index.json"))
    blob = lambda d: f"{oci}/blobs/sha256/{d.split(':', 1)[1]}"
    manifest = json.load(open(blob(index["manifests"][0]["digest"])))
    config = json.load(open(blob(manifest["config"]["digest"])))
    return config["config"]["Entrypoint"], index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]


def expand(value, env):
    """$(VAR) as the kubelet expands it in args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def runtime_spec(bundle, pod, entrypoint, host_paths, extra_args, extra_env):
    spec = json.load(open(f"{bundle}/config.json"))
    (c,) = pod["containers"]
    env = {}
    for e in c.get("env", []):
        field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        env[e["name"]] = {"spec.nodeName": NODE, "status.hostIP": "127.0.0.1"}[field] if field else e["value"]
    env.update(extra_env)
    proc = spec["process"]
    proc["terminal"] = False
    proc["args"] = entrypoint + [expand(a, env) for a in c["args"]] + extra_args
    proc["env"] = [v for v in proc["env"] if not v.startswith(tuple(k + "=" for k in env))] + \
        [f"{k}={v}" for k, v in env.items()]
    sc = c["securityContext"]
    if sc.get("privileged"):
        die("the base must not be privileged")
    if sc["capabilities"].get("drop") != ["ALL"]:
        die("the base must drop every capability it does not add")
    caps = ["CAP_" + x for x in sc["capabilities"]["add"]]
    proc["capabilities"] = {k: caps for k in ("bounding", "effective", "permitted")}
    proc["noNewPrivileges"] = sc.get("allowPrivilegeEscalation") is False
    proc["user"] = {"uid": sc.get("runAsUser", 0), "gid": 0}
    spec["root"]["readonly"] = bool(sc.get("readOnlyRootFilesystem"))
    if sc.get("seccompProfile", {}).get("type") == "Unconfined":
        spec["linux"].pop("seccomp", None)
    spec["hostname"] = "causeway-abcde"  # a pod's hostname is its name
    if pod.get("hostPID"):
        spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "pid"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for m in c["volumeMounts"]:
        v = volumes[m["name"]]
        if "emptyDir" in v:
            spec["mounts"].append({"destination": m["mountPath"], "type": "tmpfs", "source": "tmpfs",
                                   "options": ["nosuid", "nodev", "size=64m"]})
            continue
        path = v["hostPath"]["path"]
        source = host_paths.get(path, path)
        kind = v["hostPath"].get("type", "")
        if kind == "DirectoryOrCreate":
            os.makedirs(source, exist_ok=True)
        elif kind == "Directory" and not os.path.isdir(source):
            die(f"hostPath {path} ({source}) is not a folder on this host")
        spec["mounts"].append({"destination": m["mountPath"], "type": "bind", "source": source,
                               "options": ["rbind", "ro" if m.get("readOnly") else "rw", "nosuid", "nodev"]})
    json.dump(spec, open(f"{bundle}/config.json", "w"), indent=1)
    return proc["args"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True, help="the OCI image tar .ci/image writes")
    ap.add_argument("--workloads", required=True, help="the build's workloads/ folder")
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--runtime", default="runc")
    args = ap.parse_args()
    if os.geteuid() != 0:
        die("needs root (a container runtime, BPF)")
    for tool in (args.runtime, "umoci", args.kubectl):
        if not shutil.which(tool):
            die(f"needs {tool} (.ci/install-deps --test installs it)")
    if not os.path.isfile(args.image):
        die(f"no image at {args.image}: build it with .ci/image")
    args.workloads = os.path.abspath(args.workloads)
    stand_in = os.path.join(args.workloads, "lib")
    loop = os.path.join(args.workloads, "sync_loop")
    for f in (f"{stand_in}/libcuda.so.1", f"{stand_in}/libnvidia-ml.so.1", loop):
        if not os.path.exists(f):
            die(f"missing {f} (build the workloads)")

    pod = daemonset(args.kubectl)
    tmp = tempfile.mkdtemp(prefix="causeway-container-")
    name = f"causeway-e2e-{os.getpid()}"
    cgroup_top = home = None
    try:
        os.makedirs(f"{tmp}/oci")
        run(["tar", "-C", f"{tmp}/oci", "-xf", args.image])
        entrypoint, tag = image_entrypoint(f"{tmp}/oci")
        run(["umoci", "unpack", "--image", f"{tmp}/oci:{tag}", f"{tmp}/bundle"])
        data, state = f"{tmp}/data", f"{tmp}/run-containerd"
        container_id = "c0ffee" + "0" * 58
        os.makedirs(f"{state}/io.containerd.runtime.v2.task/k8s.io/{container_id}")
        with open(f"{state}/io.containerd.runtime.v2.task/k8s.io/{container_id}/config.json", "w") as f:
            json.dump({"annotations": {"io.kubernetes.cri.sandbox-name": "trainer-0",
                                       "io.kubernetes.cri.sandbox-namespace": "ml-team"}}, f)
        host_paths = {"/var/lib/causeway": data, "/run/containerd": state,
                      "/run/containers/storage": f"{tmp}/run-containers-storage",
                      "/usr/lib/x86_64-linux-gnu": stand_in}
        argv = runtime_spec(f"{tmp}/bundle", pod, entrypoint, host_paths,
                            ["--log-level", "info", "--duration", "25s"],
                            {"CW_FAKE_NVML": "gpus=1;util=64;mem_used=2147483648"})
        print("container: " + " ".join(argv), flush=True)

        log = open(f"{tmp}/agent.log", "w")
        agent = subprocess.Popen([args.runtime, "run", "--bundle", f"{tmp}/bundle", name],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        text = lambda: open(f"{tmp}/agent.log", errors="replace").read()
        end = time.monotonic() + 90
        while not re.search(r"probing /host/usr/lib/x86_64-linux-gnu/libcuda\.so", text()):
            if agent.poll() is not None or time.monotonic() > end:
                die(f"the agent in the container did not attach ({agent.poll()}):\n{text()}")
            time.sleep(0.2)

        # The traced processes: outside the container, in a pod's cgroup.
        # First as root, through the driver folder the agent probed at start:
        # every call counted. Then as another user, through a copy of the
        # library in that user's private folder (0700), found by its maps
        # once it is loaded: reading the maps of another user's process
        # needs CAP_SYS_PTRACE, opening the library there CAP_DAC_READ_SEARCH.
        base = "/sys/fs/cgroup" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "/sys/fs/cgroup/pids"
        cgroup_top = f"{base}/cw-container-{os.getpid()}"
        cgroup = f"{cgroup_top}/kubepods/burstable/pod0a1b2c3d-0000-4000-8000-00000000c0de/{container_id}"
        os.makedirs(cgroup)
        home = tempfile.mkdtemp(prefix="causeway-user-")
        os.chmod(home, 0o711)
        private = f"{home}/private"
        os.mkdir(private, 0o700)
        shutil.copy(f"{stand_in}/libcuda.so.1", private)
        for path in (private, f"{private}/libcuda.so.1"):
            os.chown(path, 1000, 1000)

        def sync_loop(lib, *user):
            p = subprocess.Popen(["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh", *user, loop, lib,
                                  "3"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out = p.communicate(timeout=60)[0]
            m = re.search(r"syncs (\d+)", out)
            if p.returncode != 0 or not m:
                die(f"sync_loop failed ({p.returncode}): {out}")
            return p.pid, int(m.group(1))

        root_pid, syncs = sync_loop(f"{stand_in}/libcuda.so.1")
        user_pid, user_syncs = sync_loop(f"{private}/libcuda.so.1", "setpriv", "--reuid=1000", "--regid=1000",
                                         "--clear-groups")
        rc = agent.wait(120)
        out = text()
        print(out[-3000:])
        check(rc == 0, f"the agent in the container exited {rc}")

        db = sqlite3.connect(f"file:{data}/causeway.db?mode=ro", uri=True)
        q = lambda sql, *a: db.execute(sql, a).fetchall()
        host, node = q("SELECT host, node_id FROM sessions")[0]
        check(host == "causeway-abcde" and node == NODE,
              f"the trace was written inside the container (host {host}, node {node})")
        (traced,), = q("SELECT calls FROM op_counts WHERE op_id = (SELECT id FROM ops WHERE name = 'cuStreamSynchronize')")
        check(syncs < traced <= syncs + user_syncs,
              f"every synchronisation of the root process outside counted ({syncs}), and of the other user's "
              f"{traced - syncs} of {user_syncs} (those after its library was found)")
        for pid in (root_pid, user_pid):
            rows = q("SELECT comm, container_id, pod_uid, pod_name, pod_namespace FROM processes WHERE pid = ?", pid)
            check(rows == [("sync_loop", container_id, "0a1b2c3d-0000-4000-8000-00000000c0de", "trainer-0", "ml-team")],
                  f"process {pid}: its container and pod named: {rows}")
        libs = q("SELECT count(*) FROM cuda_call_events WHERE pid = ?", user_pid)
        check(libs[0][0] > 0, f"the other user's calls recorded through its private copy: {libs[0][0]} rows")
        gpus = q("SELECT count(*), max(util_gpu) FROM gpu_samples")
        check(gpus[0][0] > 0 and gpus[0][1] == 64, f"NVML samples through the mounted driver folder: {gpus}")
    finally:
        subprocess.run([args.runtime, "delete", "--force", name], capture_output=True)
        if cgroup_top:
            for dirpath, _, _ in sorted(os.walk(cgroup_top), key=lambda x: -len(x[0])):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
        if home:
            shutil.rmtree(home, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "the agent's container traced a process outside it")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
