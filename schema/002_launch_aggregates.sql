-- causeway trace schema, version 2: launches aggregated in the kernel
-- (`trace --launch-sampling N`). Every launch-class call is counted per
-- (process, op, kernel); rows are the deltas of one flush interval (about 1 s),
-- stamped with its end. cuda_call_events then holds only the launches that
-- were slow (>= 100 us), the first of each kernel and one in N, with flag 16.

CREATE TABLE launch_stats (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns     INTEGER NOT NULL,           -- end of the interval
  pid       INTEGER NOT NULL,
  op_id     INTEGER NOT NULL,
  kernel_id INTEGER,                    -- NULL when the handle could not be named
  calls     INTEGER NOT NULL,
  errors    INTEGER NOT NULL,
  total_ns  INTEGER NOT NULL
);
CREATE INDEX launch_stats_ts ON launch_stats(ts_ns);

-- The same calls by latency: bucket b counts launches of [2^b, 2^(b+1)) ns
-- (b = 31 also holds everything slower). Only non-empty buckets are stored.
CREATE TABLE launch_buckets (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns     INTEGER NOT NULL,
  pid       INTEGER NOT NULL,
  op_id     INTEGER NOT NULL,
  kernel_id INTEGER,
  bucket    INTEGER NOT NULL,
  calls     INTEGER NOT NULL
);
CREATE INDEX launch_buckets_ts ON launch_buckets(ts_ns);

CREATE VIEW launch_histogram AS
SELECT b.ts_ns, b.pid, o.name AS op, k.name AS kernel, b.bucket,
       1 << b.bucket AS lo_ns, CASE WHEN b.bucket = 31 THEN NULL ELSE 2 << b.bucket END AS hi_ns,
       b.calls, b.session_id
FROM launch_buckets b
JOIN ops o ON o.id = b.op_id
LEFT JOIN kernels k ON k.id = b.kernel_id;

-- flags on the view too: readers must tell kept launches (16) from calls.
DROP VIEW cuda_calls;
CREATE VIEW cuda_calls AS
SELECT c.ts_ns, c.dur_ns, c.pid, c.tid, o.layer AS layer, o.name AS op, c.ret, c.bytes,
       CASE c.kind WHEN 0 THEN 'HtoH' WHEN 1 THEN 'HtoD' WHEN 2 THEN 'DtoH'
                   WHEN 3 THEN 'DtoD' WHEN 4 THEN 'default' END AS kind,
       c.stream, c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z,
       c.shared_mem, k.name AS kernel, c.stack_id, c.session_id, c.flags
FROM cuda_call_events c
JOIN ops o ON o.id = c.op_id
LEFT JOIN kernels k ON k.id = c.kernel_id;
