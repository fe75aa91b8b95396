#!/usr/bin/env python3
"""The fleet's dashboards and alerts against real traces (ctest fleet_signals).

Run 1 traces two pods' worth of workloads (tests/fleet/fleet_workloads.py over
the stand-in libcuda and NVML and the real libnccl) with `trace --prometheus`,
scraped each second by a real Prometheus (Debian's) that loads the alert
rules. Pod trainer-0 is in trouble: a straggler rank, a hung synchronisation,
a leak; pod trainer-1 runs the same shapes cleanly. Then:
  - every query of every panel of packaging/grafana/*.json, and every
    template variable, returns data from that Prometheus, as Grafana asks
    (range queries; instant ones for tables), for all nodes and pods and for
    the one node and pod trainer-0;
  - `promtool test rules` runs packaging/prometheus/causeway-alerts.yml over
    the series the agent served, scrape by scrape: each alert fires for the
    trouble, exactly, and not for its clean twin.
Run 2 floods a 1 MiB ring: the data-loss alert is quiet before the flood and
fires, per source, after it.

The scrapes are one a second; promtool reads them as one a minute, so the
rules' `for:` clauses and windows meant for minutes pass in seconds of CI.
Counts and ratios are the trace's own; only time is stretched (the hang's
in-flight seconds are real: the hang lasts past the alert's minute).

usage: signals_e2e.py --causeway BIN --workloads BUILD/workloads [--keep DIR]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RULES = os.path.join(ROOT, "packaging/prometheus/causeway-alerts.yml")
DASHBOARDS = sorted(os.path.join(ROOT, "packaging/grafana", f)
                    for f in os.listdir(os.path.join(ROOT, "packaging/grafana")) if f.endswith(".json"))
NCCL = "/usr/local/cuda/lib64/libnccl.so.2"
CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
PYTHON = "/usr/bin/python3.11"
INSTANCE = "node-a:9464"  # the node's address as promtool's series name it
# The families the rules read (the rest of /metrics is left out of promtool's input).
RULE_FAMILIES = ("causeway_thread_time_ratio", "causeway_nccl_calls_total", "causeway_process_calls_total",
                 "causeway_process_call_errors_total", "causeway_call_in_flight_seconds",
                 "causeway_dropped_records_total")

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def die(msg):
    sys.exit(f"signals_e2e: {msg}")


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def comm_hash(name):
    return fnv1a(name.encode().ljust(128, b"\0")[:128])


def http_get(url, timeout=3):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_until(pred, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.2)
    die(f"timed out after {seconds} s waiting for {what}")


class Agent:
    """`causeway trace` in the background, its output in a log file."""

    def __init__(self, tmp, name, args, env=None):
        self.log = os.path.join(tmp, name + ".log")
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def wait_for(self, pattern, seconds=90):
        def seen():
            if self.proc.poll() is not None:
                die(f"the agent exited ({self.proc.returncode}):\n{self.text()}")
            return re.search(pattern, self.text())
        wait_until(seen, seconds, f"'{pattern}' in {self.log}:\n{self.text()}")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class Scraper(threading.Thread):
    """GET /metrics once a second, as Prometheus does; keeps every answer."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.scrapes, self.halt = url, [], threading.Event()

    def run(self):
        next_at = time.monotonic()
        while not self.halt.is_set():
            try:
                self.scrapes.append(parse_metrics(http_get(self.url)))
            except OSError:
                self.scrapes.append(None)
            next_at += 1.0
            self.halt.wait(max(0.0, next_at - time.monotonic()))

    def stop(self):
        self.halt.set()
        self.join()
        return self.scrapes


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or line.startswith("#"):
            continue
        labels = tuple(sorted(LABEL.findall(m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


class Pod:
    """A pod-shaped cgroup (cgroup v2, else v1's pids hierarchy) whose
    containerd state, under the agent's --runtime-root, names the pod."""

    def __init__(self, tmp, runtime_root, name, namespace, n):
        base = "/sys/fs/cgroup" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "/sys/fs/cgroup/pids"
        self.top = f"{base}/cw-fleet-{os.getpid()}-{n}"
        self.uid = f"0a1b2c3d-0000-4000-8000-00000000000{n}"
        self.container_id = f"{n:x}" * 64
        self.name, self.namespace = name, namespace
        self.cgroup = f"{self.top}/kubepods/besteffort/pod{self.uid}/{self.container_id}"
        os.makedirs(self.cgroup)
        state = f"{runtime_root}/run/containerd/io.containerd.runtime.v2.task/k8s.io/{self.container_id}"
        os.makedirs(state)
        with open(state + "/config.json", "w") as f:
            json.dump({"annotations": {"io.kubernetes.cri.sandbox-name": name,
                                       "io.kubernetes.cri.sandbox-namespace": namespace}}, f)
        self.procs = []

    def spawn(self, tmp, label, argv, env=None):
        log = open(os.path.join(tmp, label + ".log"), "w")
        cmd = f'echo $$ > {self.cgroup}/cgroup.procs && exec "$@"'
        p = subprocess.Popen(["sh", "-c", cmd, "sh", *argv], stdout=log, stderr=subprocess.STDOUT,
                             env={**os.environ, **(env or {})})
        self.procs.append(p)
        return p.pid

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        path = self.cgroup
        while len(path) >= len(self.top):
            try:
                os.rmdir(path)
            except OSError:
                pass
            path = os.path.dirname(path)


def start_prometheus(tmp, target, port):
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                        "rule_files": [RULES],
                        "scrape_configs": [{"job_name": "causeway", "static_configs": [{"targets": [target]}]}]}, f)
    log = open(os.path.join(tmp, "prometheus.log"), "w")
    p = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/tsdb",
                          f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)

    def ready():
        try:
            return "Ready" in http_get(f"http://127.0.0.1:{port}/-/ready", 1)
        except OSError:
            return False
    wait_until(ready, 30, "Prometheus to be ready")
    return p


def prom_api(port, path, params):
    url = f"http://127.0.0.1:{port}/api/v1/{path}?" + urllib.parse.urlencode(params, doseq=True)
    try:
        answer = json.loads(http_get(url, 10))
    except urllib.error.HTTPError as e:
        return {"status": "error", "error": e.read().decode()[:300]}
    except OSError as e:
        return {"status": "error", "error": str(e)}
    return answer


def check_dashboards(port, start, end, instance, pod):
    """Each panel's queries as Grafana sends them, with every variable at All
    and at this node and pod trainer-0."""
    settings = {"All": {"instance": ".*", "pod": ".*"}, f"{instance}, pod {pod}": {"instance": instance, "pod": pod}}
    for path in DASHBOARDS:
        board = json.load(open(path))
        name = os.path.basename(path)
        for var in board["templating"]["list"]:
            if var["type"] != "query":
                continue
            m = re.fullmatch(r"label_values\((.*), *(\w+)\)", var["query"]["query"])
            check(m is not None, f"{name}: variable {var['name']} is label_values(SELECTOR, LABEL)")
            if not m:
                continue
            selector = m.group(1).replace("$instance", ".*")
            got = prom_api(port, "series", {"match[]": selector, "start": start, "end": end})
            values = {s.get(m.group(2)) for s in got.get("data", [])} - {None}
            want = instance if var["name"] == "instance" else pod
            check(want in values, f"{name}: variable {var['name']} offers {want} (got {sorted(values)[:6]})")
        for panel in board["panels"]:
            for target in panel["targets"]:
                for setting, values in settings.items():
                    expr = target["expr"].replace("$__rate_interval", "10s")
                    for var, value in values.items():
                        expr = expr.replace("$" + var, value)
                    if target.get("instant"):
                        got = prom_api(port, "query", {"query": expr, "time": end})
                    else:
                        got = prom_api(port, "query_range", {"query": expr, "start": start, "end": end, "step": 2})
                    result = got.get("data", {}).get("result", [])
                    check(got.get("status") == "success" and len(result) > 0,
                          f"{name}: panel '{panel['title']}' {target['refId']} ({setting}): "
                          f"{len(result)} series" + ("" if got.get("status") == "success" else f": {got.get('error')}"))


def series_name(name, labels):
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def promtool_series(scrapes):
    """promtool's input_series from the agent's scrapes: one value a scrape
    (`_` where a series was absent), with the labels Prometheus would add."""
    keys = sorted({k for s in scrapes if s for k in s if k[0].startswith(RULE_FAMILIES)})
    out = []
    for name, labels in keys:
        labels = tuple(sorted(labels + (("instance", INSTANCE), ("job", "causeway"))))
        values = []
        for s in scrapes:
            v = s.get((name, tuple(l for l in labels if l[0] not in ("instance", "job")))) if s else None
            values.append("_" if v is None else repr(v))
        out.append({"series": series_name(name, labels), "values": " ".join(values)})
    return out


def expected_alerts(rules, alertname, label_sets):
    """exp_alerts: the rule's own labels and its annotations with $labels
    filled in (the annotations use labels only)."""
    rule = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == alertname)
    out = []
    for labels in label_sets:
        labels = {**labels, **rule.get("labels", {})}
        ann = {k: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], v)
               for k, v in rule.get("annotations", {}).items()}
        out.append({"exp_labels": labels, "exp_annotations": ann})
    return out


def run_promtool(tmp, name, scrapes, cases):
    rules = yaml.safe_load(open(RULES))
    test = {"rule_files": [RULES], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": promtool_series(scrapes),
                       "alert_rule_test": [{"eval_time": f"{at}m", "alertname": alert,
                                            "exp_alerts": expected_alerts(rules, alert, sets)}
                                           for at, alert, sets in cases]}]}
    path = os.path.join(tmp, name + "_alerts_test.yml")
    with open(path, "w") as f:
        yaml.safe_dump(test, f, sort_keys=False, width=1000)
    r = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True)
    what = ", ".join(f"{a} at {t}m: {len(s)} firing" for t, a, s in cases)
    check(r.returncode == 0, f"promtool test rules on run {name}'s series ({what})\n{r.stdout}{r.stderr}"
          if r.returncode else f"promtool test rules on run {name}'s series ({what})")


def run_fleet(args, tmp):
    """Run 1: trouble in pod trainer-0, its clean twin in trainer-1."""
    w = args.workloads
    fake_cuda, c10 = f"{w}/lib/libcuda.so.1", f"{w}/lib/libc10_cuda.so.1"
    runtime_root = os.path.join(tmp, "runtime")
    agent_port = 20000 + os.getpid() % 20000
    prom_port = agent_port + 1
    agent = Agent(tmp, "run1-trace", [
        args.causeway, "trace", "--live", "off", "--log-level", "info", "--db", os.path.join(tmp, "run1.db"),
        "--prometheus", f"127.0.0.1:{agent_port}", "--runtime-root", runtime_root, "--lib", fake_cuda,
        "--lib", NCCL, "--lib", c10, "--nvml-lib", f"{w}/lib/libnvidia-ml.so.1", "--launch-duty", "always",
        "--explain-every", "2s"],
        env={"CW_FAKE_NVML": "gpus=1;util=87;mem_used=34359738368"})
    pods = []
    try:
        for lib in ("libcuda.so.1", "libnccl.so.2", "libc10_cuda.so.1"):
            agent.wait_for(r"probing \S*" + re.escape(lib))
        prom = start_prometheus(tmp, f"127.0.0.1:{agent_port}", prom_port)
        try:
            scraper = Scraper(f"http://127.0.0.1:{agent_port}/metrics")
            scraper.start()
            start = time.time()
            trouble = Pod(tmp, runtime_root, "trainer-0", "ml-team", 1)
            clean = Pod(tmp, runtime_root, "trainer-1", "ml-team", 2)
            pods = [trouble, clean]
            wl = os.path.join(HERE, "fleet_workloads.py")
            run_for = str(args.seconds + 30)  # killed at the end: still running then
            pid = {
                "waiter": trouble.spawn(tmp, "waiter", [PYTHON, wl, "rank", run_for, fake_cuda, NCCL, "fleet-a", "0", "2",
                                                        "waiter"], {"CW_FAKE_SYNC_MS": "80"}),
                "straggler": trouble.spawn(tmp, "straggler", [PYTHON, wl, "rank", run_for, fake_cuda, NCCL, "fleet-a",
                                                              "1", "2", "straggler"], {"CW_FAKE_SYNC_MS": "1"}),
                "hang": trouble.spawn(tmp, "hang", [PYTHON, wl, "hang", run_for, fake_cuda],
                                      {"CW_FAKE_SYNC_MS": "3600000", "CW_FAKE_SYNC_BLOCK": "1"}),
                "leak": trouble.spawn(tmp, "leak", [PYTHON, wl, "leak", run_for, fake_cuda, "30"],
                                      {"CW_FAKE_ALLOC_US_PER_MB": "0"}),
                "tensors": trouble.spawn(tmp, "tensors", [PYTHON, wl, "tensors", run_for, fake_cuda, c10, "4"],
                                         {"CW_FAKE_ALLOC_US_PER_MB": "0"}),
                "even0": clean.spawn(tmp, "even0", [PYTHON, wl, "rank", run_for, fake_cuda, NCCL, "fleet-b", "0", "2",
                                                    "even"], {"CW_FAKE_SYNC_MS": "40"}),
                "even1": clean.spawn(tmp, "even1", [PYTHON, wl, "rank", run_for, fake_cuda, NCCL, "fleet-b", "1", "2",
                                                    "even"], {"CW_FAKE_SYNC_MS": "40"}),
                "syncs": clean.spawn(tmp, "syncs", [PYTHON, wl, "syncs", run_for, fake_cuda], {"CW_FAKE_SYNC_MS": "20"}),
                "churn": clean.spawn(tmp, "churn", [PYTHON, wl, "churn", run_for, fake_cuda, "30"],
                                     {"CW_FAKE_ALLOC_US_PER_MB": "0"}),
            }
            print("run 1 pids: " + ", ".join(f"{k} {v}" for k, v in pid.items()), flush=True)
            time.sleep(max(0.0, start + args.seconds - time.time()))
            end = time.time()
            check_dashboards(prom_port, start, end, f"127.0.0.1:{agent_port}", "trainer-0")
            scrapes = scraper.stop()
        finally:
            prom.terminate()
            prom.wait()
    finally:
        for p in pods:
            p.stop()
        rc = agent.stop()
    check(rc == 0, f"run 1: the trace ended cleanly (exit {rc})")
    got = sum(s is not None for s in scrapes)
    check(got >= len(scrapes) - 2, f"run 1: {got} of {len(scrapes)} scrapes answered")
    last = len(scrapes) - 1
    run_promtool(tmp, "1", scrapes, [
        (last, "CausewayCallHung",
         [{"instance": INSTANCE, "pid": str(pid["hang"]), "op": "cuCtxSynchronize"}]),
        (last, "CausewayStraggler",
         [{"instance": INSTANCE, "pid": str(pid["straggler"]), "communicator": comm_hash("fleet-a"),
           "rank": "1", "nranks": "2"}]),
        (last, "CausewayGpuMemoryLeak", [{"instance": INSTANCE, "pid": str(pid["leak"])}]),
    ])


def run_loss(args, tmp):
    """Run 2: quiet, then a flood a 1 MiB ring cannot hold."""
    port = 20000 + (os.getpid() + 7) % 20000
    agent = Agent(tmp, "run2-trace", [
        args.causeway, "trace", "--live", "off", "--log-level", "info", "--db", os.path.join(tmp, "run2.db"),
        "--prometheus", f"127.0.0.1:{port}", "--ring-mb", "1", "--lib", CUDART, "--nvml-lib", "off"])
    try:
        agent.wait_for(r"probing \S*libcudart")
        scraper = Scraper(f"http://127.0.0.1:{port}/metrics")
        scraper.start()
        time.sleep(15)
        quiet = len(scraper.scrapes) - 1
        flood = subprocess.run([f"{args.workloads}/flood", CUDART, "2", "200000"], capture_output=True, text=True)
        check(flood.returncode == 0, f"run 2: the flood ran ({flood.stdout.strip()}{flood.stderr.strip()})")
        time.sleep(8)
        scrapes = scraper.stop()
    finally:
        rc = agent.stop()
    check(rc == 0, f"run 2: the trace ended cleanly (exit {rc})")
    last = len(scrapes) - 1
    # The sources that lost records in the alert's window (the last 10 scrapes).
    lost = sorted({dict(k[1])["source"] for k, v in scrapes[last].items()
                   if k[0] == "causeway_dropped_records_total" and v > (scrapes[max(0, last - 10)] or {}).get(k, 0)})
    check("shed" in lost, f"run 2: the flood overflowed the ring (sources that lost records: {lost})")
    run_promtool(tmp, "2", scrapes, [
        (quiet, "CausewayDataLoss", []),
        (last, "CausewayDataLoss", [{"instance": INSTANCE, "source": s} for s in lost]),
    ])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--causeway", required=True)
    ap.add_argument("--workloads", required=True, help="the build's workloads/ folder")
    ap.add_argument("--seconds", type=int, default=80, help="length of run 1")
    ap.add_argument("--keep", help="copy the logs, traces and promtool tests here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        die("needs root (BPF, cgroups)")
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            die(f"needs {tool} (.ci/install-deps --test installs Debian's prometheus)")
    for f in (args.causeway, f"{args.workloads}/lib/libcuda.so.1", NCCL, CUDART, PYTHON):
        if not os.path.exists(f):
            die(f"missing {f}")
    args.workloads, args.causeway = os.path.abspath(args.workloads), os.path.abspath(args.causeway)
    tmp = tempfile.mkdtemp(prefix="causeway-fleet-")
    try:
        run_fleet(args, tmp)
        run_loss(args, tmp)
    finally:
        if args.keep:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("tsdb"))
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "all fleet signals checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
