/* Stands in for the UAPI <linux/errno.h> that libbpf's usdt.bpf.h
 * includes (events.bpf.h): its <asm/errno.h> is the build machine's
 * architecture's, not found for the BPF target. The values usdt.bpf.h
 * returns, as every Linux architecture but alpha, mips, parisc and sparc
 * numbers them. */
#ifndef FGBPF_LINUX_ERRNO_H
#define FGBPF_LINUX_ERRNO_H
#include "../errno.bpf.h"
#ifndef ESRCH
#define ESRCH 3
#endif
#ifndef EINVAL
#define EINVAL 22
#endif
#ifndef E2BIG
#define E2BIG 7
#endif
#endif
