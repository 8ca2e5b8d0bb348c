/* Perl stacks, read from the kernel side, as php.bpf.h reads PHP's: a
 * native walk of a Perl thread shows Perl_runops_standard and the pp_*
 * function it runs; the subs it runs are the interpreter's context stack.
 * When the current process is a known Perl (`perl_procs`, filled by user
 * space with its version's offsets, src/runtimes/perl/), read
 * PL_curinterp's current stack info and each context on it, innermost
 * first, then the stack infos below it (si_prev: a runops loop called
 * from C, a sort block's or a tie's), and append one word per sub frame
 * (CXt_SUB, CXt_FORMAT) after FG_PERL_MARKER, and one for the main
 * program at the bottom: the COP the frame runs (the interpreter's
 * PL_curcop for the innermost, the caller's COP its callee saved,
 * blk_oldcop, for the others). One read a context. User space names the
 * subs and lines and puts the frames in place of the runops frames they
 * ran in.
 *
 * ithreads: each Perl thread runs its own interpreter, which PL_curinterp
 * is not: a thread's is its value of PL_thr_key, found in glibc's
 * thread-specific data from its fsbase, where user space has measured
 * that libc's layout (src/runtimes/perl/tsd.rs). Where it has not, only
 * the main thread (tid == pid), which runs PL_curinterp's, is walked, and
 * the others are counted as having no interpreter (FG_INTERP_NO_THREAD)
 * rather than given the main thread's stack. The main program's frame is
 * the main interpreter's only: another's stack begins at the sub its
 * thread was started with. */
#ifndef FGBPF_PERL_BPF_H
#define FGBPF_PERL_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "interp.bpf.h"
#include "walk.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_perl_proc);
} perl_procs SEC(".maps");

/* Off with --no-perl. */
const volatile bool perl_frames = true;

/* The most of a PERL_CONTEXT read (user space says how much: to its last
 * field read, blk_sub.cv), and of a stack info (to si_type). */
#define PERL_CX_MAX 128
#define PERL_SI_MAX 64
/* Contexts read at most per stack: subs, and the blocks, loops and evals
 * between them. */
#define PERL_MAX_CONTEXTS 512

struct perl_read {
	__u64 cx[PERL_CX_MAX / 8];
	__u64 si[PERL_SI_MAX / 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct perl_read);
} perl_reads SEC(".maps");

struct perl_walk {
	struct fg_perl_proc *perl;
	struct stack_buf *buf;
	struct perl_read *r;
	__u64 si;        /* the stack info read */
	__u64 cxstack;   /* its contexts */
	__u64 cop;       /* the COP of the next sub frame met */
	__u64 main_cv;
	__s32 cxix;      /* the next context read; -1: the stack info is done */
	__u32 si_type;
	__u32 pid;
	__u32 n;
	__u32 si_first;  /* the stack info's first word */
	__u32 end_how;   /* enum fg_interp_walk once ended */
	__u64 si_prev;
};

/* A field of what was read: the offset masked, not checked, as
 * php.bpf.h's are (src/runtimes/perl/mod.rs tests that every offset is
 * inside what is read). */
static __always_inline __u64 perl_word(__u64 *from, __u16 off, __u32 words)
{
	return from[(off / 8) & (words - 1)];
}

static __always_inline bool perl_put(struct perl_walk *w, __u64 word)
{
	__u32 n = w->n;

	if (n >= MAX_STACK_DEPTH) {
		w->end_how = FG_INTERP_CUT;
		return false;
	}
	put_word(w->buf, n, word);
	w->n = n + 1;
	return true;
}

/* One sub frame: its COP, announced with its CV (addr2), or its CV alone. */
static __always_inline bool perl_frame(struct perl_walk *w, __u64 cv, __u64 tag)
{
	__u64 cop = w->cop;

	if (cop) {
		if (!perl_put(w, (cop >> 3) & ((1ULL << 44) - 1)))
			return false;
		interp_announce(w->pid, FG_PROC_PERL_OBJECT, cop, cv | tag);
		return true;
	}
	if (!perl_put(w, ((cv >> 3) & ((1ULL << 44) - 1)) | FG_PERL_CV))
		return false;
	interp_announce(w->pid, FG_PROC_PERL_OBJECT, cv, 2 | tag);
	return true;
}

/* Reads the stack info at w->si: its contexts, how many, its type and the
 * one below. */
static __always_inline bool perl_load_si(struct perl_walk *w)
{
	struct fg_perl_proc *perl = w->perl;
	struct perl_read *r = w->r;

	if (bpf_probe_read_user(r->si, sizeof(r->si), (void *)w->si))
		return false;
	w->cxstack = perl_word(r->si, perl->si_cxstack, PERL_SI_MAX / 8);
	w->si_prev = perl_word(r->si, perl->si_prev, PERL_SI_MAX / 8);
	w->cxix = (__s32)(perl_word(r->si, perl->si_cxix & ~7, PERL_SI_MAX / 8) >> ((perl->si_cxix & 7) * 8));
	w->si_type = (__u32)(perl_word(r->si, perl->si_type & ~7, PERL_SI_MAX / 8) >> ((perl->si_type & 7) * 8));
	w->si_first = w->n;
	return true;
}

/* A stack info read whole: the main program's frame at the bottom of the
 * main one, the entry bit on its last frame, and on to the one below. */
static __always_inline long perl_si_done(struct perl_walk *w)
{
	struct fg_perl_proc *perl = w->perl;

	if (w->si_type == perl->perlsi_main && !w->si_prev && w->main_cv) {
		if (!perl_frame(w, w->main_cv, 1))
			return 1;
	}
	interp_mark_entry(w->buf, w->n, w->si_first);
	w->si = w->si_prev;
	if (!w->si) {
		w->end_how = FG_INTERP_WHOLE;
		return 1;
	}
	if (!perl_load_si(w)) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	return 0;
}

/* One context, or the end of a stack info. The walk's state comes in read
 * from the process (add_perl reads the first stack info before the loop):
 * verifiers before Linux 6.7 check a bpf_loop callback once, from the
 * state the loop starts with, and would drop as dead a branch that state
 * rules out (a constant there: Debian 12's 6.1 dropped the reading of
 * contexts so). */
static long perl_step(__u32 i, void *ctx)
{
	struct perl_walk *w = ctx;
	struct fg_perl_proc *perl = w->perl;
	struct perl_read *r = w->r;
	__u32 size = perl->cx_size, len = perl->cx_read, type;
	__u64 at;

	if (w->cxix < 0)
		return perl_si_done(w);
	if (!w->cxstack || size < 8 || size > 1024 || len < 8 || len > PERL_CX_MAX) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	at = w->cxstack + (__u64)(__u32)w->cxix * size;
	w->cxix--;
	if (bpf_probe_read_user(r->cx, len & (PERL_CX_MAX * 2 - 1), (void *)at)) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	type = (__u32)(perl_word(r->cx, perl->cx_type & ~7, PERL_CX_MAX / 8) >> ((perl->cx_type & 7) * 8)) & 0xf;
	if (type == perl->cxt_sub || type == perl->cxt_format) {
		if (!perl_frame(w, perl_word(r->cx, perl->cx_sub_cv, PERL_CX_MAX / 8), 0))
			return 1;
		w->cop = perl_word(r->cx, perl->cx_oldcop, PERL_CX_MAX / 8);
	} else if (type == perl->cxt_eval) {
		/* The statement that began the eval: a string eval's code is
		 * its own, not the sub's it ran in. */
		w->cop = perl_word(r->cx, perl->cx_oldcop, PERL_CX_MAX / 8);
	}
	return 0;
}

/* Appends the current thread's Perl frames to the `n` native frames in
 * `buf` when its process is a known Perl. Returns the new length and says
 * in *walk how the Perl stack was read (enum fg_interp_walk). A global
 * function: the verifier checks it once. */
__noinline __u32 add_perl(struct stack_buf *buf, __u32 n, __u32 pid, struct fg_stats *st, __u32 *walk)
{
	struct fg_perl_proc *perl;
	struct perl_walk walk_ = {}, *w = &walk_;
	__u64 interp = 0, main_interp = 0, si = 0, cop = 0, main_cv = 0, fsbase;
	__u32 zero = 0, key = 0, tid = (__u32)bpf_get_current_pid_tgid();

	if (!perl_frames || !buf || !st || !walk)
		return n;
	perl = bpf_map_lookup_elem(&perl_procs, &pid);
	if (!perl)
		return n;
	w->r = bpf_map_lookup_elem(&perl_reads, &zero);
	if (!w->r)
		return n;
	if (bpf_probe_read_user(&main_interp, sizeof(main_interp), (void *)perl->curinterp)) {
		st->perl_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	if (perl->thr_key_at && perl->tsd_data) {
		/* The thread's own: pthread_getspecific(PL_thr_key). */
		fsbase = BPF_CORE_READ(bpf_get_current_task_btf(), thread.fsbase);
		if (!fsbase || bpf_probe_read_user(&key, sizeof(key), (void *)perl->thr_key_at) || key >= 32 ||
		    bpf_probe_read_user(&interp, sizeof(interp), (void *)(fsbase + perl->tsd_data + 16 * (__u64)key)))
			interp = 0;
	} else if (tid == pid) {
		interp = main_interp;
	}
	/* No interpreter, or another thread's that is not read. */
	if (!interp || bpf_probe_read_user(&si, sizeof(si), (void *)(interp + perl->i_curstackinfo)) || !si) {
		st->perl_no_thread++;
		*walk = FG_INTERP_NO_THREAD;
		return n;
	}
	if (bpf_probe_read_user(&cop, sizeof(cop), (void *)(interp + perl->i_curcop)) ||
	    (interp == main_interp &&
	     bpf_probe_read_user(&main_cv, sizeof(main_cv), (void *)(interp + perl->i_main_cv)))) {
		st->perl_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	barrier_var(n);
	if (n >= MAX_STACK_DEPTH - 1) {
		st->perl_cut++;
		*walk = FG_INTERP_CUT;
		return n;
	}
	buf->ips[n] = FG_PERL_MARKER;
	w->perl = perl;
	w->buf = buf;
	w->pid = pid;
	w->si = si;
	w->cop = cop;
	w->main_cv = main_cv;
	w->n = n + 1;
	if (!perl_load_si(w)) {
		st->perl_fault++;
		*walk = FG_INTERP_FAULT;
		return w->n;
	}
	bpf_loop(PERL_MAX_CONTEXTS, perl_step, w, 0);
	switch (w->end_how) {
	case FG_INTERP_WHOLE:
		st->perl_whole++;
		break;
	case FG_INTERP_FAULT:
		st->perl_fault++;
		break;
	default:
		w->end_how = FG_INTERP_CUT;
		st->perl_cut++;
	}
	*walk = w->end_how;
	return w->n;
}

#endif
