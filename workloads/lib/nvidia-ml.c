/* A stand-in libnvidia-ml.so.1 for tests on hosts without a GPU: NVML's
 * public C ABI with values from the environment, read at nvmlInit:
 *   CW_FAKE_NVML="gpus=1;util=31;mem_used=1073741824;mem_total=85899345920;
 *                 sm_clock=1980;sm_clock_max=1980;power=350000;temp=45;
 *                 power_limit=700000;power_default=700000;
 *                 throttle=0;ecc_unc=0;xid=79;proc=PID:SM:MEM_BYTES;
 *                 proc_sms=SM,SM,..."
 * (any key may be left out). An xid is delivered once, to the first wait.
 * proc_sms: the driver's several readings of the process since the last
 * call (one per its own period), in place of proc's one SM share;
 * proc_idle=1: none (the process used no SM: NVML_ERROR_NOT_FOUND). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef void *nvmlEventSet_t;
enum { OK = 0, NOT_SUPPORTED = 3, INSUFFICIENT_SIZE = 7, TIMEOUT = 10, INVALID = 2 };

static struct {
  unsigned gpus, util, sm_clock, sm_clock_max, power, power_limit, power_default, temp, proc_pid, proc_sm;
  unsigned long long mem_used, mem_total, throttle, ecc_unc, proc_mem;
  unsigned proc_sms[8], proc_readings, proc_idle;
  int xid, xid_pending;
} f = {.gpus = 1, .sm_clock = 1980, .sm_clock_max = 1980, .power = 100000, .power_limit = 700000,
       .power_default = 700000, .temp = 40, .mem_used = 1ull << 30, .mem_total = 80ull << 30};
static char devices[8];  /* handles are &devices[i] */

static unsigned long long num(const char *env, const char *key, unsigned long long dflt) {
  const char *p = env ? strstr(env, key) : NULL;
  size_t n = strlen(key);
  return p && p[n] == '=' ? strtoull(p + n + 1, NULL, 0) : dflt;
}

nvmlReturn_t nvmlInit_v2(void) {
  const char *e = getenv("CW_FAKE_NVML");
  f.gpus = (unsigned)num(e, "gpus", 1);
  if (f.gpus > 8) f.gpus = 8;
  f.util = (unsigned)num(e, "util", 0);
  f.mem_used = num(e, "mem_used", 1ull << 30);
  f.mem_total = num(e, "mem_total", 80ull << 30);
  f.sm_clock = (unsigned)num(e, "sm_clock", 1980);
  f.sm_clock_max = (unsigned)num(e, "sm_clock_max", 1980);
  f.power = (unsigned)num(e, "power", 100000);
  f.power_limit = (unsigned)num(e, "power_limit", 700000);
  f.power_default = (unsigned)num(e, "power_default", 700000);
  f.temp = (unsigned)num(e, "temp", 40);
  f.throttle = num(e, "throttle", 0);
  f.ecc_unc = num(e, "ecc_unc", 0);
  f.xid = (int)num(e, "xid", 0);
  f.xid_pending = f.xid != 0;
  const char *p = e ? strstr(e, "proc=") : NULL;
  if (p) sscanf(p + 5, "%u:%u:%llu", &f.proc_pid, &f.proc_sm, &f.proc_mem);
  f.proc_idle = (unsigned)num(e, "proc_idle", 0);
  const char *r = e ? strstr(e, "proc_sms=") : NULL;
  for (r = r ? r + 9 : NULL; r && f.proc_readings < 8 && sscanf(r, "%u", &f.proc_sms[f.proc_readings]) == 1;) {
    f.proc_readings++;
    r = strchr(r, ',');
    if (r) r++;
  }
  return OK;
}
nvmlReturn_t nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(nvmlReturn_t r) { return r == OK ? "Success" : "Fake NVML error"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned n) { snprintf(v, n, "580.00.00-fake"); return OK; }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return OK; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { *n = f.gpus; return OK; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
  if (i >= f.gpus) return INVALID;
  *d = &devices[i];
  return OK;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned n) { (void)d; snprintf(s, n, "Fake GPU"); return OK; }
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned n) {
  snprintf(s, n, "GPU-fake-%d", (int)((char *)d - devices));
  return OK;
}
/* GPU i sits at 0000:(0x3b + i):00. */
typedef struct { char legacy[16]; unsigned domain, bus, device, id, subsys; char bus_id[32]; } pci_t;
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, pci_t *p) {
  memset(p, 0, sizeof *p);
  p->bus = 0x3b + (unsigned)((char *)d - devices);
  snprintf(p->bus_id, sizeof p->bus_id, "00000000:%02X:00.0", p->bus);
  return OK;
}
typedef struct { unsigned gpu, memory; } util_t;
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, util_t *u) { (void)d; u->gpu = f.util; u->memory = f.util / 2; return OK; }
typedef struct { unsigned long long total, free, used; } mem_t;
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, mem_t *m) {
  (void)d;
  m->total = f.mem_total;
  m->used = f.mem_used;
  m->free = f.mem_total - f.mem_used;
  return OK;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, unsigned type, unsigned *mhz) { (void)d; *mhz = type == 2 ? 2619 : f.sm_clock; return OK; }
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, unsigned type, unsigned *mhz) { (void)d; *mhz = type == 2 ? 2619 : f.sm_clock_max; return OK; }
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw) { (void)d; *mw = f.power; return OK; }
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *mw) { (void)d; *mw = f.power_limit; return OK; }
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned *mw) { (void)d; *mw = f.power_default; return OK; }
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, unsigned s, unsigned *c) { (void)d; (void)s; *c = f.temp; return OK; }
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r) { (void)d; *r = f.throttle; return OK; }
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, unsigned type, unsigned counter, unsigned long long *n) {
  (void)d; (void)counter;
  *n = type == 1 ? f.ecc_unc : 0;
  return OK;
}
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, unsigned c, unsigned *n, unsigned long long *a) {
  (void)d; (void)c; (void)n; (void)a;
  return NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned *c, unsigned *u, unsigned *p, unsigned *x) {
  (void)d;
  *c = *u = *p = *x = 0;
  return OK;
}
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned *n) { (void)d; *n = 0; return OK; }
typedef struct { unsigned pid; unsigned long long ts; unsigned sm, mem, enc, dec; } proc_util_t;
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, proc_util_t *u, unsigned *n, unsigned long long last) {
  (void)last;
  unsigned want = f.proc_readings ? f.proc_readings : 1;
  if (!f.proc_pid || d != &devices[0]) { *n = 0; return OK; }
  if (f.proc_idle) { *n = 0; return 6; }  /* NVML_ERROR_NOT_FOUND */
  if (!u || *n < want) { *n = want; return INSUFFICIENT_SIZE; }
  for (unsigned i = 0; i < want; i++) {
    u[i].pid = f.proc_pid;
    u[i].ts = 1 + i;
    u[i].sm = f.proc_readings ? f.proc_sms[i] : f.proc_sm;
    u[i].mem = u[i].sm / 2;
    u[i].enc = u[i].dec = 0;
  }
  *n = want;
  return OK;
}
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc_info_t;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *n, proc_info_t *p) {
  if (!f.proc_pid || d != &devices[0]) { *n = 0; return OK; }
  if (!p || *n < 1) { *n = 1; return INSUFFICIENT_SIZE; }
  p[0].pid = f.proc_pid;
  p[0].used = f.proc_mem;
  p[0].gi = p[0].ci = 0xffffffff;
  *n = 1;
  return OK;
}
static char event_set;
typedef struct { nvmlDevice_t device; unsigned long long type, data; unsigned gi, ci; } event_t;
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *s) { *s = &event_set; return OK; }
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t s) { (void)s; return OK; }
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long t, nvmlEventSet_t s) { (void)d; (void)t; (void)s; return OK; }
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t s, event_t *e, unsigned ms) {
  (void)s; (void)ms;
  if (!f.xid_pending) return TIMEOUT;
  f.xid_pending = 0;
  e->device = &devices[0];
  e->type = 0x8;
  e->data = (unsigned long long)f.xid;
  e->gi = e->ci = 0xffffffff;
  return OK;
}
