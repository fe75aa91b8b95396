-- causeway trace schema, version 16: the CPU limit and throttling counters of
-- the traced processes' cgroups (include/causeway/model/cgroup_cpu.h).
CREATE TABLE cgroup_cpu (
  session_id   INTEGER NOT NULL DEFAULT 1,
  ts_ns        INTEGER NOT NULL,
  pid          INTEGER NOT NULL,
  cgroup       TEXT NOT NULL,
  version      INTEGER NOT NULL,
  quota_us     INTEGER,
  period_us    INTEGER NOT NULL,
  nr_periods   INTEGER NOT NULL,
  nr_throttled INTEGER NOT NULL,
  throttled_us INTEGER NOT NULL
);
CREATE INDEX cgroup_cpu_ts ON cgroup_cpu(ts_ns);
