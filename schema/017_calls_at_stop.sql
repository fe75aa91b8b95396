-- causeway trace schema, version 17: every call still in flight when the
-- trace stops is written (stalled_calls.at_stop = 1), hung or not
-- (include/causeway/model/stalled_calls.h).
ALTER TABLE stalled_calls ADD COLUMN at_stop INTEGER NOT NULL DEFAULT 0;
