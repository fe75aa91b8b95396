-- causeway trace schema, version 23: a sync or a copy says how long before
-- it the process last queued a launch, and how many it had queued by then
-- (bpf/libcall.bpf.c map last_launch).
-- Most launches are counted in the kernel and never recorded: this is where
-- they lie relative to the calls that wait for the GPU.
ALTER TABLE cuda_call_events ADD COLUMN since_launch_ns INTEGER;
ALTER TABLE cuda_call_events ADD COLUMN launch_seq INTEGER;

DROP VIEW cuda_calls;
CREATE VIEW cuda_calls AS
SELECT c.ts_ns, c.dur_ns, c.pid, c.tid, o.layer AS layer, o.name AS op, c.ret, c.bytes,
       CASE c.kind WHEN 0 THEN 'HtoH' WHEN 1 THEN 'HtoD' WHEN 2 THEN 'DtoH'
                   WHEN 3 THEN 'DtoD' WHEN 4 THEN 'default' END AS kind,
       c.stream, c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z,
       c.shared_mem, k.name AS kernel, c.stack_id, c.session_id, c.flags, c.addr, c.since_launch_ns, c.launch_seq
FROM cuda_call_events c
JOIN ops o ON o.id = c.op_id
LEFT JOIN kernels k ON k.id = c.kernel_id;
