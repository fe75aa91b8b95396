-- causeway trace schema, version 9: when the once-per-launch probes were
-- attached under `trace --launch-duty` (include/causeway/model/launch_windows.h).
CREATE TABLE launch_windows (
  session_id INTEGER NOT NULL DEFAULT 1,
  ts_ns      INTEGER NOT NULL,
  end_ns     INTEGER NOT NULL
);
