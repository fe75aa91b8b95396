-- causeway trace schema, version 8: calls still in flight after
-- `trace --hang-after` (include/causeway/model/stalled_calls.h).
CREATE TABLE stalled_calls (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns      INTEGER NOT NULL,
  pid        INTEGER NOT NULL,
  tid        INTEGER NOT NULL,
  op_id      INTEGER NOT NULL,
  waited_ns  INTEGER NOT NULL,
  seen_ts_ns INTEGER NOT NULL,
  stack_id   INTEGER
);
CREATE INDEX stalled_calls_ts ON stalled_calls(ts_ns);
