// SPDX-License-Identifier: GPL-2.0-only
/* `causeway check`: the smallest program that proves BPF loads and a uprobe
 * fires on this host. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

__u64 hits = 0;

SEC("uprobe")
int cw_check_uprobe(void *ctx)
{
	__sync_fetch_and_add(&hits, 1);
	return 0;
}

/*
 * `trace --probe-tier floor` (benchmarks): the design brief's floor for a
 * traced call — an entry uprobe that keeps the start time in a hash map, a
 * uretprobe that looks it up and submits one ring record without a wakeup —
 * attached where the real probes go, so that full tracing can be compared
 * with it in the same run. The records go to the library-call ring (shared
 * fd) with type 0, which the consumer counts as unknown and skips.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} floor_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);      /* replaced by the library-call ring */
} floor_events SEC(".maps");

struct floor_record {
	__u64 w[4];                     /* w[0] = 0: no cw_event_type */
};

SEC("uprobe")
int cw_floor_entry(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&floor_start, &tid, &now, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int cw_floor_return(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *start = bpf_map_lookup_elem(&floor_start, &tid);
	struct floor_record *r;

	if (!start)
		return 0;
	r = bpf_ringbuf_reserve(&floor_events, sizeof(*r), 0);
	if (!r)
		return 0;
	r->w[0] = 0;
	r->w[1] = *start;
	r->w[2] = bpf_ktime_get_ns() - *start;
	r->w[3] = tid;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}
