-- causeway trace schema, version 12: what a sleeping thread waited on (the
-- system call it slept in, its first argument, the interpreter lock and its
-- holder when the kernel could tell), and on-CPU samples of traced Python threads
-- (include/causeway/model/offcpu.h, cpu_samples.h).
ALTER TABLE offcpu_events ADD COLUMN syscall INTEGER;
ALTER TABLE offcpu_events ADD COLUMN wait INTEGER NOT NULL DEFAULT 0;
ALTER TABLE offcpu_events ADD COLUMN wait_arg INTEGER;
ALTER TABLE offcpu_events ADD COLUMN holder_tid INTEGER;

CREATE TABLE cpu_samples (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns      INTEGER NOT NULL,
  pid        INTEGER NOT NULL,
  tid        INTEGER NOT NULL,
  stack_id   INTEGER,
  in_call    INTEGER NOT NULL,
  samples    INTEGER NOT NULL
);
CREATE INDEX cpu_samples_ts ON cpu_samples(ts_ns);
CREATE INDEX cpu_samples_tid ON cpu_samples(tid, ts_ns);
