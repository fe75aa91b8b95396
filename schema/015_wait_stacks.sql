-- causeway trace schema, version 15: the Python stack a thread went to sleep
-- in (a sleep, a lock or the GIL, a queue, an fsync), so a wait has its line
-- (include/causeway/model/offcpu.h).
ALTER TABLE offcpu_events ADD COLUMN stack_id INTEGER;
