// SPDX-License-Identifier: GPL-2.0-only
/*
 * Requests at a traced server's sockets (include/causeway/model/requests.h):
 * each send or receive of a traced process on a stream socket (TCP, Unix) is
 * one record with the bytes it moved and a copy of their first
 * CW_SOCK_PEEK_BYTES, so user space can read HTTP/1.1 framing; a TCP
 * connection's end (either side closing) is another. A skeleton of its own,
 * sharing the host ring, traced_tgids and the drop counters with
 * bpf/host.bpf.c: a kernel without these tracepoints loses requests, not the
 * host probes.
 *
 * Tracepoints only: `sock_send_length` / `sock_recv_length` (kernel 6.3+)
 * fire in sock_sendmsg / sock_recvmsg with the socket and the bytes moved,
 * whatever the system call (send, sendto, sendmsg, write, writev and their
 * receiving twins); the user buffer comes from that system call's entry
 * tracepoint. fentry on tcp_sendmsg is refused on hosts that lock ftrace
 * down (this CI box: EPERM at load), and kprobes are often compiled out.
 * The copy goes straight into the ring record: nothing of it on the stack.
 */
#include "common.bpf.h"
#include "causeway/model/requests.h"

#define CW_MSG_PEEK 2

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);	/* replaced by the host ring (bpf_map__reuse_fd) */
} host_events SEC(".maps");

struct sock_call {
	__u64 buf;              /* user address of the call's first bytes */
	__u64 limit;            /* bytes there before the buffer's first segment ends */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);     /* tid */
	__type(value, struct sock_call);
} sock_calls SEC(".maps");

/* The traced process each socket was last used by: a connection's end is
 * often seen in softirq, on whatever task was running. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);     /* struct sock * */
	__type(value, __u64);   /* tgid << 32 | tid */
} sock_seen SEC(".maps");

static __always_inline void save_buf(__u64 buf, __u64 limit)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct sock_call c = { .buf = buf, .limit = limit };

	if (!cw_tgid_traced(id >> 32) || !cw_cgroup_ok())
		return;
	bpf_map_update_elem(&sock_calls, &tid, &c, BPF_ANY);
}

/* The first segment of a user iovec array. */
static __always_inline void save_iov(const struct iovec *iov)
{
	struct iovec v = {};

	if (!cw_tgid_traced(bpf_get_current_pid_tgid() >> 32))
		return;
	if (bpf_probe_read_user(&v, sizeof(v), iov))
		return;
	save_buf((__u64)v.iov_base, v.iov_len);
}

static __always_inline void save_msghdr(const struct user_msghdr *m)
{
	struct iovec *iov = NULL;

	if (!cw_tgid_traced(bpf_get_current_pid_tgid() >> 32))
		return;
	if (bpf_probe_read_user(&iov, sizeof(iov), &m->msg_iov) || !iov)
		return;
	save_iov(iov);
}

SEC("tracepoint/syscalls/sys_enter_write")
int cw_enter_write(struct trace_event_raw_sys_enter *ctx) { save_buf(ctx->args[1], ctx->args[2]); return 0; }
SEC("tracepoint/syscalls/sys_enter_read")
int cw_enter_read(struct trace_event_raw_sys_enter *ctx) { save_buf(ctx->args[1], ctx->args[2]); return 0; }
SEC("tracepoint/syscalls/sys_enter_sendto")
int cw_enter_sendto(struct trace_event_raw_sys_enter *ctx) { save_buf(ctx->args[1], ctx->args[2]); return 0; }
SEC("tracepoint/syscalls/sys_enter_recvfrom")
int cw_enter_recvfrom(struct trace_event_raw_sys_enter *ctx) { save_buf(ctx->args[1], ctx->args[2]); return 0; }
SEC("tracepoint/syscalls/sys_enter_writev")
int cw_enter_writev(struct trace_event_raw_sys_enter *ctx) { save_iov((const struct iovec *)ctx->args[1]); return 0; }
SEC("tracepoint/syscalls/sys_enter_readv")
int cw_enter_readv(struct trace_event_raw_sys_enter *ctx) { save_iov((const struct iovec *)ctx->args[1]); return 0; }
SEC("tracepoint/syscalls/sys_enter_sendmsg")
int cw_enter_sendmsg(struct trace_event_raw_sys_enter *ctx) { save_msghdr((const struct user_msghdr *)ctx->args[1]); return 0; }
SEC("tracepoint/syscalls/sys_enter_recvmsg")
int cw_enter_recvmsg(struct trace_event_raw_sys_enter *ctx) { save_msghdr((const struct user_msghdr *)ctx->args[1]); return 0; }

/* Stream sockets only: a datagram is no HTTP. */
static __always_inline int stream_kind(struct sock *sk, __u8 *kind)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	if (BPF_CORE_READ(sk, sk_type) != 1 /* SOCK_STREAM */)
		return 0;
	if (family == 1 /* AF_UNIX */)
		*kind = CW_SOCK_UNIX;
	else if (family == 2 || family == 10 /* AF_INET, AF_INET6 */)
		*kind = CW_SOCK_TCP;
	else
		return 0;
	return 1;
}

static __always_inline void sock_io(struct sock *sk, long ret, __u8 dir, __u8 kind)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct sock_call *c = bpf_map_lookup_elem(&sock_calls, &tid);
	struct cw_sock_event *e;
	__u64 buf, n, key, owner;

	if (!c)
		return;
	buf = c->buf;
	n = ret > 0 ? (__u64)ret : 0;
	if (n > c->limit)
		n = c->limit;
	bpf_map_delete_elem(&sock_calls, &tid);
	key = (__u64)sk;
	owner = bpf_get_current_pid_tgid();
	bpf_map_update_elem(&sock_seen, &key, &owner, BPF_ANY);
	e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);
	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		return;
	}
	cw_fill_header(&e->hdr, CW_EV_SOCK_IO, bpf_ktime_get_ns(), bpf_get_current_pid_tgid() >> 32, tid);
	e->sock = (__u64)sk;
	e->ret = ret;
	e->dir = dir;
	e->kind = kind;
	e->_pad = 0;
	if (n > CW_SOCK_PEEK_BYTES)
		n = CW_SOCK_PEEK_BYTES;
	e->len = 0;
	if (n && buf && !bpf_probe_read_user(e->data, n, (void *)buf))
		e->len = n;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static __always_inline void emit_close(struct sock *sk, __u64 owner, __u32 by_peer)
{
	struct cw_sock_close_event *e = bpf_ringbuf_reserve(&host_events, sizeof(*e), 0);

	if (!e) {
		cw_count_drop(CW_DROP_HOST);
		return;
	}
	cw_fill_header(&e->hdr, CW_EV_SOCK_CLOSE, bpf_ktime_get_ns(), owner >> 32, (__u32)owner);
	e->sock = (__u64)sk;
	e->by_peer = by_peer;
	e->_pad = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(cw_sock_send, struct sock *sk, int ret, int flags)
{
	__u8 kind;

	if (stream_kind(sk, &kind))
		sock_io(sk, ret, CW_SOCK_SEND, kind);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(cw_sock_recv, struct sock *sk, int ret, int flags)
{
	__u8 kind;

	if (!(flags & CW_MSG_PEEK) && stream_kind(sk, &kind))
		sock_io(sk, ret, CW_SOCK_RECV, kind);
	return 0;
}

/* A TCP connection of a traced server ends: the peer closed (CLOSE_WAIT: a
 * client that hung up) or the server did (FIN_WAIT1, or CLOSE at once). It
 * runs in softirq too, so the socket, not the task, says whose it is. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(cw_tcp_state, const struct sock *sk, const int oldstate, const int newstate)
{
	__u64 key = (__u64)sk, *owner;

	if (newstate != 8 /* CLOSE_WAIT */ && newstate != 4 /* FIN_WAIT1 */ && newstate != 7 /* CLOSE */)
		return 0;
	owner = bpf_map_lookup_elem(&sock_seen, &key);
	if (!owner)
		return 0;
	emit_close((struct sock *)sk, *owner, newstate == 8);
	/* The peer's FIN is not the end of our side: the server's close
	 * (FIN_WAIT1/CLOSE) may follow and is reported too. */
	if (newstate != 8)
		bpf_map_delete_elem(&sock_seen, &key);
	return 0;
}
