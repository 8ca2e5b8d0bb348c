/* PHP stacks, read from the kernel side, as python.bpf.h and ruby.bpf.h
 * read theirs: a native walk of a PHP thread shows execute_ex; the
 * functions it runs are the execute data chain from executor_globals'
 * current_execute_data. When the current process is a known PHP
 * (`php_procs`, filled by user space with its version's offsets,
 * src/runtimes/php/), walk that chain and append one word per frame after
 * FG_PHP_MARKER (fgbpf.h says the word's layout): one read a frame. User
 * space names the functions and puts the frames in place of the
 * execute_ex frames they ran in. PHP's NTS builds (the CLI, php-fpm) keep
 * one interpreter per process: its one thread runs PHP. */
#ifndef FGBPF_PHP_BPF_H
#define FGBPF_PHP_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "interp.bpf.h"
#include "walk.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_php_proc);
} php_procs SEC(".maps");

/* Off with --no-php. */
const volatile bool php_frames = true;

/* The longest part of zend_execute_data read (to prev_execute_data). */
#define PHP_EX_MAX 64

struct php_read {
	__u64 ex[PHP_EX_MAX / 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct php_read);
} php_reads SEC(".maps");

struct php_walk {
	struct fg_php_proc *php;
	struct stack_buf *buf;
	struct php_read *r;
	__u64 ex;
	__u32 pid;
	__u32 n;
	__u32 end_how; /* enum fg_interp_walk once ended */
	__u32 pad;
};

/* A field of the execute data read: the offset masked, not checked, as
 * ruby.bpf.h's are (src/runtimes/php/mod.rs tests that every offset is
 * inside what is read). */
static __always_inline __u64 php_field(struct php_read *r, __u16 off)
{
	return r->ex[(off / 8) & (PHP_EX_MAX / 8 - 1)];
}

static long php_step(__u32 i, void *ctx)
{
	struct php_walk *w = ctx;
	struct fg_php_proc *php = w->php;
	struct php_read *r = w->r;
	__u64 ex = w->ex, func, opline, word;
	__u32 n = w->n, size = php->ex_size, info;

	if (!ex) {
		w->end_how = FG_INTERP_WHOLE;
		return 1;
	}
	if (size < 8 || size > PHP_EX_MAX ||
	    bpf_probe_read_user(r->ex, size & (PHP_EX_MAX * 2 - 1), (void *)ex)) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	w->ex = php_field(r, php->ex_prev);
	func = php_field(r, php->ex_func);
	/* Frames of no function (a call being set up) are not code. */
	if (!func)
		return 0;
	opline = php_field(r, php->ex_opline);
	info = (__u32)(php_field(r, php->ex_type_info & ~7) >> ((php->ex_type_info & 7) * 8));
	word = ((func >> 3) & ((1ULL << 44) - 1)) | (((opline >> 3) & ((1ULL << 18) - 1)) << 44);
	if (info & FG_PHP_CALL_TOP)
		word |= FG_INTERP_ENTRY;
	if (n >= MAX_STACK_DEPTH) {
		w->end_how = FG_INTERP_CUT;
		return 1;
	}
	put_word(w->buf, n, word);
	w->n = n + 1;
	interp_announce(w->pid, FG_PROC_PHP_FUNCTION, func, 0);
	return 0;
}

/* Appends the current thread's PHP frames to the `n` native frames in
 * `buf` when its process is a known PHP. Returns the new length and says
 * in *walk how the PHP stack was read (enum fg_interp_walk). A global
 * function: the verifier checks it once. */
__noinline __u32 add_php(struct stack_buf *buf, __u32 n, __u32 pid, struct fg_stats *st, __u32 *walk)
{
	struct fg_php_proc *php;
	struct php_walk walk_ = {}, *w = &walk_;
	__u64 ex = 0;
	__u32 zero = 0;

	if (!php_frames || !buf || !st || !walk)
		return n;
	php = bpf_map_lookup_elem(&php_procs, &pid);
	if (!php)
		return n;
	w->r = bpf_map_lookup_elem(&php_reads, &zero);
	if (!w->r)
		return n;
	if (bpf_probe_read_user(&ex, sizeof(ex), (void *)php->current)) {
		st->php_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	if (!ex) {
		st->php_no_thread++;
		*walk = FG_INTERP_NO_THREAD;
		return n;
	}
	barrier_var(n);
	if (n >= MAX_STACK_DEPTH - 1) {
		st->php_cut++;
		*walk = FG_INTERP_CUT;
		return n;
	}
	buf->ips[n] = FG_PHP_MARKER;
	w->php = php;
	w->buf = buf;
	w->pid = pid;
	w->ex = ex;
	w->n = n + 1;
	bpf_loop(2 * MAX_STACK_DEPTH, php_step, w, 0);
	switch (w->end_how) {
	case FG_INTERP_WHOLE:
		st->php_whole++;
		break;
	case FG_INTERP_FAULT:
		st->php_fault++;
		break;
	default:
		w->end_how = FG_INTERP_CUT;
		st->php_cut++;
	}
	*walk = w->end_how;
	return w->n;
}

#endif
