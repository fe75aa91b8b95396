/* SPDX-License-Identifier: GPL-2.0-only */
/* The errno numbers libbpf's <bpf/usdt.bpf.h> returns, for a BPF target:
 * the host's <linux/errno.h> includes <asm/errno.h>, which clang -target bpf
 * does not find (bpf/ is searched first). */
#ifndef CAUSEWAY_BPF_LINUX_ERRNO_H
#define CAUSEWAY_BPF_LINUX_ERRNO_H
#define ENOENT 2
#define ESRCH 3
#define EINVAL 22
#endif
