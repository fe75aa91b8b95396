-- causeway trace schema, version 3: planned shedding under overload.
-- When the library-call ring fills past half, rows of calls faster than
-- 100 us are not recorded (their calls stay counted here); drops rows with
-- source 'shed' say when and how many.
ALTER TABLE op_counts ADD COLUMN shed INTEGER NOT NULL DEFAULT 0;

DROP VIEW op_stats;
CREATE VIEW op_stats AS
SELECT o.name AS op, o.layer, s.calls, s.errors, s.total_ns, s.nested, s.dropped, s.shed, s.session_id
FROM op_counts s JOIN ops o ON o.id = s.op_id;
