-- causeway trace schema, version 6: the GPUs, sampled through NVML
-- (include/causeway/model/gpu_samples.h), and the host's CPU count.
CREATE TABLE gpu_devices (
  session_id INTEGER NOT NULL DEFAULT 1,
  gpu        INTEGER NOT NULL,
  uuid       TEXT,
  name       TEXT,
  driver     TEXT,
  mem_total  INTEGER,
  sm_clock_max INTEGER,
  mem_clock_max INTEGER,
  power_limit_mw INTEGER,
  PRIMARY KEY (session_id, gpu)
);

CREATE TABLE gpu_samples (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns    INTEGER NOT NULL,
  gpu      INTEGER NOT NULL,
  util_gpu INTEGER,
  util_mem INTEGER,
  mem_used INTEGER,
  sm_clock INTEGER,
  mem_clock INTEGER,
  power_mw INTEGER,
  temp_c   INTEGER,
  throttle INTEGER,
  ecc_corrected INTEGER,
  ecc_uncorrected INTEGER,
  retired_pages INTEGER,
  remap_pending INTEGER,
  pcie_replays INTEGER
);
CREATE INDEX gpu_samples_ts ON gpu_samples(ts_ns);

CREATE TABLE gpu_process_samples (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns   INTEGER NOT NULL,
  gpu     INTEGER NOT NULL,
  pid     INTEGER NOT NULL,
  sm_util INTEGER,
  mem_util INTEGER,
  mem_used INTEGER
);
CREATE INDEX gpu_process_samples_pid ON gpu_process_samples(pid, ts_ns);

CREATE TABLE gpu_events (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns INTEGER NOT NULL,
  gpu   INTEGER NOT NULL,
  event TEXT NOT NULL,
  code  INTEGER NOT NULL
);

ALTER TABLE sessions ADD COLUMN cpus INTEGER;
