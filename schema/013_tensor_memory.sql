-- causeway trace schema, version 13: GPU memory by tensor. Where PyTorch's
-- caching allocator is probed (ops of class 'tensor': its malloc and free,
-- paired by the block's address), the memory its tensors hold, beside the
-- memory its pool reserved from the driver (gpu_memory_timeline, memory
-- 'device'). Reserved minus allocated is the pool's cache and fragmentation.

-- Every tensor allocation recorded, with the first free of its block after
-- it (NULL: still allocated when the trace ended, or freed while the
-- allocator's probes were off: see launch_windows).
CREATE VIEW tensor_allocations AS
SELECT a.session_id, a.pid, a.tid, a.ts_ns, a.bytes, a.addr, a.stream, a.stack_id,
       (SELECT min(f.ts_ns) FROM cuda_call_events f JOIN ops fo ON fo.id = f.op_id
         WHERE f.session_id = a.session_id AND f.pid = a.pid AND f.addr = a.addr AND f.ts_ns > a.ts_ns
           AND fo.class = 'tensor' AND fo.name LIKE '%::free') AS freed_ts_ns
FROM cuda_call_events a JOIN ops o ON o.id = a.op_id
WHERE o.class = 'tensor' AND o.name LIKE '%::malloc' AND a.addr IS NOT NULL;

-- The two curves per process: after each change, the bytes its tensors hold
-- (level 'allocated') and the device memory its allocations hold (level
-- 'reserved': the pool's segments, and anything else allocated from the
-- driver).
CREATE VIEW gpu_memory_curves AS
WITH d AS (
  SELECT session_id, pid, ts_ns, bytes AS delta FROM tensor_allocations
  UNION ALL
  SELECT session_id, pid, freed_ts_ns, -bytes FROM tensor_allocations WHERE freed_ts_ns IS NOT NULL
)
SELECT session_id, pid, 'allocated' AS level, ts_ns, delta,
       sum(delta) OVER (PARTITION BY session_id, pid ORDER BY ts_ns, delta DESC ROWS UNBOUNDED PRECEDING)
         AS held_bytes
FROM d
UNION ALL
SELECT session_id, pid, 'reserved', ts_ns, delta, held_bytes FROM gpu_memory_timeline WHERE memory = 'device';
