/* The .eh_frame table walker for kernels without bpf_loop (before 5.17).
 * A loop over 127 frames cannot be verified there: each frame is a
 * mapping search and a row search, and unrolled they exceed the
 * verifier's million instructions. So an entry program (the "compat"
 * variants of the sampler, switch and wakeup programs) saves the user
 * registers and what it has built so far in a per-CPU continuation, and
 * tail-calls a walker program of its own type, which walks
 * WALK_FRAMES_PER_CALL frames and tail-calls itself until the walk ends,
 * then finishes the entry's work (oncpu.bpf.h, offcpu.bpf.h,
 * wakers.bpf.h). 16 calls cover MAX_STACK_DEPTH, under the kernel's 33.
 * These programs call only global functions that take scalars (before
 * 5.12 a global function takes no other pointer than the context), and
 * mixing tail calls with function calls needs 5.10 on x86-64: on older
 * kernels the walker programs are refused and the loader falls back to
 * frame pointers (src/probe/fallback.rs). Before 5.15 there is no
 * bpf_task_pt_regs: the user registers are read where the kernel saves
 * them, at the top of the task's kernel stack (user_regs, unwind.bpf.h). */
#ifndef FGBPF_TAILWALK_BPF_H
#define FGBPF_TAILWALK_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"

#define WALK_FRAMES_PER_CALL 8

/* The continuation of a walk of the current task's user stack when its
 * process has tables, NULL otherwise (the caller then takes the frame
 * pointer walk of store_user_stack). The caller saves its own state in it
 * and tail-calls its walker. */
static __always_inline struct walk_cont *tail_walk_begin(__u32 pid)
{
	struct walk_cont *c;

	/* Kernel threads have no user registers. */
	if (!use_tables || !BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm) ||
	    !bpf_map_lookup_elem(&proc_unwind, &pid))
		return NULL;
	c = walk_cont();
	if (!c || !user_regs(&c->w, regs_by_hand))
		return NULL;
	walk_begin(&c->w, pid, true);
	return c;
}

/* Walks up to WALK_FRAMES_PER_CALL more frames into scratch slot 0; true
 * when the walk is over. */
static __always_inline bool walk_some(struct walk_cont *c)
{
	struct walk_ref ref = { .w = &c->w };
	__u32 slot = 0;

	ref.proc = bpf_map_lookup_elem(&proc_unwind, &c->w.pid);
	ref.buf = bpf_map_lookup_elem(&stack_scratch, &slot);
	/* The process's tables went away mid-walk (it exited): cut here. */
	if (!ref.proc || !ref.buf) {
		c->w.end = WALK_FAULT;
		return true;
	}
	for (int k = 0; k < WALK_FRAMES_PER_CALL; k++) {
		if (walk_frame(&ref, true))
			return true;
	}
	return c->w.n >= MAX_STACK_DEPTH;
}

/* Stores the walked stack as store_user_stack does and returns its key;
 * counts how the walk ended and says it in *walk. */
static __always_inline __u64 tail_walk_end(struct walk_cont *c, struct fg_stats *st, bool *lost,
					   __u32 *walk)
{
	struct stack_buf *buf;
	__u32 slot = 0, n = c->w.n;

	walk_outcome(c->w.end, c->w.used_fp, st, walk);
	buf = bpf_map_lookup_elem(&stack_scratch, &slot);
	if (!buf || n == 0)
		return STACK_NONE;
	if (n < MAX_STACK_DEPTH)
		buf->ips[n] = 0;
	return keep_stack(buf, slot, n * sizeof(__u64), lost);
}

/* One stage of a walker program: walks on, and tail-calls the next stage
 * through `progs` (entry 0, the program itself) while the walk goes on.
 * Returns only when the walk is over, or when the tail call failed (the
 * walk then ends cut, as at MAX_STACK_DEPTH). */
#define WALK_ON(ctx, progs, c)                                                                     \
	do {                                                                                       \
		if (!walk_some(c)) {                                                               \
			bpf_tail_call(ctx, &progs, 0);                                             \
			c->w.end = WALK_GOING;                                                     \
		}                                                                                  \
	} while (0)

#endif
