-- causeway trace schema, version 21: a collective or send/recv in flight
-- carries the number the probe gave it at its entry (stalled_calls.seq), so a
-- hang names the collective each waiting rank is in, not a guess from the
-- last one that returned (include/causeway/model/stalled_calls.h).
ALTER TABLE stalled_calls ADD COLUMN seq INTEGER;
