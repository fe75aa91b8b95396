// Validates rendered Kubernetes manifests (YAML, several documents a file)
// against the API schemas, offline: kubernetes-models' validators are
// compiled from the Kubernetes OpenAPI definitions (and the Prometheus
// operator's CRDs for PodMonitor and PrometheusRule).
// usage: node validate_manifests.mjs FILE...   exit 1 on any invalid object
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { Namespace, ConfigMap, Service } from "kubernetes-models/v1";
import { DaemonSet } from "kubernetes-models/apps/v1";
import { PodMonitor, PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const models = [Namespace, ConfigMap, Service, DaemonSet, PodMonitor, PrometheusRule];
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate_manifests.mjs FILE...");
  process.exit(2);
}
let bad = 0, good = 0;
for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length) {
      console.error(`${file}: not YAML: ${doc.errors[0].message}`);
      bad++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    const what = `${file}: ${obj.kind} ${obj.metadata?.name}`;
    const Model = models.find((m) => m.apiVersion === obj.apiVersion && m.kind === obj.kind);
    if (!Model) {
      console.error(`${what}: no schema for ${obj.apiVersion} ${obj.kind} (add its model here)`);
      bad++;
      continue;
    }
    try {
      new Model(obj).validate();
      good++;
    } catch (e) {
      console.error(`${what}: invalid: ${e.message}`);
      bad++;
    }
  }
}
console.log(`${good} valid, ${bad} invalid`);
process.exit(bad || good === 0 ? 1 : 0);
