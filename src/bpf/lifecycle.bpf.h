/* The process lifecycle hooks (fork, exec, exit), each calling every part
 * of the object that follows processes: the target filter and process
 * announcements (targets.bpf.h), the per-process unwind mappings
 * (unwind.bpf.h) and interpreters (python.bpf.h). Included last, after
 * all of them. */
#ifndef FGBPF_LIFECYCLE_BPF_H
#define FGBPF_LIFECYCLE_BPF_H

#include "fgbpf.h"
#include "targets.bpf.h"
#include "unwind.bpf.h"
#include "python/python.bpf.h"

/* Forked children that could not be given their parent's mappings (the
 * proc_unwind map was full: the update of a new key failed); user space
 * reports it. */
__u64 inherit_lost = 0;

/* A forked child has its parent's address space: it walks with its
 * parent's mappings and interpreter from its first stack, before user
 * space has read it (a pre-forking server's workers, a shell's
 * children). User space overwrites them once it reads the child. */
static __always_inline void inherit(struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, tgid);
	struct fg_proc_unwind *u = bpf_map_lookup_elem(&proc_unwind, &ppid);
	struct fg_py_proc *py = bpf_map_lookup_elem(&py_procs, &ppid);

	if (u) {
		/* BPF_ANY: an entry already there under the child's PID is
		 * stale (written by user space for a process that has exited
		 * since) and must not keep the child from its parent's. */
		if (bpf_map_update_elem(&proc_unwind, &cpid, u, BPF_ANY)) {
			__sync_fetch_and_add(&inherit_lost, 1);
		} else {
			/* Not read by user space yet: announce its first stacks. */
			u = bpf_map_lookup_elem(&proc_unwind, &cpid);
			if (u)
				u->flags &= ~FG_PROC_READ;
		}
	} else {
		bpf_map_delete_elem(&proc_unwind, &cpid);
	}
	if (py)
		bpf_map_update_elem(&py_procs, &cpid, py, BPF_ANY);
	else
		bpf_map_delete_elem(&py_procs, &cpid);
}

/* The mappings of a process that execs or exits are gone with it, and
 * its runtime: the walkers must not read a new program's memory with the
 * old one's offsets (user space gives the new one its own). */
static __always_inline void forget(__u32 pid)
{
	bpf_map_delete_elem(&proc_unwind, &pid);
	bpf_map_delete_elem(&py_procs, &pid);
	bpf_map_delete_elem(&rb_procs, &pid);
	bpf_map_delete_elem(&php_procs, &pid);
	bpf_map_delete_elem(&perl_procs, &pid);
	bpf_map_delete_elem(&luajit_procs, &pid);
	bpf_map_delete_elem(&beam_procs, &pid);
	bpf_map_delete_elem(&java_procs, &pid);
	bpf_map_delete_elem(&v8_procs, &pid);
	bpf_map_delete_elem(&go_procs, &pid);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_btf, struct task_struct *parent, struct task_struct *child)
{
	if (on_fork(parent, child))
		inherit(parent, child);
	return 0;
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(fork_raw, struct task_struct *parent, struct task_struct *child)
{
	if (on_fork(parent, child))
		inherit(parent, child);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(exec_btf, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	forget(BPF_CORE_READ(p, tgid));
	note_exec_path(bprm);
	on_exec(ctx, p);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(exec_raw, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	forget(BPF_CORE_READ(p, tgid));
	note_exec_path(bprm);
	on_exec(ctx, p);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(exit_btf, struct task_struct *p)
{
	if (on_exit(ctx, p))
		forget(BPF_CORE_READ(p, tgid));
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(exit_raw, struct task_struct *p)
{
	if (on_exit(ctx, p))
		forget(BPF_CORE_READ(p, tgid));
	return 0;
}

#endif
