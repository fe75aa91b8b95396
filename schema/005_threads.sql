-- causeway trace schema, version 5: thread names of traced processes
-- (include/causeway/model/threads.h).
CREATE TABLE threads (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns INTEGER NOT NULL,
  pid   INTEGER NOT NULL,
  tid   INTEGER NOT NULL,
  comm  TEXT NOT NULL,
  what  INTEGER NOT NULL
);
CREATE INDEX threads_tid ON threads(tid, ts_ns);
