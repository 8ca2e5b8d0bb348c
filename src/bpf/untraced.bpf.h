/* Part of offcpu.bpf.h, included by it after waits.bpf.h: the
 * scheduler's own account of a thread (sched_info, se.sum_exec_runtime)
 * read in the kernel, and the switches sched_switch did not report,
 * found by it and measured with it (docs/how-it-works.md). */
#ifndef FGBPF_UNTRACED_BPF_H
#define FGBPF_UNTRACED_BPF_H

/* The rq-clock time `at` of `task` (sched_info, on its run-queue's clock,
 * which its switch updated) on the clock of bpf_ktime_get_ns; 0 when
 * unknown. */
static __always_inline __u64 rq_time(struct task_struct *task, __u64 at, __u64 now, const bool btf)
{
	__u64 clock;

	if (!at || !bpf_core_field_exists(task->se.cfs_rq->rq))
		return 0;
	clock = btf ? task->se.cfs_rq->rq->clock : BPF_CORE_READ(task, se.cfs_rq, rq, clock);
	if (at > clock || clock - at > now)
		return 0;
	return now - (clock - at);
}

/* The scheduler's own account of `task` (sched_info, kept where the kernel
 * has CONFIG_SCHED_INFO, as Debian's do): the time it has waited on a
 * run-queue and the runs it has begun; 0 where the kernel keeps none. */
static __always_inline void sched_account(struct task_struct *task, __u64 *run_delay, __u64 *pcount,
					  const bool btf)
{
	*run_delay = 0;
	*pcount = 0;
	if (bpf_core_field_exists(task->sched_info.run_delay))
		*run_delay = TASK_FIELD(btf, task, sched_info.run_delay);
	if (bpf_core_field_exists(task->sched_info.pcount))
		*pcount = TASK_FIELD(btf, task, sched_info.pcount);
}

/* How long `task` has waited for a CPU since it was last queued, not yet
 * in its run_delay (the kernel adds it when the task arrives on a CPU,
 * after sched_switch); 0 when it is not queued, or unknown. */
static __always_inline __u64 queued_for(struct task_struct *task, __u64 now, const bool btf)
{
	__u64 queued;

	if (!bpf_core_field_exists(task->sched_info.last_queued))
		return 0;
	queued = rq_time(task, TASK_FIELD(btf, task, sched_info.last_queued), now, btf);
	return queued && queued < now ? now - queued : 0;
}

/* How long `task` has waited for a CPU since its run_delay stood at `then`:
 * what the kernel added to run_delay since (queueings that ended, and
 * those cut short by a move to another CPU's queue), and the queueing
 * still open. */
static __always_inline __u64 queued_since(struct task_struct *task, __u64 then, __u64 now, const bool btf)
{
	__u64 run_delay = 0;

	if (bpf_core_field_exists(task->sched_info.run_delay))
		run_delay = TASK_FIELD(btf, task, sched_info.run_delay);
	return queued_for(task, now, btf) + (run_delay > then ? run_delay - then : 0);
}

/* When `task`, running on this CPU, last began to run, on the clock of
 * bpf_ktime_get_ns: the scheduler's own record (sched_info.last_arrival,
 * kept on the run-queue clock, which it updated at this switch), for the
 * switch-ins sched_switch does not report. A 6.18 guest here was seen to
 * run threads again without a sched_switch naming them (/proc/TID/schedstat
 * counted more runs than sched_switch reported switch-ins; switch-outs
 * were all reported). 0 when unknown. */
static __always_inline __u64 arrived_at(struct task_struct *task, __u64 now, const bool btf)
{
	if (!bpf_core_field_exists(task->sched_info.last_arrival))
		return 0;
	return rq_time(task, TASK_FIELD(btf, task, sched_info.last_arrival), now, btf);
}

/* At switch-out, a wait still open in cur: the switch-in that ended it was
 * not reported. It ended when the thread began to run, as the scheduler
 * recorded it: added as ended then, and the entry turned into that run. */
static __always_inline void end_untraced_wait(void *ctx, struct fg_stats *st, struct task_struct *prev,
					      __u32 tid, struct fg_start *cur, __u64 now, const bool btf)
{
	__u64 arrived = arrived_at(prev, now, btf);

	if (arrived && arrived <= cur->ts && (cur->flags & FG_PRE_EXISTING)) {
		/* Seeded as blocked from /proc while it was still running
		 * (about to block): it has run since the capture began. */
		cur->phase = FG_RUNNING;
		return;
	}
	if (arrived <= cur->ts || arrived > now) {
		/* Unknown: the wait and the run are one span, left out. */
		st->untraced_ins_lost++;
		cur->phase = FG_SKIPPED;
		return;
	}
	st->untraced_ins++;
	record_wait(ctx, st, prev, tid, cur, arrived, btf, true);
	cur->ts = arrived;
	cur->phase = FG_RUNNING;
}

/* At a reported switch-out, a run that the scheduler says was broken by
 * switches sched_switch did not report, out and back in: its count of runs
 * (sched_info.pcount) is above the one the entry's switch-in noted.
 * Measured here on a 6.18 guest with a thread that reads /proc and sleeps
 * 2 ms: 4 of ~2,000 runs a capture (bpftrace on the sched_switch
 * tracepoint saw the same runs, pcount +2 between a switch-in and the
 * next switch-out), their run-queue time (run_delay) 5-30 ms in all,
 * which was counted as the thread's run. The span is split as the
 * scheduler accounted it, as untraced_switch_out does: its run time
 * (se.sum_exec_runtime), its run-queue delay (sched_info.run_delay), the
 * rest off-CPU; the wait ends where the scheduler says the thread last
 * began to run (sched_info.last_arrival), or at the switch-out when that
 * is not known. Drawn without stacks: neither end was seen. The entry's
 * run then begins at that arrival. An entry seeded from /proc as running
 * carries the counts /proc showed then; a thread that was waiting for a
 * CPU rather than running had one run fewer counted, so if that run's
 * switch-in goes unreported it is also counted as a switch-out not
 * reported (at most one per seeded thread). */
static __always_inline void hidden_switches(void *ctx, struct fg_stats *st, struct task_struct *task, __u32 tid,
					    struct fg_start *start, __u64 now, const bool btf)
{
	__u64 sum, span, ran, queueing, off, end, begin, run_delay, pcount;
	struct fg_start wait = {};

	sched_account(task, &run_delay, &pcount, btf);
	if (!start->pcount || pcount <= start->pcount || now <= start->ts)
		return;
	/* Each run not reported began with a switch-in not reported, after a
	 * switch-out not reported. */
	st->untraced_outs += pcount - start->pcount;
	st->untraced_ins += pcount - start->pcount;
	sum = TASK_FIELD(btf, task, se.sum_exec_runtime);
	span = now - start->ts;
	ran = sum > start->sum_exec ? sum - start->sum_exec : 0;
	if (ran > span)
		ran = span;
	queueing = run_delay > start->run_delay ? run_delay - start->run_delay : 0;
	if (queueing > span - ran)
		queueing = span - ran;
	off = span - ran - queueing;
	end = arrived_at(task, now, btf);
	if (end > now || end < start->ts + off + queueing)
		end = now;
	begin = end - off - queueing;
	if (measure_runs && begin > start->ts)
		add_ran(st, task, start->pid, tid, start->ts, begin, btf);
	wait.pid = start->pid;
	wait.flags = FG_START_UNTRACED;
	wait.ts = begin;
	wait.state = FG_SLEEPING;
	if (off && (state_mask & (1 << FG_SLEEPING)))
		record_wait(ctx, st, task, tid, &wait, begin + off, btf, true);
	wait.ts = begin + off;
	wait.state = FG_RUNQUEUE;
	if (queueing && (state_mask & (1 << FG_RUNQUEUE)))
		record_wait(ctx, st, task, tid, &wait, end, btf, true);
	start->ts = end;
}

/* At switch-in, an entry still held running: the switch-out that ended
 * its run was not reported (perf's record of the same tracepoint misses
 * it too: docs/kernels.md). The time since the entry's switch-in is split by
 * the scheduler's own counters, as /proc/TID/schedstat reports them: what
 * it ran (se.sum_exec_runtime), what it waited on a run-queue
 * (sched_info.run_delay, plus the queueing that ends now, from
 * sched_info.last_queued), and the rest, off-CPU and not runnable, in a
 * state nobody recorded: drawn as sleeping. The runs the kernel began
 * meanwhile without a switch-in reported (sched_info.pcount) are each a
 * switch-out not reported, counted. In time order the run comes first, the
 * queueing last; the spans are drawn without user stacks (the thread was
 * current then, unseen), under the pseudo-frame that says so. */
static __always_inline void untraced_switch_out(void *ctx, struct fg_stats *st, struct task_struct *next,
						__u32 tid, struct fg_start *start, __u64 now, const bool btf)
{
	__u64 sum = TASK_FIELD(btf, next, se.sum_exec_runtime), span, ran, queueing;
	__u64 run_delay, pcount;
	struct fg_start wait = {};

	sched_account(next, &run_delay, &pcount, btf);
	/* The runs the kernel began since, none reported, and the one that
	 * the entry's switch-in began: each ended in a switch-out not
	 * reported. */
	st->untraced_outs += pcount >= start->pcount && start->pcount ? pcount - start->pcount + 1 : 1;
	if (!start->pcount || now <= start->ts) {
		/* No account of its run to go by (an entry seeded from /proc;
		 * a new thread's sum_exec is 0 at its first switch-in). */
		st->untraced_ins_lost++;
		return;
	}
	span = now - start->ts;
	ran = sum > start->sum_exec ? sum - start->sum_exec : 0;
	if (ran > span)
		ran = span;
	if (measure_runs && ran)
		add_ran(st, next, start->pid, tid, start->ts, start->ts + ran, btf);
	queueing = queued_since(next, start->run_delay, now, btf);
	if (queueing > span - ran)
		queueing = span - ran;
	wait.pid = start->pid;
	wait.flags = FG_START_UNTRACED;
	wait.ts = start->ts + ran;
	wait.state = FG_SLEEPING;
	if (now - queueing > wait.ts && (state_mask & (1 << FG_SLEEPING)))
		record_wait(ctx, st, next, tid, &wait, now - queueing, btf, false);
	wait.ts = now - queueing;
	wait.state = FG_RUNQUEUE;
	if (queueing && (state_mask & (1 << FG_RUNQUEUE)))
		record_wait(ctx, st, next, tid, &wait, now, btf, false);
}

#endif
