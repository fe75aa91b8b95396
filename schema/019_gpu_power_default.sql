-- causeway trace schema, version 19: each GPU's default power limit beside
-- the enforced one, so that a software power cap at the board's own limit (a
-- GPU running as fast as its power budget allows) is told from a lowered
-- limit (include/causeway/model/gpu_samples.h).
ALTER TABLE gpu_devices ADD COLUMN power_default_mw INTEGER;
