-- causeway trace schema, version 14: how long a woken thread then waited for
-- a CPU (the tail of its off-CPU interval after the wake-up), and whom it
-- waited behind (include/causeway/model/offcpu.h).
ALTER TABLE offcpu_events ADD COLUMN runq_ns INTEGER NOT NULL DEFAULT 0;
