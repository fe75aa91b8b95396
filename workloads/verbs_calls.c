/* Calls the real libibverbs. Without an HCA there is no device to open, so
 * the calls that need a provider (ibv_create_qp, ibv_modify_qp,
 * ibv_destroy_qp) cannot be made safely: they jump through the context's
 * provider ops. What can run with known arguments: ibv_get_async_event on a
 * context whose async fd is closed (returns -1 at once) and
 * ibv_ack_async_event on filled-in events (a port event; a QP event on a
 * stand-in QP whose mutex and condition are real).
 * Expected rows: see tests/e2e/verbs_e2e.cpp. */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LOAD(ret, name, ...)                    \
  ret (*name)(__VA_ARGS__) = dlsym(lib, #name); \
  if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }

int main(int argc, char **argv) {
  void *lib = dlopen(argc > 1 ? argv[1] : "libibverbs.so.1", RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  LOAD(struct ibv_device **, ibv_get_device_list, int *);
  LOAD(int, ibv_get_async_event, struct ibv_context *, struct ibv_async_event *);
  LOAD(void, ibv_ack_async_event, struct ibv_async_event *);

  int ndev = -1;
  ibv_get_device_list(&ndev);

  struct ibv_context ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.async_fd = -1;
  struct ibv_async_event ev;
  memset(&ev, 0, sizeof ev);
  int rc = ibv_get_async_event(&ctx, &ev);

  ev.event_type = IBV_EVENT_PORT_ERR;
  ev.element.port_num = 1;
  ibv_ack_async_event(&ev);

  static struct ibv_qp qp;
  qp.qp_num = 4242;
  pthread_mutex_init(&qp.mutex, NULL);
  pthread_cond_init(&qp.cond, NULL);
  ev.event_type = IBV_EVENT_QP_FATAL;
  ev.element.qp = &qp;
  ibv_ack_async_event(&ev);

  printf("devices %d get_async_event %d qp %p\n", ndev, rc, (void *)&qp);
  return 0;
}
