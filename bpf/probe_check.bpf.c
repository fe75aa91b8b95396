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
