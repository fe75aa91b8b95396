-- causeway trace schema, version 18: a call that began before the trace
-- did, found on its thread's stack when the trace attached, is written like
-- one entered while tracing (stalled_calls.entered_before = 1)
-- (include/causeway/model/stalled_calls.h).
ALTER TABLE stalled_calls ADD COLUMN entered_before INTEGER NOT NULL DEFAULT 0;
