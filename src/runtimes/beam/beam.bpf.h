/* The BEAM's Erlang stacks, read in the kernel. Since OTP 24 the JIT runs
 * an Erlang process's code on the process's own stack (rsp is its stack
 * pointer while Erlang code runs; while the JIT calls C code on the
 * scheduler's stack it is kept in rbp or in the process, see
 * beam_frames), and
 * its frames hold the return addresses of its callers (continuation
 * pointers: 4-byte aligned, into the JIT's code) among Erlang terms,
 * which are never so aligned and tagged 00 on a stack. Every Erlang
 * process's stack starts with the return address to `normal_exit`. So
 * when the walk (unwind.bpf.h) reaches the JIT's code in a process user
 * space found to run the BEAM (`beam_procs`: the span of its JIT code
 * and `normal_exit`, read from the JIT's own code map, see
 * src/runtimes/beam/), the stack above is read word by word, each
 * return address into the JIT's code a frame, to `normal_exit`: the
 * walk ends there, and the stack is given its Erlang process (r13,
 * FG_BEAM_MARKER). A stack whose end is not found within BEAM_WORDS
 * words (not an Erlang stack, or deeper than that) is not taken: its
 * words are dropped, counted, and the walk goes on as before. */
#ifndef FGBPF_BEAM_BPF_H
#define FGBPF_BEAM_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "walk.bpf.h"

/* Words of stack read for an Erlang stack's end (4 KiB): the frames of a
 * few dozen calls. */
#define BEAM_WORDS 512

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_beam_proc);
} beam_procs SEC(".maps");

/* Off with --no-beam. */
const volatile bool beam_frames_on = true;

/* Set by user space once `beam_procs` holds a process. */
volatile __u32 beam_tracked = 0;

/* A read of an Erlang stack in progress (beam_frames), a word a step. */
struct beam_scan {
	struct walk *w;
	struct stack_buf *buf;
	__u64 at, lo, hi, end;
	__u32 n, found;
};

/* One word of the Erlang stack at s->at: a return address into the JIT's
 * code is the next frame; `normal_exit` the end. bpf_loop's callback:
 * 1 to stop. */
static long beam_word(__u32 i, void *ctx)
{
	struct beam_scan *s = ctx;
	struct walk *w = s->w;
	__u64 off, word;

	if (!w || !s->buf)
		return 1;
	/* Opaque to the compiler, which would otherwise fold the address
	 * into the window's pointer, unbounded. */
	off = s->at - w->win_base;
	asm volatile("" : "+r"(off));
	if (off > FG_WINDOW - 8 || off + 8 > w->win_len) {
		if (move_window(s->at))
			return 1;
		off = s->at - w->win_base;
		asm volatile("" : "+r"(off));
		if (off > FG_WINDOW - 8 || off + 8 > w->win_len)
			return 1;
	}
	word = *(__u64 *)(w->win + off);
	s->at += 8;
	if ((word & 3) || word < s->lo || word >= s->hi)
		return 0;
	if (word == s->end) {
		s->found = 1;
		return 1;
	}
	put_word(s->buf, s->n, word);
	s->n++;
	return s->n >= MAX_STACK_DEPTH;
}

/* Frame w->n - 1 of the walk is in the JIT's code of a BEAM process:
 * reads the Erlang process's stack for its callers, recorded after it. 1
 * when it did (the walk is over), 0 to walk on as before. A global
 * function: the verifier checks it once. */
__noinline int beam_frames(struct walk *w, struct stack_buf *buf, __u32 pid)
{
	struct beam_scan s = {};
	struct fg_beam_proc *bp;
	struct fg_stats *st;

	if (!w || !buf || !beam_frames_on || !beam_tracked)
		return 0;
	bp = bpf_map_lookup_elem(&beam_procs, &pid);
	if (!bp || w->ip < bp->lo || w->ip >= bp->hi)
		return 0;
	st = get_stats();
	if (!st)
		return 0;
	/* The Erlang stack: rsp in the leaf. In JIT code that called C code
	 * (on the scheduler's stack) it is in rbp only for the calls that
	 * do not save it in the process (c_p->stop: BIFs, the GC, trace
	 * breakpoints), and there rbp is stale, maybe another process's
	 * stack: measured to give chains of two processes. Such a frame is
	 * not read but counted; with the node's frame pointers the walk by
	 * rbp goes on. */
	if (w->n != 1) {
		if (!bp->frame_pointers)
			st->beam_in_c++;
		return 0;
	}
	s.at = w->sp;
	s.w = w;
	s.buf = buf;
	s.lo = bp->lo;
	s.hi = bp->hi;
	s.end = bp->normal_exit;
	s.n = w->n;
	bpf_loop(BEAM_WORDS, beam_word, &s, 0);
	if (!s.found) {
		st->beam_cut++;
		return 0;
	}
	/* The Erlang process whose stack this is: the JIT keeps the running
	 * process (c_p) in r13 while Erlang code runs, and a process's
	 * first word is its id, an internal pid (the immediate tag 0x3). */
	if (s.n + 2 <= MAX_STACK_DEPTH) {
		/* Read into the scan's cursor, done with: no stack to spare. */
		if (!bpf_probe_read_user(&s.at, sizeof(s.at), (void *)w->r13) && (s.at & 0xf) == 0x3) {
			put_word(buf, s.n, FG_BEAM_MARKER);
			put_word(buf, s.n + 1, s.at);
			s.n += 2;
			st->beam_pid++;
		} else {
			st->beam_no_pid++;
		}
	}
	w->n = s.n < MAX_STACK_DEPTH ? s.n : MAX_STACK_DEPTH;
	w->end = WALK_DONE;
	st->beam_walked++;
	return 1;
}

#endif
