#!/usr/bin/env python3
"""The Kubernetes manifests, rendered offline and checked (ctest fleet_manifests).

Every kustomization under packaging/k8s/ (and the dashboards' ConfigMap)
renders with `kubectl kustomize`; every object validates against the
Kubernetes API schemas (tests/fleet/validate_manifests.mjs: kubernetes-models,
compiled from the Kubernetes OpenAPI definitions, and the Prometheus
operator's for PodMonitor and PrometheusRule: types, required fields,
formats) and has no field the API does not define (the OpenAPI models of
Debian's python3-kubernetes: what the schema validator lets through and an
API server drops); both reject a broken copy. Then what docs/fleet.md
promises of them holds.

usage: manifests_test.py [--kubectl KUBECTL]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
K8S = os.path.join(ROOT, "packaging/k8s")
OVERLAYS = ["base", "fleet/gpu", "fleet/resources", "fleet/prometheus", "fleet/prometheus-operator", "fleet/otlp",
            "fleet/privileged", "fleet"]
CAPS = ["BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH"]
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def render(kubectl, path, out):
    r = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True)
    check(r.returncode == 0, f"kubectl kustomize {os.path.relpath(path, ROOT)}" + (f": {r.stderr}" if r.returncode else ""))
    with open(out, "w") as f:
        f.write(r.stdout)
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def validate(files):
    r = subprocess.run(["node", os.path.join(HERE, "validate_manifests.mjs"), *files], capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


PRIMITIVES = {"str", "int", "bool", "float", "object", "datetime", "date"}


def unknown_fields(obj):
    """Paths of the fields of a core object that its API version does not
    define; None for kinds the client does not model (the CRDs)."""
    import kubernetes.client as k
    version = obj["apiVersion"].rpartition("/")[2]
    model = getattr(k, version.capitalize() + obj["kind"], None)
    if model is None:
        return None
    found = []

    def walk(value, kind, path):
        if kind in PRIMITIVES or value is None:
            return
        if kind.startswith("list["):
            for i, v in enumerate(value):
                walk(v, kind[5:-1], f"{path}[{i}]")
        elif kind.startswith("dict("):
            inner = kind[5:-1].split(", ", 1)[1]
            for key, v in value.items():
                walk(v, inner, f"{path}.{key}")
        else:
            cls = getattr(k, kind)
            fields = {json: attr for attr, json in cls.attribute_map.items()}
            for key, v in value.items():
                if key not in fields:
                    found.append(f"{path}.{key}".lstrip("."))
                else:
                    walk(v, cls.openapi_types[fields[key]], f"{path}.{key}")

    walk(obj, model.__name__, "")
    return found


def strict(docs):
    """Unknown fields of every object the client models, as 'Kind name: path'."""
    out, modelled = [], 0
    for d in docs:
        fields = unknown_fields(d)
        if fields is not None:
            modelled += 1
            out += [f"{d['kind']} {d['metadata']['name']}: {f}" for f in fields]
    return out, modelled


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    return found[0] if len(found) == 1 else None


def container(docs):
    return one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]


def arg(c, flag):
    a = c["args"]
    return a[a.index(flag) + 1] if flag in a else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", default="kubectl")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="causeway-manifests-")
    rendered, files = {}, []
    for o in OVERLAYS + ["../grafana"]:
        out = os.path.join(tmp, o.replace("/", "_").replace(".", "") + ".yaml")
        rendered[o] = render(args.kubectl, os.path.join(K8S, o), out)
        files.append(out)

    rc, out = validate(files)
    check(rc == 0, f"every rendered object validates against the API schemas: {out.splitlines()[-1] if out else ''}"
          + ("" if rc == 0 else "\n" + out))
    everything = [d for docs in rendered.values() for d in docs]
    unknown, modelled = strict(everything)
    check(not unknown and modelled == len([d for d in everything if d["kind"] not in ("PodMonitor", "PrometheusRule")]),
          f"no field the Kubernetes API does not define, in {modelled} core objects: {unknown}")
    # Both can fail: a port that is not a number, a DaemonSet without
    # selector, a misspelt field.
    broken = os.path.join(tmp, "broken.yaml")
    text = open(files[OVERLAYS.index("fleet")]).read()
    text = text.replace("containerPort: 9464", "containerPort: metrics").replace(
        "  selector:\n    matchLabels:\n      app.kubernetes.io/name: causeway\n  template:", "  template:").replace(
        "hostPID: true", "hostPid: true").replace("readOnly: true", "readonly: true", 1)
    with open(broken, "w") as f:
        f.write(text)
    rc, out = validate([broken])
    check(rc == 1 and "containerPort must be integer" in out and "must have required property selector" in out,
          f"the schema validator rejects a broken DaemonSet: {out}")
    unknown, _ = strict([d for d in yaml.safe_load_all(text) if d])
    check(unknown == ["DaemonSet causeway: spec.template.spec.containers[0].volumeMounts[0].readonly",
                      "DaemonSet causeway: spec.template.spec.hostPid"],
          f"the field check names its misspelt fields: {unknown}")

    stray = [f"{o}: {d['kind']} {d['metadata']['name']}" for o, docs in rendered.items() for d in docs
             if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "causeway"]
    check(not stray, f"every object in the namespace causeway: {stray}")
    base = rendered["base"]
    ds = one(base, "DaemonSet")
    check(ds is not None and one(base, "Namespace") is not None, "base: a Namespace and one DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    c = container(base)
    sc = c["securityContext"]
    check(spec.get("hostPID") is True, "base: host PID namespace")
    check(spec.get("automountServiceAccountToken") is False, "base: no API server credentials")
    check(sc["capabilities"] == {"drop": ["ALL"], "add": CAPS} and sc.get("privileged") is False,
          f"base: exactly the capabilities {CAPS}, nothing privileged")
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for path in ("/sys/kernel/btf", "/sys/fs/cgroup", "/sys/kernel/tracing", "/run/containerd",
                 "/run/containers/storage", "/host/usr/lib/x86_64-linux-gnu"):
        m = mounts.get(path)
        check(m is not None and m.get("readOnly") is True and "hostPath" in volumes[m["name"]],
              f"base: the host's {path} read-only")
    data = mounts.get("/var/lib/causeway")
    check(data is not None and not data.get("readOnly") and
          volumes[data["name"]]["hostPath"]["path"] == "/var/lib/causeway",
          "base: the trace file on the host (hostPath /var/lib/causeway, writable)")
    check(arg(c, "--db") == "/var/lib/causeway/causeway.db" and arg(c, "--max-db-size") == "1g",
          "base: the trace file and its size cap (--max-db-size 1g)")
    check(sc.get("readOnlyRootFilesystem") is True and sc.get("seccompProfile") == {"type": "Unconfined"},
          "base: read-only root; seccomp unconfined (bpf(), perf_event_open())")

    gpu = one(rendered["fleet/gpu"], "DaemonSet")["spec"]["template"]["spec"]
    check(gpu.get("nodeSelector") == {"nvidia.com/gpu.present": "true"} and
          {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in gpu.get("tolerations", []),
          "gpu: GPU nodes only, past the nvidia.com/gpu taint")
    res = container(rendered["fleet/resources"]).get("resources", {})
    check(res.get("requests", {}).get("cpu") and res.get("limits", {}).get("memory"), f"resources: {res}")
    prom = rendered["fleet/prometheus"]
    pc = container(prom)
    check(arg(pc, "--prometheus") == "0.0.0.0:9464" and {"name": "metrics", "containerPort": 9464, "protocol": "TCP"}
          in pc.get("ports", []), "prometheus: /metrics on port 9464 of the pod")
    operator = rendered["fleet/prometheus-operator"]
    check(one(prom, "PodMonitor") is None and one(prom, "PrometheusRule") is None,
          "prometheus: no object that needs the operator's CRDs")
    svc, pm = one(prom, "Service"), one(operator, "PodMonitor")
    check(svc is not None and svc["spec"]["ports"][0]["targetPort"] == "metrics" and
          svc["metadata"]["namespace"] == "causeway", "prometheus: a Service in the agent's namespace")
    check(pm is not None and pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics" and
          pm["spec"]["selector"]["matchLabels"] == ds["spec"]["selector"]["matchLabels"],
          "prometheus-operator: a PodMonitor that selects the agent's pods")
    rules = yaml.safe_load(open(os.path.join(ROOT, "packaging/prometheus/causeway-alerts.yml")))
    pr = one(operator, "PrometheusRule")
    check(pr is not None and pr["spec"]["groups"] == rules["groups"],
          "prometheus-operator: the PrometheusRule holds packaging/prometheus/causeway-alerts.yml's groups")
    cm = one(prom, "ConfigMap")
    boards = sorted(f for f in os.listdir(os.path.join(ROOT, "packaging/grafana")) if f.endswith(".json"))
    check(cm is not None and cm["metadata"]["labels"].get("grafana_dashboard") == "1" and
          sorted(cm["data"]) == boards and
          all(json.loads(cm["data"][b]) == json.load(open(os.path.join(ROOT, "packaging/grafana", b))) for b in boards),
          f"prometheus: the dashboards {boards} in a ConfigMap for Grafana's sidecar")
    oc = container(rendered["fleet/otlp"])
    check(arg(oc, "--otlp") == "http://$(HOST_IP):4318" and
          any(e["name"] == "HOST_IP" and e["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP" for e in oc["env"]),
          "otlp: to the node's collector (HOST_IP from status.hostIP)")
    priv = container(rendered["fleet/privileged"])
    check(priv["securityContext"]["privileged"] is True and arg(priv, "--kmsg") == "/dev/kmsg",
          "privileged: privileged, and the driver's XIDs from /dev/kmsg")
    f = container(rendered["fleet"])
    fs = one(rendered["fleet"], "DaemonSet")["spec"]["template"]["spec"]
    check(arg(f, "--prometheus") and arg(f, "--otlp") and f.get("resources") and fs.get("nodeSelector") and
          fs.get("tolerations") and len(rendered["fleet"]) == len(operator) == len(prom) + 2,
          "fleet: every overlay's patch together")
    r = subprocess.run(["promtool", "check", "rules", os.path.join(ROOT, "packaging/prometheus/causeway-alerts.yml")],
                       capture_output=True, text=True)
    check(r.returncode == 0, "promtool check rules packaging/prometheus/causeway-alerts.yml" + ("" if r.returncode == 0 else r.stdout + r.stderr))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "every manifest renders, validates and holds")
    sys.exit(1 if failures else 0)


main()
