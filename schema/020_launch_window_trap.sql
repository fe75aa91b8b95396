-- causeway trace schema, version 20: what each probed launch of a launch
-- window cost the launching thread (the entry and return probes, and a
-- single-stepped first instruction where the host has one), so that explain
-- takes out of the launching time what the tracer added to it
-- (include/causeway/model/launch_windows.h).
ALTER TABLE launch_windows ADD COLUMN trap_ns INTEGER;
