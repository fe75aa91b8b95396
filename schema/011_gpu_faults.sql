-- causeway trace schema, version 11: GPU faults joined to their process. The
-- NVIDIA driver's XID lines in the kernel log name the process (pid=, name=)
-- where NVML's events cannot; GPUs carry their PCI address to join them
-- (include/causeway/model/gpu_samples.h, src/consume/kmsg_xids.cpp).
ALTER TABLE gpu_events ADD COLUMN source TEXT NOT NULL DEFAULT 'nvml';
ALTER TABLE gpu_events ADD COLUMN pid INTEGER;
ALTER TABLE gpu_events ADD COLUMN process TEXT;
ALTER TABLE gpu_events ADD COLUMN pci TEXT;
ALTER TABLE gpu_events ADD COLUMN detail TEXT;
ALTER TABLE gpu_devices ADD COLUMN pci TEXT;
