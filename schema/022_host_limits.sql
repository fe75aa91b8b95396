-- causeway trace schema, version 22: the memory limit and reclaim counters of
-- the traced processes' cgroups (include/causeway/model/cgroup_memory.h), and
-- the CPUs each traced process may use with its thread count
-- (include/causeway/model/process_cpus.h).
CREATE TABLE cgroup_memory (
  session_id    INTEGER NOT NULL DEFAULT 1,
  ts_ns         INTEGER NOT NULL,
  pid           INTEGER NOT NULL,
  cgroup        TEXT NOT NULL,
  version       INTEGER NOT NULL,
  limit_bytes   INTEGER,
  high_bytes    INTEGER,
  current_bytes INTEGER NOT NULL,
  file_bytes    INTEGER NOT NULL,
  pgscan        INTEGER,
  pgsteal       INTEGER,
  refault_file  INTEGER NOT NULL,
  limit_hits    INTEGER NOT NULL,
  psi_some_us   INTEGER,
  psi_full_us   INTEGER
);
CREATE INDEX cgroup_memory_ts ON cgroup_memory(ts_ns);
CREATE TABLE process_cpus (
  session_id  INTEGER NOT NULL DEFAULT 1,
  ts_ns       INTEGER NOT NULL,
  pid         INTEGER NOT NULL,
  cpus        INTEGER NOT NULL,
  cpu_list    TEXT NOT NULL,
  online_cpus INTEGER NOT NULL,
  threads     INTEGER NOT NULL
);
CREATE INDEX process_cpus_ts ON process_cpus(ts_ns);
