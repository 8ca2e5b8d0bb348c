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
 * words are dropped, counted, and the walk goes on as before. OTP 23's
 * interpreter keeps the same kind of stack in the process's heap, found
 * from its registers at the walk's first frame: beam_interp. */
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
	__u64 at, lo, hi, end, tag;
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
	/* An interpreter's continuation pointers (tag) point at words. */
	if ((word & (s->tag ? 7 : 3)) || word < s->lo || word >= s->hi)
		return 0;
	if (word == s->end) {
		s->found = 1;
		return 1;
	}
	put_word(s->buf, s->n, word | s->tag);
	s->n++;
	return s->n >= MAX_STACK_DEPTH;
}

/* The walk's BEAM process, when its pc is in the span user space gave
 * (`interp`: the interpreter's loop, else the JIT's code); NULL else. */
static __always_inline struct fg_beam_proc *beam_at(struct walk *w, __u32 pid, __u32 interp)
{
	struct fg_beam_proc *bp;

	if (!beam_frames_on || !beam_tracked)
		return NULL;
	bp = bpf_map_lookup_elem(&beam_procs, &pid);
	if (!bp || bp->interp != interp || w->ip < bp->lo || w->ip >= bp->hi)
		return NULL;
	return bp;
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

	if (!w || !buf)
		return 0;
	bp = beam_at(w, pid, 0);
	if (!bp)
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

/* The X registers' array, which the interpreter keeps in r15: 1024
 * words (MAX_REG). */
#define BEAM_X_REGS (1024 * 8)

/* Whether a register may hold the interpreter's instruction pointer: a
 * pointer to a word of loaded code, in memory the emulator allocated
 * (above 4 GiB), which no term is (tagged in their low bits); not into
 * the process's heap, nor into the X registers (r15), where the
 * interpreter's instructions also point rbx. */
static __always_inline bool beam_code_like(__u64 x, __u64 heap, __u64 hend, __u64 x_regs)
{
	return !(x & 7) && x >= (1ULL << 32) && x < (1ULL << 47) && (x < heap || x >= hend) && (x < x_regs || x >= x_regs + BEAM_X_REGS);
}

/* The leaf of the walk is in the loop of a BEAM without the JIT (OTP 23),
 * which runs Erlang code by threaded code: its Erlang process (c_p) in
 * r12, the process's stack pointer (E) in r13, the instruction pointer
 * (I) in rbx, or in rbp in the instructions that use rbx for an operand
 * or a pointer to an X register (Debian 11's beam.smp, as GCC allocated
 * process_main's registers: measured).
 * Checked before use: the process's first word must be a pid, E must lie
 * in its heap, whose last word must be `normal_exit`. Then the leaf
 * becomes I (process_main stays when neither register looks like code),
 * and the words of the stack above E that are continuation pointers
 * (8-byte aligned: every other word of a process's stack is a tagged
 * term) its callers, to `normal_exit`, each as FG_BEAM_WORD, which user
 * space names by the function of the code it points into. 1 when it did
 * (the walk is over), 0 to walk on as before. */
__noinline int beam_interp(struct walk *w, struct stack_buf *buf, __u32 pid)
{
	/* Its fields also hold the reads of the process before the scan:
	 * no stack to spare (do_sample's chain of calls). */
	struct beam_scan s = {};
	struct fg_beam_proc *bp;
	struct fg_stats *st;

	if (!w || !buf)
		return 0;
	bp = beam_at(w, pid, 1);
	if (!bp)
		return 0;
	st = get_stats();
	if (!st)
		return 0;
	/* c_p (r12): its id (a pid: the immediate tag 0x3), its heap's
	 * start (s.lo) and end (s.hi), whose last word (s.end) must be
	 * where the process returns when it ends; E (r13) inside. */
	if (bpf_probe_read_user(&s.at, sizeof(s.at), (void *)w->r12) || (s.at & 0xf) != 0x3 ||
	    bpf_probe_read_user(&s.lo, sizeof(s.lo), (void *)(w->r12 + bp->heap_at)) ||
	    bpf_probe_read_user(&s.hi, sizeof(s.hi), (void *)(w->r12 + bp->hend_at)) ||
	    (w->r13 & 7) || w->r13 < s.lo || w->r13 >= s.hi ||
	    bpf_probe_read_user(&s.end, sizeof(s.end), (void *)(s.hi - 8)) || s.end != bp->normal_exit) {
		/* Between processes (the scheduler's part of the loop), or a
		 * register used for something else there. */
		st->beam_no_process++;
		return 0;
	}
	/* The leaf, in the place of process_main's pc (put back if the
	 * scan fails). */
	if (beam_code_like(w->rbx, s.lo, s.hi, w->r15))
		put_word(buf, 0, w->rbx | FG_BEAM_WORD);
	else if (beam_code_like(w->bp, s.lo, s.hi, w->r15))
		put_word(buf, 0, w->bp | FG_BEAM_WORD);
	s.at = w->r13;
	s.w = w;
	s.buf = buf;
	s.lo = 1ULL << 32;
	s.hi = 1ULL << 47;
	s.tag = FG_BEAM_WORD;
	s.n = w->n;
	/* The stack is in the process's heap, maybe below the thread's
	 * stack pointer, which the window is never moved below; the floor
	 * is put back after (at the walk's first frame, its sp). */
	w->floor = w->r13;
	bpf_loop(BEAM_WORDS, beam_word, &s, 0);
	w->floor = w->sp;
	if (!s.found) {
		put_word(buf, 0, w->ip);
		st->beam_cut++;
		return 0;
	}
	/* The process's id, read again into the scan's cursor, done with. */
	if (s.n + 2 <= MAX_STACK_DEPTH && !bpf_probe_read_user(&s.at, sizeof(s.at), (void *)w->r12)) {
		put_word(buf, s.n, FG_BEAM_MARKER);
		put_word(buf, s.n + 1, s.at);
		s.n += 2;
		st->beam_pid++;
	}
	w->n = s.n < MAX_STACK_DEPTH ? s.n : MAX_STACK_DEPTH;
	w->end = WALK_DONE;
	st->beam_walked++;
	return 1;
}

#endif
