/* User-stack walker with unwind tables compiled from .eh_frame in user
 * space (src/procs/unwind/), so that code without frame pointers (most
 * distribution packages, glibc, default -O2 builds) unwinds whole. Per
 * frame: find the mapping holding the pc (binary search over the process's
 * sorted mappings), find its row (binary search over the table), compute
 * the CFA, read the return address at CFA-8 and the caller's rbp where the
 * row says it was saved. Code without rows (JIT, tables not yet built)
 * falls back to the frame pointer for that frame. The walk runs in a
 * bpf_loop, one frame per iteration, up to MAX_STACK_DEPTH frames. */
#ifndef FGBPF_UNWIND_BPF_H
#define FGBPF_UNWIND_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "python.bpf.h"

/* Sized by the loader; user space fills it through a memory mapping. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fg_unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct fg_proc_unwind);
} proc_unwind SEC(".maps");

/* Off when the user asked for frame pointers only (or no process has
 * tables): stacks then come from bpf_get_stack, as before. */
const volatile bool use_tables = false;

enum walk_end {
	WALK_GOING = 0,
	WALK_DONE,        /* reached the outermost frame */
	WALK_FAULT,       /* a read of the stack failed */
	WALK_UNSUPPORTED, /* a rule the walker cannot follow */
	WALK_LOST_FP,     /* no row and no usable frame pointer */
};

struct walk {
	__u64 ip, sp, bp;
	__u32 pid;
	struct fg_proc_unwind *proc;
	struct stack_buf *buf;
	__u32 n;
	__u32 end;
	bool used_fp;
	bool used_rows;
};

/* The binary searches are global functions: the verifier checks each once
 * on its own, instead of once per path through the walk, which would
 * exceed its instruction budget. */

/* Index of the mapping holding pc, or FG_MAX_MAPPINGS for none. */
static __always_inline __u32 mapping_in(struct fg_proc_unwind *proc, __u64 pc)
{
	__u32 lo = 0, hi, idx;

	if (!proc)
		return FG_MAX_MAPPINGS;
	hi = proc->count;
	if (hi > FG_MAX_MAPPINGS)
		hi = FG_MAX_MAPPINGS;
	/* last mapping with start <= pc */
	for (int i = 0; i < 8 && lo < hi; i++) {
		__u32 mid = (lo + hi) / 2;

		if (mid >= FG_MAX_MAPPINGS)
			return FG_MAX_MAPPINGS;
		if (proc->maps[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return FG_MAX_MAPPINGS;
	idx = lo - 1;
	if (idx >= FG_MAX_MAPPINGS)
		return FG_MAX_MAPPINGS;
	return pc < proc->maps[idx].end ? idx : FG_MAX_MAPPINGS;
}

__noinline __u32 find_mapping(struct fg_proc_unwind *proc, __u64 pc)
{
	return mapping_in(proc, pc);
}

/* The same for the process pid: for kernels before 5.12, whose global
 * functions take no pointer but the context (the tail-call walker,
 * tailwalk.bpf.h). One more hash lookup per frame. */
__noinline __u32 find_mapping_of(__u32 pid, __u64 pc)
{
	return mapping_in(bpf_map_lookup_elem(&proc_unwind, &pid), pc);
}

/* Index in unwind_rows of the row for rel in rows [first, first + count),
 * or ~0 (no such element) for none. */
__noinline __u32 find_row(__u32 first, __u32 count, __u32 rel)
{
	__u32 lo = 0, hi = count;

	/* last row with pc <= rel; 2^24 rows per table at most */
	for (int i = 0; i < 24 && lo < hi; i++) {
		__u32 mid = (lo + hi) / 2;
		__u32 key = first + mid;
		struct fg_unwind_row *r = bpf_map_lookup_elem(&unwind_rows, &key);

		if (!r)
			return ~0U;
		if (r->pc <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return ~0U;
	return first + lo - 1;
}

/* One step with the frame pointer: rbp points at the saved rbp, with the
 * return address above it. */
static __always_inline bool fp_step(struct walk *w)
{
	__u64 frame[2];

	if (w->bp == 0 || w->bp < w->sp)
		return false;
	if (bpf_probe_read_user(frame, sizeof(frame), (void *)w->bp))
		return false;
	w->sp = w->bp + 16;
	w->bp = frame[0];
	w->ip = frame[1];
	w->used_fp = true;
	return true;
}

/* Records frame n and steps to its caller: 1 when the walk is over
 * (w->end says why; WALK_GOING: cut at MAX_STACK_DEPTH), 0 to go on.
 * by_pid: look the mapping up by w->pid (find_mapping_of). */
static __always_inline long walk_frame(__u32 n, struct walk *w, const bool by_pid)
{
	struct fg_mapping *m;
	struct fg_unwind_row *r;
	__u64 pc, cfa, ra;
	__u64 mi;
	bool have_table = false;

	if (n >= MAX_STACK_DEPTH)
		return 1;
	w->buf->ips[n] = w->ip;
	w->n = n + 1;
	if (n + 1 >= MAX_STACK_DEPTH)
		return 1;
	/* A caller's return address points after its call: look up the call. */
	pc = n == 0 ? w->ip : w->ip - 1;
	r = NULL;
	mi = by_pid ? find_mapping_of(w->pid, pc) : find_mapping(w->proc, pc);
	/* Keep the bound check: the compiler can see it holds, the verifier
	 * cannot see into a global function. */
	asm volatile("" : "+r"(mi));
	if (mi < FG_MAX_MAPPINGS && w->proc) {
		m = &w->proc->maps[mi];
		have_table = m->count != 0;
		if (m->count && pc - m->load <= 0xffffffffULL) {
			__u32 ri = find_row(m->first, m->count, (__u32)(pc - m->load));

			r = bpf_map_lookup_elem(&unwind_rows, &ri);
		}
	}
	if (!r || r->cfa_type == FG_CFA_NONE) {
		/* Code of a binary with tables but no row for it, and rbp zero:
		 * the ABI's mark of the outermost frame (`_start` without CFI,
		 * often below the first row). */
		if (have_table && w->bp == 0) {
			w->end = WALK_DONE;
			return 1;
		}
		if (!fp_step(w)) {
			w->end = WALK_LOST_FP;
			return 1;
		}
		goto next;
	}
	w->used_rows = true;
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
	default:
		w->end = WALK_UNSUPPORTED;
		return 1;
	}
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8))) {
		w->end = WALK_FAULT;
		return 1;
	}
	if (r->rbp_type == FG_RBP_AT_CFA) {
		if (bpf_probe_read_user(&w->bp, sizeof(w->bp), (void *)(cfa + r->rbp_off))) {
			w->end = WALK_FAULT;
			return 1;
		}
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
	/* The loop index is the frame number: every iteration records one
	 * frame. The verifier sees it as any value below the loop bound, so it
	 * checks this body once instead of once per frame number. */
	return walk_frame(i, ctx, false);
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
	} else {
		regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	}
	if (!regs)
		return false;
	w->ip = BPF_CORE_READ(regs, ip);
	w->sp = BPF_CORE_READ(regs, sp);
	w->bp = BPF_CORE_READ(regs, bp);
	return w->ip != 0;
}

/* The current task's user stack into `stacks`: walked with tables when
 * its process has them, else by the kernel's frame-pointer walk, then its
 * Python frames when it is a known interpreter (python.bpf.h). Returns its
 * key (see store_stack), counts how the walks went, and says it in *walk:
 * enum fg_walk in bits 0-3, enum fg_py_walk in bits 4-7.
 * compat: the programs for kernels without bpf_loop, which walk tables by
 * tail calls before they come here (tailwalk.bpf.h): here only the frame
 * pointer walk, and no Python frames, so that neither bpf_loop nor a
 * global function taking pointers is in those programs. */
static __always_inline __u64 store_user_stack(void *ctx, __u32 pid, struct fg_stats *st, bool *lost,
					       __u32 *walk, const bool compat)
{
	struct walk w = {};
	__u32 slot = 0, py = FG_PY_NONE;

	/* Kernel threads have no user stack. Not bpf_get_current_task_btf():
	 * this path runs on kernels before 5.11, and without BTF (--btf). */
	if (!BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm))
		return STACK_NONE;
	w.buf = bpf_map_lookup_elem(&stack_scratch, &slot);
	if (!w.buf)
		return STACK_NONE;
	if (use_tables && !compat)
		w.proc = bpf_map_lookup_elem(&proc_unwind, &pid);
	if (!w.proc) {
		long bytes;

		st->unw_fp_only++;
		*walk = FG_WALK_FP;
		/* The helper zero-fills the buffer past the frames it wrote. */
		bytes = bpf_get_stack(ctx, w.buf->ips, sizeof(w.buf->ips), BPF_F_USER_STACK);
		if (bytes <= 0)
			return STACK_NONE;
		w.n = bytes / sizeof(__u64);
		if (compat)
			return keep_stack(w.buf, w.n * sizeof(__u64), lost);
		goto python;
	}
	if (!user_regs(&w, false))
		return STACK_NONE;
	bpf_loop(MAX_STACK_DEPTH, walk_step, &w, 0);
	walk_outcome(w.end, w.used_fp, st, walk);
python:
	w.n = add_python(w.buf, w.n, pid, st, &py);
	*walk |= py << 4;
	if (w.n < MAX_STACK_DEPTH)
		w.buf->ips[w.n] = 0;
	return keep_stack(w.buf, w.n * sizeof(__u64), lost);
}

#endif
