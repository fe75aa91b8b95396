-- causeway trace schema, version 24: the process that took the trace.
-- Its threads (the consumer, the writer, the periodic explain) run beside the
-- traced ones and show up as the task that ran instead or woke one; explain
-- never names the tracer as a neighbour to move away (NULL: a demo, a merge of
-- older files, or a trace taken before this version).
ALTER TABLE sessions ADD COLUMN agent_pid INTEGER;
