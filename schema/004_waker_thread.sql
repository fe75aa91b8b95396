-- causeway trace schema, version 4: the thread that woke an off-CPU thread
-- (the kernel always recorded it; explain follows chains of wakers: a
-- dispatcher woken by its pin-memory thread, woken by a loader worker).
ALTER TABLE offcpu_events ADD COLUMN waker_tid INTEGER;

DROP VIEW offcpu;
CREATE VIEW offcpu AS
SELECT e.ts_ns, e.dur_ns, e.pid, e.tid, e.cpu,
       CASE e.state WHEN 0 THEN 'runnable' WHEN 1 THEN 'sleeping' WHEN 2 THEN 'disk' ELSE 'other' END AS state,
       e.by_pid, cm.name AS by_comm, e.waker_pid, e.waker_tid, e.session_id
FROM offcpu_events e LEFT JOIN comms cm ON cm.id = e.by_comm_id;
