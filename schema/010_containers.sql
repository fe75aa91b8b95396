-- causeway trace schema, version 10: each process's container and
-- Kubernetes pod, from its cgroup path and the container runtime's state on
-- the host (include/causeway/model/processes.h).
ALTER TABLE processes ADD COLUMN container_id TEXT;
ALTER TABLE processes ADD COLUMN pod_uid TEXT;
ALTER TABLE processes ADD COLUMN pod_name TEXT;
ALTER TABLE processes ADD COLUMN pod_namespace TEXT;
