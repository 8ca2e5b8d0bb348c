/* Who woke a blocked thread (--wakers), the question offwaketime answers.
 * On sched_waking, which runs in the waker's context (sched_wakeup may run
 * later, on the wakee's CPU, under another task), a target thread that
 * the off-CPU tracer holds as blocked gets the waker's thread and stacks
 * attached to its pending interval; switch-in (offcpu.bpf.h) then adds the
 * interval under (blocked stacks, state, waker). Wakers are stored once
 * each in `wakers`, keyed by a seeded hash of their contents, like stacks. */
#ifndef FGBPF_WAKERS_BPF_H
#define FGBPF_WAKERS_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"
#include "tailwalk.bpf.h"
#include "staged.bpf.h"

const volatile bool record_wakers = false;

/* Sized by the loader like `stacks` (--max-stacks): 1 is a placeholder. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct fg_waker);
} wakers SEC(".maps");

static __always_inline __u64 keep_waker(struct fg_waker *w, struct fg_stats *st)
{
	__u64 h = 0x9E6C63D0676A9A99ULL ^ stack_seed;

	h = mix64(h, ((__u64)w->pid << 32) | w->tid);
	h = mix64(h, w->user_stack);
	h = mix64(h, w->kern_stack);
	h = mix64(h, *(__u64 *)&w->comm[0]);
	h = mix64(h, *(__u64 *)&w->comm[8]);
	if (h == 0)
		h = 1;
	if (!bpf_map_lookup_elem(&wakers, &h)) {
		long err = bpf_map_update_elem(&wakers, &h, w, BPF_NOEXIST);

		if (err && err != -EEXIST) {
			st->lost_wakers++;
			return 0;
		}
	}
	return h;
}

/* tailwalk.bpf.h: the wakeup tracer's table walker. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} waking_walks SEC(".maps");

/* The waker's walk is not a sample: its walk counters go to a second
 * slot of `stats` that the per-sample accounting does not read. */
static __always_inline struct fg_stats *waker_walks(void)
{
	__u32 one = 1;

	return bpf_map_lookup_elem(&stats, &one);
}

/* Attaches the waker, its user stack now in w, to the pending wait start
 * (NULL: the wait ended meanwhile, or the walker's lookup found none). */
static __always_inline void waking_rest(struct fg_stats *st, struct fg_start *start, struct fg_waker *w,
					bool user_lost)
{
	if (user_lost)
		st->lost_user_stack++;
	if (start)
		start->waker = keep_waker(w, st);
}

/* `starts` is the off-CPU tracer's map of blocked threads. compat: the
 * variant for kernels without bpf_loop (tailwalk.bpf.h). */
static __always_inline void on_waking(void *ctx, struct task_struct *p, const bool compat)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	struct fg_start *start;
	struct fg_stats *st, *walks;
	struct fg_waker w = {};
	__u32 walk = FG_WALK_NONE;
	bool lost = false;

	if (!record_wakers)
		return;
	/* Only threads the tracer holds as blocked: targets that passed the
	 * filters at their switch-out. */
	start = bpf_map_lookup_elem(&starts, &tid);
	if (!start || start->phase != FG_WAITING)
		return;
	st = get_stats();
	walks = waker_walks();
	if (!st || !walks)
		return;
	st->wakeups++;
	/* Not bpf_get_current_task_btf(): raw tracepoints run on kernels
	 * without BTF too (--btf). */
	w.pid = bpf_get_current_pid_tgid() >> 32;
	w.tid = (__u32)bpf_get_current_pid_tgid();
	w.start = proc_start((struct task_struct *)bpf_get_current_task());
	bpf_get_current_comm(&w.comm, sizeof(w.comm));
	if (kern_stacks) {
		w.kern_stack = store_stack(ctx, 1, 0, &lost);
		if (lost)
			st->lost_kern_stack++;
	}
	lost = false;
	if (user_stacks && w.tid) {
		if (compat) {
			struct walk_cont *c = tail_walk_begin(w.pid);

			if (c) {
				c->waker = w;
				c->tid = tid;
				bpf_tail_call(ctx, &waking_walks, 0);
			}
		}
		w.user_stack = store_user_stack(ctx, w.pid, walks, &lost, &walk, NULL, compat);
	}
	waking_rest(st, start, &w, lost);
}

static __always_inline int walk_waking(void *ctx)
{
	struct walk_cont *c = walk_cont();
	struct fg_stats *st = get_stats(), *walks = waker_walks();
	struct fg_waker w;
	__u32 walk = FG_WALK_NONE;
	bool lost = false;

	if (!c || !st || !walks)
		return 0;
	WALK_ON(ctx, waking_walks, c);
	w = c->waker;
	w.user_stack = tail_walk_end(c, walks, &lost, &walk);
	/* The pointer does not cross the tail calls: looked up again. */
	waking_rest(st, bpf_map_lookup_elem(&starts, &c->tid), &w, lost);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(waking_btf, struct task_struct *p)
{
	on_waking(ctx, p, false);
	return 0;
}

/* The first load's in a staged start (staged.bpf.h). */
SEC("tp_btf/sched_waking")
int BPF_PROG(waking_btf_staged, struct task_struct *p)
{
	run_full(ctx, &full_waking);
	on_waking(ctx, p, false);
	return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(waking_raw, struct task_struct *p)
{
	on_waking(ctx, p, false);
	return 0;
}

/* The first load's in a staged start (staged.bpf.h). */
SEC("raw_tp/sched_waking")
int BPF_PROG(waking_raw_staged, struct task_struct *p)
{
	run_full(ctx, &full_waking);
	on_waking(ctx, p, false);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(waking_btf_compat, struct task_struct *p)
{
	on_waking(ctx, p, true);
	return 0;
}

SEC("raw_tp/sched_waking")
int BPF_PROG(waking_raw_compat, struct task_struct *p)
{
	on_waking(ctx, p, true);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(walk_waking_btf, struct task_struct *p)
{
	return walk_waking(ctx);
}

SEC("raw_tp/sched_waking")
int BPF_PROG(walk_waking_raw, struct task_struct *p)
{
	return walk_waking(ctx);
}

#endif
