/* User-stack walker with unwind tables compiled from .eh_frame in user
 * space (src/procs/unwind/), so that code without frame pointers (most
 * distribution packages, glibc, default -O2 builds) unwinds whole. Per
 * frame: find the mapping holding the pc (the previous frame's, most of
 * the time; else a binary search over the process's sorted mappings), find
 * its row (the table's page index narrows it to a few rows, searched
 * binary), compute the CFA, read the return address at CFA-8 and the
 * caller's rbp where the row says it was saved. Code without rows (JIT,
 * tables not yet built, processes without tables) falls back to the frame
 * pointer for that frame. The walk runs in a bpf_loop, one frame per
 * iteration, up to MAX_STACK_DEPTH frames.
 *
 * The tables and their searches are tables.bpf.h; the walk's state and
 * the window the stack is read through are walk.bpf.h; HotSpot's frames,
 * which have no tables, are java.bpf.h; V8's JavaScript frames, walked by
 * rbp, are named by v8.bpf.h. */
#ifndef FGBPF_UNWIND_BPF_H
#define FGBPF_UNWIND_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "staged.bpf.h"
#include "python/python.bpf.h"
#include "ruby/ruby.bpf.h"
#include "php/php.bpf.h"
#include "perl/perl.bpf.h"
#include "luajit/luajit.bpf.h"
#include "go/go.bpf.h"
#include "tables.bpf.h"
#include "walk.bpf.h"
#include "files.bpf.h"
#include "java/java.bpf.h"
#include "v8/v8.bpf.h"
#include "beam/beam.bpf.h"

/* One step with the frame pointer: rbp points at the saved rbp, with the
 * return address above it. */
static __always_inline bool fp_step(struct walk *w, const bool cont)
{
	__u64 bp, ra;

	if (w->bp == 0 || w->bp < w->sp)
		return false;
	if (stack_read(w, w->bp, &bp, cont) || stack_read(w, w->bp + 8, &ra, cont))
		return false;
	w->sp = w->bp + 16;
	w->bp = bp;
	w->ip = ra;
	w->used_fp = 1;
	return true;
}

/* The mapping holding pc, NULL for none: the last frame's when it does,
 * else found by a search. by_pid: search by w->pid (find_mapping_of). */
static __always_inline struct fg_mapping *mapping_of(struct walk *w, struct fg_proc_unwind *proc,
						     __u64 pc, const bool by_pid)
{
	struct fg_mapping *m = mapping_at(proc, w->last);
	__u32 mi;

	if (m && pc >= m->start && pc < m->end)
		return m;
	mi = by_pid ? find_mapping_of(w->pid, pc) : find_mapping(proc, pc);
	w->last = mi;
	return mapping_at(proc, mi);
}

/* Records the next frame and steps to its caller: 1 when the walk is over
 * (w->end says why; WALK_GOING: cut at MAX_STACK_DEPTH), 0 to go on. */
static __always_inline long walk_frame(struct walk_ref *ref, const bool by_pid)
{
	struct walk *w = ref->w;
	struct fg_unwind_row *r = NULL;
	__u64 pc, cfa, ra;
	__u32 n = w->n;
	bool have_table = false;

	if (n >= MAX_STACK_DEPTH)
		return 1;
	ref->buf->ips[n] = w->ip;
	w->n = n + 1;
	if (n + 1 >= MAX_STACK_DEPTH)
		return 1;
	/* An address space execve is still building (past the point of no
	 * return, before the stack's strings are placed: its env_end is
	 * still 0): the registers are the old image's, whatever the
	 * process's entry or the mapping search says. */
	if (n == 0 && w->top == 0) {
		put_word(ref->buf, 0, FG_EXEC_WORD);
		w->end = WALK_DONE;
		return 1;
	}
	/* The BEAM's interpreter (OTP 23) running Erlang code: its frames,
	 * read from the Erlang process's own stack (beam.bpf.h). */
	if (n == 0 && !by_pid && ref->proc && beam_interp(w, ref->buf, w->pid))
		return 1;
	/* A caller's return address points after its call: look up the call. */
	pc = n == 0 ? w->ip : w->ip - 1;
	if (ref->proc) {
		__u64 gen = ref->proc->gen;
		struct row_cached *c = row_slot(pc, gen);

		if (c && c->pc == pc && c->gen == gen) {
			have_table = c->have_table;
			if (c->found)
				r = &c->row;
		} else {
			struct fg_mapping *m = mapping_of(w, ref->proc, pc, by_pid);

			if (m) {
				have_table = m->count != 0;
				r = row_of(m, pc);
			}
			if (c) {
				c->pc = pc;
				c->gen = gen;
				c->have_table = have_table;
				c->found = r != NULL;
				if (r)
					c->row = *r;
			}
		}
	}
	/* Not read yet (no entry, or one made at its start or its fork): by
	 * the file that holds the code (files.bpf.h). */
	if (!have_table && by_files && !by_pid && !(ref->proc && (ref->proc->flags & FG_PROC_READ))) {
		struct fg_mapping *m = file_mapping(w, pc);

		if (m) {
			have_table = m->count != 0;
			r = row_of(m, pc);
		} else if (n == 0 && (w->asked == -ENOENT || (w->in_exec && w->asked == -EBUSY))) {
			/* The pc is in no mapping of the process: an execve past
			 * its point of no return, the registers the old image's
			 * (the exec itself may hold the map's lock: EBUSY). */
			put_word(ref->buf, 0, FG_EXEC_WORD);
			w->end = WALK_DONE;
			return 1;
		}
	}
	if (!r || r->cfa_type == FG_CFA_NONE) {
		/* A child of clone or clone3 before its first return to user
		 * space, at the instruction after the syscall: the C library
		 * ends the function's rows before it (glibc's clone.S and
		 * clone3.S: the child runs on a new stack, and its frame
		 * pointer is still its parent's), and the child's code from
		 * there marks itself the outermost frame. Stepping by rbp would
		 * give it a caller from its parent's stack. */
		if (n == 0 && have_table && w->fork_child) {
			w->end = WALK_DONE;
			return 1;
		}
		/* Code without rows: a JVM's Java code is walked by what the JVM
		 * says of it (java.bpf.h). Not on the tail-call path: the Java
		 * walker needs bpf_loop's kernels. */
		if (!by_pid && !have_table && ref->proc) {
			long j = java_step(w, ref->buf, w->pid);

			if (j == JAVA_STEPPED)
				goto next;
			if (j == JAVA_OVER)
				return 1;
		}
		/* The BEAM's JIT code: the Erlang process's stack read for
		 * its return addresses, to the end of the walk (beam.bpf.h). */
		if (!by_pid && !have_table && ref->proc && beam_frames(w, ref->buf, w->pid))
			return 1;
		/* V8's JavaScript frames: named by their function, then
		 * walked by rbp (v8.bpf.h). */
		if (!by_pid && ref->proc)
			v8_frame(w, ref->buf, w->pid, have_table);
		/* Code without a row for it, and rbp zero: the ABI's mark of the
		 * outermost frame (`_start` without CFI, often below the first
		 * row; the bottom of a Go program's stacks, walked by frame
		 * pointers: Go writes no .eh_frame). */
		if (w->bp == 0) {
			w->end = WALK_DONE;
			return 1;
		}
		if (!fp_step(w, by_pid)) {
			w->end = WALK_LOST_FP;
			return 1;
		}
		goto next;
	}
	w->used_rows = 1;
	switch (r->cfa_type) {
	case FG_CFA_RSP:
		cfa = w->sp + r->cfa_off;
		break;
	case FG_CFA_RBP:
		cfa = w->bp + r->cfa_off;
		break;
	case FG_CFA_PLT:
		cfa = w->sp + r->cfa_off + ((w->ip & 15) >= 11 ? 8 : 0);
		break;
	case FG_CFA_END:
		w->end = WALK_DONE;
		return 1;
	case FG_CFA_SIGNAL: {
		/* The frame a signal interrupted. Its pc is where it was, not
		 * a return address: kept one byte on, so that the lookup here
		 * and user space's naming, which take a caller's pc a byte
		 * back to its call, find the instruction itself (a signal can
		 * land on a function's first byte). */
		__u64 ctx = w->sp + FG_SIGCONTEXT, ip, sp, bp;

		if (stack_read(w, ctx + FG_SIGCONTEXT_RIP, &ip, by_pid) ||
		    stack_read(w, ctx + FG_SIGCONTEXT_RSP, &sp, by_pid) ||
		    stack_read(w, ctx + FG_SIGCONTEXT_RBP, &bp, by_pid)) {
			w->end = WALK_FAULT;
			return 1;
		}
		put_word(ref->buf, n, FG_SIGNAL_WORD);
		w->ip = ip ? ip + 1 : 0;
		w->sp = sp;
		w->bp = bp;
		goto next;
	}
	default:
		w->end = WALK_UNSUPPORTED;
		return 1;
	}
	if (stack_read(w, cfa - 8, &ra, by_pid)) {
		w->end = WALK_FAULT;
		return 1;
	}
	if (r->rbp_type == FG_RBP_AT_CFA) {
		__u64 bp;

		if (stack_read(w, cfa + r->rbp_off, &bp, by_pid)) {
			w->end = WALK_FAULT;
			return 1;
		}
		w->bp = bp;
	} else if (r->rbp_type != FG_RBP_SAME) {
		w->bp = 0;
	}
	w->sp = cfa;
	w->ip = ra;
next:
	if (w->ip == 0) {
		w->end = WALK_DONE;
		return 1;
	}
	return 0;
}

static long walk_step(__u32 i, void *ctx)
{
	return walk_frame(ctx, false);
}

/* Starts a walk at the registers in w: no frames yet, the window empty,
 * and where the stack lies. */
static __always_inline void walk_begin(struct walk *w, __u32 pid, const bool compat)
{
	w->floor = w->sp;
	if (compat)
		w->top = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm, env_end);
	else
		w->top = bpf_get_current_task_btf()->mm->env_end;
	w->win_base = 0;
	w->win_len = 0;
	w->pid = pid;
	w->last = FG_MAX_MAPPINGS;
	w->n = 0;
	w->end = WALK_GOING;
	w->used_fp = 0;
	w->used_rows = 0;
	w->found_ok = 0;
	w->asks = 0;
	w->in_exec = 0;
}

/* walk_begin of a walk by bpf_loop, in a frame of its own: its caller's
 * (every program's stack walk, switch-ins' included) keeps fewer values
 * across the calls, within 6.1's 512 bytes of stack for a chain. */
static __noinline int walk_start(struct walk *w, __u32 pid)
{
	if (!w)
		return 0;
	/* LuaJIT's compiled code: walked from the VM's frame it runs on. */
	luajit_trace_start(w, pid);
	walk_begin(w, pid, false);
	return 0;
}

/* Counts how a walk ended and says it in *walk (enum fg_walk). */
static __always_inline void walk_outcome(__u32 end, bool used_fp, struct fg_stats *st, __u32 *walk)
{
	switch (end) {
	case WALK_GOING:
		st->unw_depth++;
		*walk = FG_WALK_DEPTH;
		break;
	case WALK_FAULT:
		st->unw_fault++;
		*walk = FG_WALK_FAULT;
		break;
	case WALK_UNSUPPORTED:
		st->unw_unsupported++;
		*walk = FG_WALK_UNSUPPORTED;
		break;
	case WALK_LOST_FP:
		st->unw_lost_fp++;
		*walk = FG_WALK_LOST;
		break;
	default:
		if (used_fp) {
			st->unw_mixed++;
			*walk = FG_WALK_MIXED;
		} else {
			st->unw_tables++;
			*walk = FG_WALK_TABLES;
		}
	}
}

/* Set by the loader before 5.15 (or FGBPF_FORCE_FALLBACK=no-task-regs),
 * for the tail-call walker (tailwalk.bpf.h), the only one that runs there. */
const volatile bool regs_by_hand = false;
/* THREAD_SIZE: 16 KiB on x86-64, 32 KiB with KASAN (set by the loader). */
const volatile __u32 kernel_stack_size = 16384;

/* Whether registers saved at an entry to the kernel are a child's of
 * clone (56) or clone3 (435) that has not returned from it: the kernel
 * copies the parent's and sets the result, ax, to 0 (copy_thread); in a
 * syscall's course ax holds -ENOSYS, and an interrupt's entry sets
 * orig_ax to -1. x86-64's numbers. */
static __always_inline bool fork_child(__u64 ax, __u64 orig_ax)
{
	return ax == 0 && (orig_ax == 56 || orig_ax == 435);
}

/* The user registers of the current task (a user task: the caller has
 * checked its mm), as saved at its entry to the kernel: by the timer
 * interrupt when a sample lands in user code, by the syscall or interrupt
 * entry otherwise (and at a context switch). by_hand: where x86-64 keeps
 * them, a struct pt_regs at the top of the task's kernel stack (no padding
 * above it before FRED, 6.9, which always has bpf_task_pt_regs), for
 * kernels before 5.15; the bpf_loop walker passes false, and its kernels
 * have the helper. */
static __always_inline bool user_regs(struct walk *w, const bool by_hand)
{
	struct pt_regs *regs;

	if (by_hand) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		void *stack = BPF_CORE_READ(task, stack);

		if (!stack)
			return false;
		regs = (struct pt_regs *)(stack + kernel_stack_size) - 1;
		w->ip = BPF_CORE_READ(regs, ip);
		w->sp = BPF_CORE_READ(regs, sp);
		w->bp = BPF_CORE_READ(regs, bp);
		w->r13 = BPF_CORE_READ(regs, r13);
		/* Not rbx, r12 and r15: the BEAM's interpreter is read by the
		 * bpf_loop walker only (beam_interp), which never reads by hand. */
		w->fork_child = fork_child(BPF_CORE_READ(regs, ax), BPF_CORE_READ(regs, orig_ax));
	} else {
		/* BTF pointers, read directly: a helper call per field costs
		 * more than the rest of the walk's start. */
		regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		if (!regs)
			return false;
		w->ip = regs->ip;
		w->sp = regs->sp;
		w->bp = regs->bp;
		/* HotSpot's interpreter keeps the bytecode pointer there, the
		 * BEAM's JIT its running process, its interpreter the process's
		 * stack pointer (and the process in r12, the instruction
		 * pointer in rbx, the X registers in r15). */
		w->r13 = regs->r13;
		w->rbx = regs->bx;
		w->r12 = regs->r12;
		w->r15 = regs->r15;
		w->fork_child = fork_child(regs->ax, regs->orig_ax);
	}
	return w->ip != 0;
}

/* The current task's user stack into `stacks`: walked with tables when
 * its process has them, else by the kernel's frame-pointer walk, then its
 * Python, Ruby, PHP, Perl or LuaJIT frames when it is a known interpreter
 * (python.bpf.h, ruby.bpf.h, php.bpf.h, perl.bpf.h, luajit.bpf.h). Returns its
 * key (see store_stack), counts how the walks went, and says it in *walk:
 * enum fg_walk in bits 0-3, enum fg_interp_walk in bits 4-7 (the
 * interpreter's). *known (when
 * given): user space has read the process (no need to announce it).
 * compat: the programs for kernels without bpf_loop, which walk tables by
 * tail calls before they come here (tailwalk.bpf.h): here only the frame
 * pointer walk, and no Python frames, so that neither bpf_loop nor a
 * global function taking pointers is in those programs. */
static __always_inline __u64 store_user_stack(void *ctx, __u32 pid, struct fg_stats *st, bool *lost,
					       __u32 *walk, bool *known, const bool compat)
{
	struct walk_ref ref = {};
	__u32 zero = 0, how = FG_INTERP_NONE, n;

	ref.buf = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!ref.buf)
		return STACK_NONE;
	/* The first load of a staged start (staged.bpf.h) takes this path
	 * too: the kernel's frame-pointer walk, nothing for the verifier to
	 * follow. */
	if (compat || staged) {
		/* Kernel threads have no user stack. Not
		 * bpf_get_current_task_btf(): this path runs on kernels before
		 * 5.11, and without BTF (--btf). */
		if (!BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm))
			return STACK_NONE;
		long bytes;

		/* The tail-call walker has walked processes with tables (and
		 * the first load of a staged start has none). */
		st->unw_fp_only++;
		*walk = FG_WALK_FP;
		/* The helper zero-fills the buffer past the frames it wrote. */
		bytes = bpf_get_stack(ctx, ref.buf->ips, sizeof(ref.buf->ips), BPF_F_USER_STACK);
		if (bytes <= 0)
			return STACK_NONE;
		return keep_stack(ref.buf, zero, bytes, lost);
	}
	/* Kernel threads have no user stack. */
	if (!bpf_get_current_task_btf()->mm)
		return STACK_NONE;
	ref.w = bpf_map_lookup_elem(&walks, &zero);
	if (!ref.w || !user_regs(ref.w, false))
		return STACK_NONE;
	if (use_tables)
		ref.proc = bpf_map_lookup_elem(&proc_unwind, &pid);
	walk_start(ref.w, pid);
	/* Its parent's, given at fork, and it has begun an exec since, which
	 * lets go of the entry once done: in execve past its point of no
	 * return, the registers still the old image's. Walked by file. */
	if (by_files && ref.proc && !(ref.proc->flags & FG_PROC_READ) && !(ref.proc->gen >> 63) &&
	    !(bpf_get_current_task_btf()->flags & PF_FORKNOEXEC)) {
		ref.proc = NULL;
		ref.w->in_exec = 1;
	}
	bpf_loop(MAX_STACK_DEPTH, walk_step, &ref, 0);
	if (ref.proc || ref.w->used_rows) {
		walk_outcome(ref.w->end, ref.w->used_fp, st, walk);
	} else {
		/* No tables for the process (yet), nor for the files it maps:
		 * frame pointers all the way. */
		st->unw_fp_only++;
		*walk = FG_WALK_FP;
	}
	n = ref.w->n;
	if (!ref.proc || ref.proc->interp_checked != interp_gen + 1) {
		/* Read before the lookup: an interpreter added meanwhile bumps
		 * it past the value written. */
		__u64 gen = interp_gen;

		n = add_python(ref.buf, n, pid, st, &how);
		if (how == FG_INTERP_NONE)
			n = add_ruby(ref.buf, n, pid, st, &how);
		if (how == FG_INTERP_NONE)
			n = add_php(ref.buf, n, pid, st, &how);
		if (how == FG_INTERP_NONE)
			n = add_perl(ref.buf, n, pid, st, &how);
		if (how == FG_INTERP_NONE)
			n = add_luajit(ref.buf, n, pid, st, &how);
		if (how == FG_INTERP_NONE)
			n = add_go(ref.buf, n, pid, st, &how);
		if (ref.proc && how == FG_INTERP_NONE)
			ref.proc->interp_checked = gen + 1;
	}
	*walk |= how << 4;
	if (known)
		*known = ref.proc && (ref.proc->flags & FG_PROC_READ);
	if (n < MAX_STACK_DEPTH)
		ref.buf->ips[n] = 0;
	return keep_stack(ref.buf, zero, n * sizeof(__u64), lost);
}

#endif
