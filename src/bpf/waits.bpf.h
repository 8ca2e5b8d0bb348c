/* Part of offcpu.bpf.h, included by it where its settings (min_block_ns,
 * state_mask, announce_wait_ns...) and switch helpers are declared: the
 * end of a wait, added to its counts key (with its kernel stack read at
 * the switch-in, its slice and its waker) and announced to user space. */
#ifndef FGBPF_WAITS_BPF_H
#define FGBPF_WAITS_BPF_H

/* A wait of `ns` in `key` has just ended: told to user space, for the
 * flight recorder's wait trigger. Through the ring buffer only, like the
 * runtimes' objects: counted lost with perf buffers. */
static __always_inline void announce_wait(const struct fg_key *key, __u64 ns)
{
	struct fg_proc_event *e;

	if (events_perf) {
		__sync_fetch_and_add(&proc_events_lost, 1);
		return;
	}
	e = reserve_proc_event(key->pid, FG_PROC_LONG_WAIT);
	if (!e)
		return;
	__builtin_memcpy(e->comm, key->comm, sizeof(e->comm));
	e->addr = ns;
	e->addr2 = (__u64)key->slice_first << 32 | key->tid;
	e->start = key->start;
	bpf_ringbuf_submit(e, FG_WAKE);
}

/* Adds `ns` of the wait in `key` (slices set), counting it lost when the
 * counts map is full; true when it was added. */
static __always_inline bool add_wait(void *ctx, struct fg_stats *st, struct task_struct *next, struct fg_key *key,
				     __u64 ns)
{
	bool fresh = false;

	if (add_count(key, ns, &fresh)) {
		st->lost_intervals++;
		st->lost_ns += ns;
		return false;
	}
	if (fresh)
		note_process(ctx, key->pid, next);
	return true;
}

/* Adds the wait in `start` (pid and user stack from its switch-out, or a
 * wait noted without one) that ends now, at next's switch-in. `woke`: when
 * the scheduler queued the thread to run again (its wakeup), 0 when not
 * known: from then on it waited for a CPU, counted as run-queue time under
 * the same stacks, as the kernel counts it (sched_info.run_delay). The
 * filters take the whole wait. */
static __always_inline void record_woken_wait(void *ctx, struct fg_stats *st, struct task_struct *next, __u32 tid,
					      struct fg_start *start, __u64 woke, __u64 now, const bool btf,
					      const bool untraced)
{
	struct fg_key key = {};
	__u64 delta = now - start->ts, scale = 1;

	key.slice_first = slice_of(start->ts);
	key.slice_last = slice_of(now);
	key.user_stack = start->user_stack;
	key.state = start->state;
	key.flags = start->flags;
	key.waker = start->waker;
	key.kern_stack = start->kern_stack;
	/* Seeded blocks started before the capture: their length so far is
	 * not their length, so the filters do not apply to them. */
	if (!(key.flags & FG_PRE_EXISTING)) {
		if (delta < min_block_ns) {
			st->too_short++;
			return;
		}
		if (delta > max_block_ns) {
			st->too_long++;
			return;
		}
	}
	/* Sampled intervals stand for sample_every of their kind; a seeded
	 * block was not sampled, it is the one thread's own wait. */
	if (!(key.flags & FG_PRE_EXISTING))
		scale = sample_every;
	key.pid = TASK_FIELD(btf, next, tgid);
	key.tid = tid;
	key.start = proc_start(next);
	key.cgroup = group_of(next);
	task_comm(next, key.comm, btf);
	/* Its own length, before sampling scaled it. */
	if (announce_wait_ns && !(key.flags & FG_PRE_EXISTING) && now - start->ts >= announce_wait_ns)
		announce_wait(&key, now - start->ts);
	if (untraced) {
		/* `next` runs now: the wait's kernel stack is gone. */
		key.flags |= FG_END_UNTRACED;
		key.kern_stack = 0;
	} else if (kern_stacks) {
		bool lost = false;

		/* Else taken at switch-out, in key.kern_stack already. */
		if (!kstack_at_switch_out)
			key.kern_stack = store_task_kernel_stack(next, 1, &lost);
		if (lost)
			st->lost_kern_stack++;
	}
	if (woke && woke >= start->ts && woke < now) {
		key.slice_last = slice_of(woke);
		if (woke > start->ts && !add_wait(ctx, st, next, &key, (woke - start->ts) * scale))
			return;
		if (!(state_mask & (1 << FG_RUNQUEUE))) {
			st->recorded++;
			return;
		}
		key.state = FG_RUNQUEUE;
		key.slice_first = key.slice_last;
		key.slice_last = slice_of(now);
		delta = now - woke;
	}
	if (add_wait(ctx, st, next, &key, delta * scale))
		st->recorded++;
}


/* record_woken_wait without a wakeup's time. */
static __always_inline void record_wait(void *ctx, struct fg_stats *st, struct task_struct *next, __u32 tid,
					struct fg_start *start, __u64 now, const bool btf, const bool untraced)
{
	record_woken_wait(ctx, st, next, tid, start, 0, now, btf, untraced);
}

#endif
