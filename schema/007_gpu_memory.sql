-- causeway trace schema, version 7: GPU memory. Allocations and frees carry
-- the address (or cuMemCreate handle) that pairs them; ops say their class and
-- which memory they are about, so a failed allocation allocates nothing and a
-- free subtracts exactly what its allocation added.
ALTER TABLE cuda_call_events ADD COLUMN addr INTEGER;
CREATE INDEX cuda_call_events_addr ON cuda_call_events(session_id, pid, addr, ts_ns) WHERE addr IS NOT NULL;

ALTER TABLE ops ADD COLUMN class TEXT;
ALTER TABLE ops ADD COLUMN memory TEXT;

DROP VIEW cuda_calls;
CREATE VIEW cuda_calls AS
SELECT c.ts_ns, c.dur_ns, c.pid, c.tid, o.layer AS layer, o.name AS op, c.ret, c.bytes,
       CASE c.kind WHEN 0 THEN 'HtoH' WHEN 1 THEN 'HtoD' WHEN 2 THEN 'DtoH'
                   WHEN 3 THEN 'DtoD' WHEN 4 THEN 'default' END AS kind,
       c.stream, c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z,
       c.shared_mem, k.name AS kernel, c.stack_id, c.session_id, c.flags, c.addr
FROM cuda_call_events c
JOIN ops o ON o.id = c.op_id
LEFT JOIN kernels k ON k.id = c.kernel_id;

-- Every allocation that succeeded, with the first successful free of its
-- address after it (NULL: still held when the trace ended). cuMemCreate
-- handles pair only with cuMemRelease.
CREATE VIEW gpu_allocations AS
SELECT a.session_id, a.pid, a.tid, a.ts_ns, o.name AS op, o.memory, a.bytes, a.addr, a.stack_id,
       (SELECT min(f.ts_ns) FROM cuda_call_events f JOIN ops fo ON fo.id = f.op_id
         WHERE f.session_id = a.session_id AND f.pid = a.pid AND f.addr = a.addr AND f.ts_ns > a.ts_ns
           AND f.ret = 0 AND fo.class = 'free' AND (fo.name = 'cuMemRelease') = (o.name = 'cuMemCreate'))
         AS freed_ts_ns
FROM cuda_call_events a JOIN ops o ON o.id = a.op_id
WHERE o.class = 'alloc' AND a.ret = 0 AND a.addr IS NOT NULL;

-- Held bytes per process and memory kind after each allocation and free.
CREATE VIEW gpu_memory_timeline AS
WITH d AS (
  SELECT session_id, pid, memory, ts_ns, bytes AS delta, stack_id, op FROM gpu_allocations
  UNION ALL
  SELECT session_id, pid, memory, freed_ts_ns, -bytes, stack_id, op FROM gpu_allocations
   WHERE freed_ts_ns IS NOT NULL
)
SELECT session_id, pid, memory, ts_ns, delta, op, stack_id AS alloc_stack_id,
       sum(delta) OVER (PARTITION BY session_id, pid, memory ORDER BY ts_ns, delta DESC
                        ROWS UNBOUNDED PRECEDING) AS held_bytes
FROM d;
