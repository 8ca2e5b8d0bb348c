// SPDX-License-Identifier: GPL-2.0
/* On-CPU sampler: runs on a cpu-clock perf event on every CPU and counts
 * (thread, user stack, kernel stack) in kernel maps. Nothing per sample
 * crosses to user space. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "errno.bpf.h"
#include "oncpu.h"
#include "targets.bpf.h"
#include "stacks.bpf.h"

const volatile bool include_idle = false;
const volatile bool user_stacks = true;
const volatile bool kern_stacks = true;
/* fgbpf itself: left out, as the off-CPU program leaves it out, so that a
 * system-wide profile shows the system, and naming fgbpf's own frames does
 * not load its debug information. Its cost is reported as "own use". */
const volatile __u32 self_pid = 0;

/* Sizes are defaults; the loader resizes `counts` and `stacks` before load. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct oncpu_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct oncpu_stats);
} stats SEC(".maps");

SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	struct oncpu_key key = {};
	struct oncpu_stats *st;
	__u32 zero = 0;
	__u64 one = 1, *count;
	long err;

	st = bpf_map_lookup_elem(&stats, &zero);
	if (!st)
		return 0;
	if (tid == 0 && !include_idle) {
		st->idle++;
		return 0;
	}
	if (pid == self_pid || !is_target(pid, tid))
		return 0;
	st->samples++;

	key.pid = pid;
	key.tid = tid;
	bpf_get_current_comm(&key.comm, sizeof(key.comm));
	if (user_stacks) {
		bool lost = false;

		key.user_stack = store_stack(ctx, 0, BPF_F_USER_STACK, &lost);
		if (lost)
			st->lost_user_stack++;
	}
	if (kern_stacks) {
		bool lost = false;

		key.kern_stack = store_stack(ctx, 1, 0, &lost);
		if (lost)
			st->lost_kern_stack++;
	}

	count = bpf_map_lookup_elem(&counts, &key);
	if (count) {
		__sync_fetch_and_add(count, 1);
		return 0;
	}
	err = bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST);
	if (err == -EEXIST) {
		/* Another CPU inserted the key between our lookup and update. */
		count = bpf_map_lookup_elem(&counts, &key);
		if (count)
			__sync_fetch_and_add(count, 1);
	} else if (err) {
		st->lost_map_full++;
	} else if (pid) {
		note_process(pid, bpf_get_current_task_btf());
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
