-- causeway trace schema, version 1.
-- Hot tables hold integers (op ids, dictionary ids); the views below give SQL
-- users names. Times are wall-clock nanoseconds since the Unix epoch.

CREATE TABLE sessions (
  id            INTEGER PRIMARY KEY,
  host          TEXT NOT NULL,
  node_id       TEXT NOT NULL,          -- host name unless --node-id says otherwise
  boot_id       TEXT NOT NULL,
  mono_to_wall_ns INTEGER NOT NULL,     -- wall = monotonic + this
  version       TEXT NOT NULL,
  command_line  TEXT NOT NULL,
  start_ts_ns   INTEGER NOT NULL,
  end_ts_ns     INTEGER,
  source        TEXT NOT NULL DEFAULT 'trace'  -- 'trace' | 'demo' | 'merge'
);

CREATE TABLE ops (
  id     INTEGER PRIMARY KEY,
  name   TEXT NOT NULL UNIQUE,
  layer  TEXT NOT NULL                  -- runtime | driver | nccl | hip | verbs
);

CREATE TABLE kernels (
  id    INTEGER PRIMARY KEY,
  name  TEXT NOT NULL UNIQUE
);

CREATE TABLE comms (
  id    INTEGER PRIMARY KEY,
  name  TEXT NOT NULL UNIQUE
);

CREATE TABLE processes (
  session_id  INTEGER NOT NULL DEFAULT 1,
  pid         INTEGER NOT NULL,
  comm        TEXT,
  cmdline     TEXT,
  cgroup      TEXT,
  ppid        INTEGER,
  start_ts_ns INTEGER,
  end_ts_ns   INTEGER,
  exit_code   INTEGER,
  PRIMARY KEY (session_id, pid)
);

CREATE TABLE cuda_call_events (
  session_id  INTEGER NOT NULL DEFAULT 1,
  ts_ns       INTEGER NOT NULL,
  dur_ns      INTEGER NOT NULL,
  pid         INTEGER NOT NULL,
  tid         INTEGER NOT NULL,
  op_id       INTEGER NOT NULL,
  ret         INTEGER NOT NULL,
  bytes       INTEGER,
  kind        INTEGER,                  -- cudaMemcpyKind: 0 HtoH 1 HtoD 2 DtoH 3 DtoD 4 default
  stream      INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER,
  shared_mem  INTEGER,
  kernel_id   INTEGER,
  stack_id    INTEGER,
  flags       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX cuda_call_events_ts ON cuda_call_events(ts_ns);

CREATE TABLE offcpu_events (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns      INTEGER NOT NULL,
  dur_ns     INTEGER NOT NULL,
  pid        INTEGER NOT NULL,
  tid        INTEGER NOT NULL,
  cpu        INTEGER NOT NULL,
  state      INTEGER NOT NULL,          -- 0 runnable (preempted) 1 sleeping 2 disk 3 other
  by_pid     INTEGER,
  by_comm_id INTEGER,
  waker_pid  INTEGER
);
CREATE INDEX offcpu_events_ts ON offcpu_events(ts_ns);

CREATE TABLE io_requests (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns   INTEGER NOT NULL,
  dur_ns  INTEGER NOT NULL,
  pid     INTEGER NOT NULL,
  dev     TEXT NOT NULL,                -- major:minor
  bytes   INTEGER NOT NULL,
  op      TEXT NOT NULL                 -- read | write | flush | discard | other
);
CREATE INDEX io_requests_ts ON io_requests(ts_ns);

CREATE TABLE tcp_retransmits (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns  INTEGER NOT NULL,
  pid    INTEGER NOT NULL,
  saddr  TEXT NOT NULL,
  daddr  TEXT NOT NULL,
  sport  INTEGER NOT NULL,
  dport  INTEGER NOT NULL,
  state  TEXT NOT NULL
);

CREATE TABLE reclaims (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns   INTEGER NOT NULL,
  dur_ns  INTEGER NOT NULL,
  pid     INTEGER NOT NULL,
  tid     INTEGER NOT NULL,
  nr_reclaimed INTEGER NOT NULL
);

-- Exact per-op counters read from the kernel's maps at the end of a trace (and
-- periodically): correct even when raw records were dropped.
CREATE TABLE op_counts (
  session_id INTEGER NOT NULL DEFAULT 1,
  op_id    INTEGER NOT NULL,
  calls    INTEGER NOT NULL,
  errors   INTEGER NOT NULL,
  total_ns INTEGER NOT NULL,
  nested   INTEGER NOT NULL,
  dropped  INTEGER NOT NULL,
  PRIMARY KEY (session_id, op_id)
);

CREATE TABLE drops (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns  INTEGER NOT NULL,
  source TEXT NOT NULL,                 -- libcall | host | pystack | nest | ...
  count  INTEGER NOT NULL
);

-- Stacks: one row per frame, deduplicated per distinct stack.
CREATE TABLE stack_frames (
  stack_id INTEGER NOT NULL,
  depth    INTEGER NOT NULL,            -- 0 = innermost
  kind     TEXT NOT NULL,               -- python | native
  func     TEXT,
  file     TEXT,
  line     INTEGER,
  module   TEXT,
  PRIMARY KEY (stack_id, depth)
);

CREATE TABLE nccl_call_events (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns     INTEGER NOT NULL,
  dur_ns    INTEGER NOT NULL,
  pid       INTEGER NOT NULL,
  tid       INTEGER NOT NULL,
  op_id     INTEGER NOT NULL,
  ret       INTEGER NOT NULL,
  comm_hash TEXT,
  rank      INTEGER,
  nranks    INTEGER,
  seq       INTEGER,
  count     INTEGER,
  datatype  TEXT,
  redop     TEXT,
  bytes     INTEGER,
  stream    INTEGER,
  peer      INTEGER,
  stack_id  INTEGER
);
CREATE INDEX nccl_call_events_ts ON nccl_call_events(ts_ns);

CREATE TABLE verbs_events (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns   INTEGER NOT NULL,
  dur_ns  INTEGER NOT NULL,
  pid     INTEGER NOT NULL,
  tid     INTEGER NOT NULL,
  op_id   INTEGER NOT NULL,
  ret     INTEGER NOT NULL,
  qp_num  INTEGER,
  detail  TEXT                          -- async event type, QP state transition
);

CREATE TABLE ib_counters (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns   INTEGER NOT NULL,
  device  TEXT NOT NULL,
  port    INTEGER NOT NULL,
  counter TEXT NOT NULL,
  value   INTEGER NOT NULL
);

CREATE VIEW cuda_calls AS
SELECT c.ts_ns, c.dur_ns, c.pid, c.tid, o.layer AS layer, o.name AS op, c.ret, c.bytes,
       CASE c.kind WHEN 0 THEN 'HtoH' WHEN 1 THEN 'HtoD' WHEN 2 THEN 'DtoH'
                   WHEN 3 THEN 'DtoD' WHEN 4 THEN 'default' END AS kind,
       c.stream, c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z,
       c.shared_mem, k.name AS kernel, c.stack_id, c.session_id
FROM cuda_call_events c
JOIN ops o ON o.id = c.op_id
LEFT JOIN kernels k ON k.id = c.kernel_id;

CREATE VIEW offcpu AS
SELECT e.ts_ns, e.dur_ns, e.pid, e.tid, e.cpu,
       CASE e.state WHEN 0 THEN 'runnable' WHEN 1 THEN 'sleeping' WHEN 2 THEN 'disk' ELSE 'other' END AS state,
       e.by_pid, cm.name AS by_comm, e.waker_pid, e.session_id
FROM offcpu_events e LEFT JOIN comms cm ON cm.id = e.by_comm_id;

CREATE VIEW nccl_calls AS
SELECT n.ts_ns, n.dur_ns, n.pid, n.tid, o.name AS op, n.comm_hash, n.rank, n.nranks, n.seq,
       n.count, n.datatype, n.redop, n.bytes, n.stream, n.peer, n.stack_id, n.ret, n.session_id
FROM nccl_call_events n JOIN ops o ON o.id = n.op_id;

CREATE VIEW op_stats AS
SELECT o.name AS op, o.layer, s.calls, s.errors, s.total_ns, s.nested, s.dropped, s.session_id
FROM op_counts s JOIN ops o ON o.id = s.op_id;
