/* The registers of the threads already blocked when an off-CPU capture
 * starts. Their waits began before the switch tracer was attached, so no
 * switch-out walked their stacks; a task iterator writes, for each user
 * thread, its user registers as its entry to the kernel saved them and
 * its count of runs (sched_info.pcount), and user space walks the stack
 * each waits in from them (src/probe/seeds.rs), once it has read the
 * process's tables, if the thread has not run since (pcount unchanged).
 * Task iterators came in 5.8: the loader loads this program only where
 * the kernel's BTF has their context, struct bpf_iter__task. */
#ifndef FGBPF_SEEDS_BPF_H
#define FGBPF_SEEDS_BPF_H
#include "fgbpf.h"
#include "unwind.bpf.h"

SEC("iter/task")
int seed_regs(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct fg_seed_regs r = {};
	struct pt_regs *regs;

	/* Kernel threads have no user registers. */
	if (!task || !task->mm || (task->flags & PF_KTHREAD))
		return 0;
	r.pid = task->tgid;
	r.tid = task->pid;
	/* Where user_regs (unwind.bpf.h) finds them, for another task. */
	if (regs_by_hand) {
		void *stack = task->stack;

		regs = stack ? (struct pt_regs *)(stack + kernel_stack_size) - 1 : NULL;
	} else {
		regs = (struct pt_regs *)bpf_task_pt_regs(task);
	}
	if (!regs)
		return 0;
	r.ip = BPF_CORE_READ(regs, ip);
	r.sp = BPF_CORE_READ(regs, sp);
	r.bp = BPF_CORE_READ(regs, bp);
	if (bpf_core_field_exists(task->sched_info.pcount))
		r.pcount = BPF_CORE_READ(task, sched_info.pcount);
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}
#endif
