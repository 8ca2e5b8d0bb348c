/* Ruby VM stacks, read from the kernel side, as python.bpf.h reads
 * CPython's: a native walk of a Ruby thread shows rb_vm_exec and the VM's
 * own frames over and over; the methods it runs are its control frames.
 * When the current process is a known Ruby (`rb_procs`, filled by user
 * space with its version's offsets, src/runtimes/ruby/), find the thread's
 * execution context (libruby's thread-local ruby_current_ec, through the
 * thread's DTV; in 2.7 its rb_thread_t's, among the VM's threads), walk
 * its control frames from the current one to the bottom of the VM stack
 * and append one word per Ruby frame after FG_RB_MARKER (fgbpf.h says the
 * word's layout). User space names the
 * iseqs and method entries and puts the frames in place of the rb_vm_exec
 * frames they ran in. */
#ifndef FGBPF_RUBY_BPF_H
#define FGBPF_RUBY_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "targets.bpf.h"
#include "interp.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_rb_proc);
} rb_procs SEC(".maps");

/* Off with --no-ruby. */
const volatile bool ruby_frames = true;

/* The longest rb_control_frame_t read (56 or 64 bytes in 2.7 to 3.4).
 * Offsets into it, and into the first 32 bytes of the execution context,
 * are masked rather than bounds-checked: a branch per field read makes
 * the verifier follow each combination (user space's layouts keep every
 * offset inside what is read; src/runtimes/ruby/mod.rs tests it). */
#define RB_CFP_MAX 64
#define RB_CFP_WORDS_MASK (RB_CFP_MAX / 8 - 1)

/* What a step reads, per CPU (map memory: the BPF stack is short). */
struct rb_read {
	__u64 frame[RB_CFP_MAX / 8];
	__u64 env[3]; /* ep[-2] (method entry or cref), ep[-1], ep[0] (flags) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rb_read);
} rb_reads SEC(".maps");

/* The walk: pointers, so on the stack, where the verifier tracks them. */
struct rb_walk {
	struct fg_rb_proc *rb;
	struct stack_buf *buf;
	struct rb_read *r;
	__u64 cfp;
	__u64 end;   /* one past the bottom control frame */
	__u32 pid;
	__u32 n;
	__u32 first; /* index of the first Ruby word */
	__u32 end_how; /* enum fg_interp_walk once ended */
};

static long rb_step(__u32 i, void *ctx)
{
	struct rb_walk *w = ctx;
	struct fg_rb_proc *rb = w->rb;
	struct rb_read *r = w->r;
	__u64 cfp = w->cfp, iseq, pc, ep, flags, addr, word, with;
	__u32 n = w->n, size = rb->cfp_size, at;

	if (cfp >= w->end) {
		w->end_how = FG_INTERP_WHOLE;
		return 1;
	}
	if (size < 8 * 7 || size > RB_CFP_MAX ||
	    bpf_probe_read_user(r->frame, size & (RB_CFP_MAX * 2 - 1), (void *)cfp)) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	w->cfp = cfp + size;
	at = rb->cfp_ep / 8;
	ep = r->frame[at & RB_CFP_WORDS_MASK];
	if (!ep || bpf_probe_read_user(r->env, sizeof(r->env), (void *)(ep - 16))) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	flags = r->env[2];
	if ((flags & FG_RB_FRAME_MAGIC_MASK) == FG_RB_FRAME_MAGIC_CFUNC) {
		addr = r->env[0];
		word = ((addr >> 3) & ((1ULL << 44) - 1)) | FG_RB_CFUNC;
		with = 1;
	} else {
		at = rb->cfp_iseq / 8;
		iseq = r->frame[at & RB_CFP_WORDS_MASK];
		at = rb->cfp_pc / 8;
		pc = r->frame[at & RB_CFP_WORDS_MASK];
		/* C frames other than methods (blocks given from C, the
		 * bottom's dummy frames) have no Ruby code: not recorded, but
		 * where a VM call began all the same. */
		if ((flags & FG_RB_FRAME_FLAG_CFRAME) || !iseq || !pc) {
			if (flags & FG_RB_FRAME_FLAG_FINISH)
				interp_mark_entry(w->buf, w->n, w->first);
			return 0;
		}
		addr = iseq;
		word = ((iseq >> 3) & ((1ULL << 44) - 1)) |
		       (((pc >> 3) & ((1ULL << FG_RB_PC_BITS) - 1)) << 44);
		/* A method's frame holds its method entry at ep[-2], which
		 * says the method's class: told with the iseq. */
		with = (flags & FG_RB_FRAME_MAGIC_MASK) == FG_RB_FRAME_MAGIC_METHOD ? r->env[0] : 0;
	}
	if (flags & FG_RB_FRAME_FLAG_FINISH)
		word |= FG_INTERP_ENTRY;
	/* Bounded next to the store, as in py_step. */
	barrier_var(n);
	if (n >= MAX_STACK_DEPTH) {
		w->end_how = FG_INTERP_CUT;
		return 1;
	}
	w->buf->ips[n] = word;
	w->n = n + 1;
	/* with: 1 for a C method's entry, else the iseq's method entry or 0
	 * (src/runtimes/ruby/walker.rs). */
	interp_announce(w->pid, FG_PROC_RB_OBJECT, addr, with);
	return 0;
}

/* Most of a 2.7 VM's threads looked through for the current one's. */
#define RB_MAX_THREADS 128

/* Ruby 2.7: the execution context of the thread whose pthread_t is
 * `self`, into *ec (0: the thread is not one of the VM's, a native
 * thread). The global ruby_current_execution_context_ptr is the GVL
 * holder's, which a thread on the CPU most often is: taken when its
 * thread is this one; else the VM's living_threads are looked through.
 * Returns nonzero when memory could not be read. */
static __always_inline int rb_ec_27(struct fg_rb_proc *rb, __u64 self, __u64 *ec)
{
	__u64 th = 0, id = 0, vm = 0, head, node = 0;
	__u32 i;

	*ec = 0;
	if (!bpf_probe_read_user(ec, sizeof(*ec), (void *)rb->ec_at) && *ec &&
	    !bpf_probe_read_user(&th, sizeof(th), (void *)(*ec + rb->ec_thread_ptr)) && th &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(th + rb->th_thread_id)) && id == self)
		return 0;
	*ec = 0;
	if (bpf_probe_read_user(&vm, sizeof(vm), (void *)rb->vm_at) || !vm)
		return 1;
	head = vm + rb->vm_threads;
	if (bpf_probe_read_user(&node, sizeof(node), (void *)head))
		return 1;
	for (i = 0; i < RB_MAX_THREADS; i++) {
		if (!node || node == head)
			return 0;
		th = node - rb->th_node;
		if (bpf_probe_read_user(&id, sizeof(id), (void *)(th + rb->th_thread_id)))
			return 1;
		if (id == self)
			return bpf_probe_read_user(ec, sizeof(*ec), (void *)(th + rb->th_ec)) ? 1 : 0;
		if (bpf_probe_read_user(&node, sizeof(node), (void *)node))
			return 1;
	}
	return 0;
}

/* Appends the current thread's Ruby frames to the `n` native frames in
 * `buf` when its process is a known Ruby. Returns the new length and says
 * in *walk how the Ruby stack was read (enum fg_interp_walk, shared with
 * Python's). A global function: the verifier checks it once. */
__noinline __u32 add_ruby(struct stack_buf *buf, __u32 n, __u32 pid, struct fg_stats *st, __u32 *walk)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fg_rb_proc *rb;
	struct rb_walk walk_ = {}, *w = &walk_;
	__u64 fsbase, dtv = 0, modid = 0, block = 0, ec = 0, head[4] = {};
	__u32 zero = 0, at;

	if (!ruby_frames || !buf || !st || !walk)
		return n;
	rb = bpf_map_lookup_elem(&rb_procs, &pid);
	if (!rb)
		return n;
	w->r = bpf_map_lookup_elem(&rb_reads, &zero);
	if (!w->r)
		return n;
	fsbase = BPF_CORE_READ(task, thread.fsbase);
	/* 3.0 on: glibc's TCB, the DTV at fsbase + 8, 16-byte entries
	 * indexed by module id, each starting with the module's block. */
	if (!rb->modid_at) {
		if (rb_ec_27(rb, fsbase, &ec)) {
			st->rb_fault++;
			*walk = FG_INTERP_FAULT;
			return n;
		}
	} else if (bpf_probe_read_user(&dtv, sizeof(dtv), (void *)(fsbase + 8)) ||
	    bpf_probe_read_user(&modid, sizeof(modid), (void *)rb->modid_at) ||
	    !modid || modid > 1024 ||
	    bpf_probe_read_user(&block, sizeof(block), (void *)(dtv + modid * 16)) ||
	    !block ||
	    bpf_probe_read_user(&ec, sizeof(ec), (void *)(block + rb->tls_off))) {
		st->rb_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	if (!ec) {
		st->rb_no_thread++;
		*walk = FG_INTERP_NO_THREAD;
		return n;
	}
	if (bpf_probe_read_user(head, sizeof(head), (void *)ec)) {
		st->rb_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	if (n >= MAX_STACK_DEPTH - 1) {
		st->rb_cut++;
		*walk = FG_INTERP_CUT;
		return n;
	}
	w->rb = rb;
	w->buf = buf;
	w->pid = pid;
	at = rb->ec_cfp / 8;
	w->cfp = head[at & 3];
	at = rb->ec_vm_stack / 8;
	w->end = head[at & 3];
	at = rb->ec_stack_size / 8;
	/* The control frames grow down from the VM stack's top. */
	w->end += head[at & 3] * 8;
	if (!w->cfp || w->cfp >= w->end || w->end - w->cfp > (1ULL << 26)) {
		st->rb_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	/* Bounded again next to the store (the check above is lost). */
	barrier_var(n);
	if (n >= MAX_STACK_DEPTH - 1)
		return n;
	buf->ips[n] = FG_RB_MARKER;
	w->n = n + 1;
	w->first = w->n;
	bpf_loop(2 * MAX_STACK_DEPTH, rb_step, w, 0);
	switch (w->end_how) {
	case FG_INTERP_WHOLE:
		st->rb_whole++;
		break;
	case FG_INTERP_FAULT:
		st->rb_fault++;
		break;
	default:
		w->end_how = FG_INTERP_CUT;
		st->rb_cut++;
	}
	*walk = w->end_how;
	return w->n;
}

#endif
