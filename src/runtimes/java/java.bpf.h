/* HotSpot's Java frames, walked in the kernel. Compiled Java code has no
 * frame pointer and no .eh_frame, and lives in anonymous memory no table
 * covers: when the walk (unwind.bpf.h) meets code outside every mapping of
 * a process user space found to be a JVM (`java_procs`, read from the
 * JVM's own vmStructs by src/runtimes/java/), the JVM's own structures say
 * what the frame is:
 *
 * - the Interpreter's code: an interpreted frame, which keeps rbp as its
 *   frame pointer, the Method* at rbp-24 and the bytecode pointer at rbp-64
 *   (in r13 for the innermost frame);
 * - else the code cache's segment map finds the code blob holding the pc
 *   (a byte per segment: 0 at a block's start, n to go back n segments); an
 *   nmethod's frame is `frame_size` words with the return address on top
 *   and the caller's rbp below it; the innermost frame may be in its
 *   prologue or epilogue, read from the code's fixed instruction forms;
 * - the call stub, where Java was entered from native code, is unwound by
 *   rbp, and the walk goes on in libjvm with tables.
 *
 * Each frame is written in place of its pc as a tagged word (fgbpf.h,
 * FG_RT_TAG) that names the nmethod (with its compile id), Method* or stub,
 * and that object is announced once, so that user space reads it while it
 * lives (src/runtimes/java/). A walk that meets something it cannot follow
 * ends there, counted (fg_stats.java_*). */
#ifndef FGBPF_JAVA_BPF_H
#define FGBPF_JAVA_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "targets.bpf.h"
#include "walk.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_java_proc);
} java_procs SEC(".maps");

/* Objects announced to user space, per process: the value is the compile
 * id + 1 an nmethod was announced with (for a Method*, the second it was
 * seen in + 1; 1 for stubs), so that a reused address is announced
 * again. */
struct java_object {
	__u32 pid;
	__u32 pad;
	__u64 addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct java_object);
	__type(value, __u32);
} java_seen SEC(".maps");

/* Off with --no-java. */
const volatile bool java_frames = true;

#define JAVA_MAX_HOPS 16
#define JAVA_MAX_INSNS 10

enum java_step_result {
	JAVA_STEPPED = 0, /* frame written, registers moved to its caller */
	JAVA_OVER = 1,    /* the walk ends here (w->end says why) */
	JAVA_NOT = 2,     /* not Java code: the native step applies */
};

static __always_inline void java_announce(__u32 pid, __u32 kind, __u64 addr, __u32 id)
{
	struct java_object k = { .pid = pid, .addr = addr };
	__u32 *seen = bpf_map_lookup_elem(&java_seen, &k), tag = id + 1;

	if (seen && *seen == tag)
		return;
	if (seen)
		*seen = tag;
	else if (bpf_map_update_elem(&java_seen, &k, &tag, BPF_ANY))
		return;
	announce_object(pid, kind, addr, id);
}

/* A field of the blob's head read into w->blob, at an offset the JVM's
 * layout gave (0 outside the head). */
static __always_inline __u64 head_u64(struct walk *w, __u32 off)
{
	if (off > FG_JAVA_HEAD - 8)
		return 0;
	return *(__u64 *)(w->blob + off);
}

static __always_inline __u32 head_u32(struct walk *w, __u32 off)
{
	if (off > FG_JAVA_HEAD - 4)
		return 0;
	return *(__u32 *)(w->blob + off);
}

static __always_inline __u16 head_u16(struct walk *w, __u32 off)
{
	if (off > FG_JAVA_HEAD - 2)
		return 0;
	return *(__u16 *)(w->blob + off);
}

/* The CodeBlob holding pc: walks the segment map of the heap holding it
 * back to its block's start. 0 when none (free or past the heaps). */
static __always_inline __u64 java_blob(struct fg_java_proc *jp, __u64 pc, __u64 *block)
{
	__u64 lo = 0, segmap = 0, idx;
	__u32 nheaps = jp->nheaps;

	for (int h = 0; h < FG_JAVA_MAX_HEAPS; h++) {
		if (h >= nheaps)
			break;
		if (pc >= jp->heap_lo[h] && pc < jp->heap_hi[h]) {
			lo = jp->heap_lo[h];
			segmap = jp->segmap[h];
			break;
		}
	}
	if (!segmap)
		return 0;
	idx = (pc - lo) >> (jp->log2_seg & 31);
	for (int i = 0; i < JAVA_MAX_HOPS; i++) {
		__u8 hop = 0xff;

		if (bpf_probe_read_user(&hop, 1, (void *)(segmap + idx)) || hop == 0xff)
			return 0;
		if (hop == 0) {
			*block = lo + (idx << (jp->log2_seg & 31));
			return *block + jp->heap_block_size;
		}
		if (hop > idx)
			return 0;
		idx -= hop;
	}
	return 0;
}

/* A code address field of the blob's head: a pointer, or (JDK 23+) an
 * int offset from the blob; 0 when absent. */
static __always_inline __u64 java_code_field(struct walk *w, struct fg_java_proc *jp, __u64 blob, __u32 off,
					     bool narrow)
{
	if (off == FG_JAVA_NONE_OFF)
		return 0;
	if (!(jp->flags & FG_JAVA_CODE_OFFSETS))
		return head_u64(w, off);
	return blob + (narrow ? head_u16(w, off) : head_u32(w, off));
}

/* One instruction of a prologue (bpf_loop's body, verified once): the
 * decoding's state is in w (java_*), which the verifier does not track. */
static long java_prologue_step(__u32 i, void *ctx)
{
	struct walk *w = *(struct walk **)ctx;
	__u32 at = w->java_at, n;
	__u8 *c;

	if (at >= w->java_stop) {
		w->java_done = at == w->java_stop ? 1 : 2;
		return 1;
	}
	if (at > FG_JAVA_CODE - 16) {
		w->java_done = 2;
		return 1;
	}
	c = w->code + at;
	if (c[0] == 0x89 && c[1] == 0x84 && c[2] == 0x24) {
		at += 7; /* mov [rsp-bang],eax: the stack bang */
	} else if (c[0] == 0x55) {
		w->java_pushed += 8; /* push rbp */
		w->java_rbp_at = 0;
		at += 1;
	} else if (c[0] == 0x48 && (c[1] == 0x83 || c[1] == 0x81) && c[2] == 0xec) {
		/* sub rsp,imm8 / imm32 */
		n = c[1] == 0x83 ? c[3] : *(__u32 *)(c + 3);
		if (n > 0x100000) {
			w->java_done = 2;
			return 1;
		}
		w->java_pushed += n;
		if (w->java_rbp_at >= 0)
			w->java_rbp_at += n;
		at += c[1] == 0x83 ? 4 : 7;
	} else if (c[0] == 0x48 && c[1] == 0x89 && c[2] == 0x6c && c[3] == 0x24) {
		w->java_rbp_at = c[4]; /* mov [rsp+imm8],rbp */
		at += 5;
	} else if (c[0] == 0x90) {
		at += 1; /* nops, 1 to 9 bytes */
	} else if (c[0] == 0x66 && c[1] == 0x90) {
		at += 2;
	} else if (c[0] == 0x0f && c[1] == 0x1f) {
		at += c[2] == 0x40 ? 4 : c[2] == 0x44 ? 5 : c[2] == 0x80 ? 7 : c[2] == 0x84 ? 8 : 0xff;
	} else if (c[0] == 0x66 && c[1] == 0x0f && c[2] == 0x1f) {
		at += c[3] == 0x44 ? 6 : c[3] == 0x84 ? 9 : 0xff;
	} else {
		/* The frame is built: what follows (the nmethod entry barrier)
		 * pushes nothing. */
		w->java_done = w->java_pushed > 0 ? 1 : 2;
		return 1;
	}
	w->java_at = at;
	return 0;
}

/* The innermost frame of an nmethod in its prologue: decodes the fixed
 * instructions HotSpot emits from the entry at or below pc up to pc,
 * adding what they pushed. Returns the bytes the frame holds above sp
 * below the return address (the return address at sp + that), -1 when an
 * instruction it does not know comes first. w->java_rbp_at: where rbp
 * was saved (-1: not yet). */
static __always_inline long java_prologue(struct walk *w, __u64 entry, __u64 pc)
{
	struct walk *ctx = w;

	w->java_rbp_at = -1;
	if (pc < entry || pc - entry >= FG_JAVA_CODE - 16)
		return -1;
	if (bpf_probe_read_user(w->code, FG_JAVA_CODE, (void *)entry))
		return -1;
	w->java_at = 0;
	w->java_pushed = 0;
	w->java_stop = pc - entry;
	w->java_done = 0;
	bpf_loop(JAVA_MAX_INSNS, java_prologue_step, &ctx, 0);
	return w->java_done == 1 ? (long)w->java_pushed : -1;
}

/* The innermost frame of an nmethod at or after its epilogue's `pop rbp`
 * (the code at [pc - 16, pc + 16) in w->code): 1 when rbp is on top of the
 * stack with the return address above it, 2 when only the return address
 * is left, 0 when pc is not in an epilogue. */
static __always_inline int java_epilogue(struct walk *w, __u64 pc)
{
	__u8 *c = w->code + 16; /* c[0] is the byte at pc */

	if (bpf_probe_read_user(w->code, 32, (void *)(pc - 16)))
		return 0;
	/* add rsp,N; pop rbp: at the pop */
	if (c[0] == 0x5d && ((c[-4] == 0x48 && c[-3] == 0x83 && c[-2] == 0xc4) ||
			     (c[-7] == 0x48 && c[-6] == 0x81 && c[-5] == 0xc4)))
		return 1;
	/* after the pop: at the ret, or at the safepoint poll before it
	 * (cmp rsp,[r15+d32]; ja: JDK 17+; mov r10,[r15+d32]; test [r10],eax:
	 * JDK 11) */
	if (c[-1] == 0x5d && (c[0] == 0xc3 || (c[0] == 0x49 && c[1] == 0x3b && c[2] == 0xa7) ||
			      (c[0] == 0x4d && c[1] == 0x8b && c[2] == 0x97)))
		return 2;
	if (c[-8] == 0x5d && c[-7] == 0x49 && c[-6] == 0x3b && c[-5] == 0xa7 && c[0] == 0x0f && c[1] == 0x87)
		return 2;
	if (c[-14] == 0x5d && c[-13] == 0x49 && c[-12] == 0x3b && c[-7] == 0x0f && c[-6] == 0x87 &&
	    c[0] == 0xc3)
		return 2;
	if (c[-8] == 0x5d && c[-7] == 0x4d && c[-6] == 0x8b && c[0] == 0x41 && c[1] == 0x85)
		return 2;
	if (c[-11] == 0x5d && c[-10] == 0x4d && c[-9] == 0x8b && c[-4] == 0x41 && c[-3] == 0x85 && c[0] == 0xc3)
		return 2;
	return 0;
}

/* Moves the walk from the frame whose return address is at ra_at (with
 * the caller's rbp at rbp_at, or unchanged when rbp_at is 0) to its
 * caller. False when a read failed. */
static __always_inline bool java_pop(struct walk *w, __u64 ra_at, __u64 rbp_at)
{
	__u64 ra, bp;

	if (stack_read(w, ra_at, &ra, false))
		return false;
	if (rbp_at) {
		if (stack_read(w, rbp_at, &bp, false))
			return false;
		w->bp = bp;
	}
	w->sp = ra_at + 8;
	w->ip = ra;
	return true;
}

/* One Java frame: frame n of the walk (already recorded as its pc, which
 * this replaces with its word). See the file's head. A global function:
 * the verifier checks it once. */
__noinline long java_step(struct walk *w, struct stack_buf *buf, __u32 pid)
{
	struct fg_java_proc *jp;
	struct fg_stats *st;
	__u64 pc, blob, block = 0, word, code_begin;
	__u32 n, frame_size, id;
	bool nmethod;

	if (!w || !buf || !java_frames)
		return JAVA_NOT;
	jp = bpf_map_lookup_elem(&java_procs, &pid);
	pc = w->ip;
	st = get_stats();
	if (!jp || !st || pc < jp->code_lo || pc >= jp->code_hi)
		return JAVA_NOT;
	n = w->n - 1;
	if (n >= MAX_STACK_DEPTH)
		return JAVA_NOT;
	st->java_frames++;
	if (pc >= jp->interp_lo && pc < jp->interp_hi) {
		/* An interpreted frame: one read of its slots. */
		__u64 method, bcp, cm = 0, bci = FG_JAVA_BCI_NONE;

		if (stack_read(w, w->bp - 24, &method, false) ||
		    (n > 0 ? stack_read(w, w->bp - 64, &bcp, false) : (bcp = w->r13, 0))) {
			st->java_fault++;
			w->end = WALK_FAULT;
			return JAVA_OVER;
		}
		if (!bpf_probe_read_user(&cm, sizeof(cm), (void *)(method + jp->m_const_method)) &&
		    bcp >= cm + jp->cm_size && bcp - (cm + jp->cm_size) < FG_JAVA_BCI_NONE)
			bci = bcp - (cm + jp->cm_size);
		word = FG_RT_TAG | ((__u64)FG_RT_HOTSPOT << FG_RT_SHIFT) |
		       ((__u64)FG_JAVA_INTERPRETED << FG_RT_KIND_SHIFT) | (bci << 44) |
		       ((method >> 3) & ((1ULL << 44) - 1));
		put_word(buf, n, word);
		/* Again each second or so: a class unloaded frees its methods,
		 * and another's may take the address; user space names none
		 * whose address held two methods (src/runtimes/java/). */
		java_announce(pid, FG_PROC_JAVA_METHOD, method, (__u32)(bpf_ktime_get_ns() >> 30));
		/* The caller's sp is the sender sp the frame saved. */
		{
			__u64 bp, ra, sender;

			if (stack_read(w, w->bp, &bp, false) || stack_read(w, w->bp + 8, &ra, false) ||
			    stack_read(w, w->bp - 8, &sender, false)) {
				st->java_fault++;
				w->end = WALK_FAULT;
				return JAVA_OVER;
			}
			w->sp = sender;
			w->bp = bp;
			w->ip = ra;
		}
		goto next;
	}
	/* A caller's return address points after its call: look up the call. */
	blob = java_blob(jp, n ? pc - 1 : pc, &block);
	if (!blob || bpf_probe_read_user(w->blob, FG_JAVA_HEAD, (void *)blob)) {
		st->java_lost++;
		w->end = WALK_LOST_FP;
		return JAVA_OVER;
	}
	frame_size = head_u32(w, jp->cb_frame_size);
	if (jp->flags & FG_JAVA_HAS_KIND) {
		__u32 kind_at = jp->cb_kind;

		nmethod = kind_at < FG_JAVA_HEAD && w->blob[kind_at] == 1;
	} else
		nmethod = jp->name_nmethod && head_u64(w, jp->cb_name) == jp->name_nmethod;
	id = nmethod ? head_u32(w, jp->nm_compile_id) : 0;
	word = FG_RT_TAG | ((__u64)FG_RT_HOTSPOT << FG_RT_SHIFT) |
	       ((__u64)(nmethod ? FG_JAVA_COMPILED : FG_JAVA_STUB) << FG_RT_KIND_SHIFT) |
	       (((block - jp->code_lo) >> (jp->log2_seg & 31)) & ((1ULL << FG_JAVA_SEG_BITS) - 1)) |
	       ((pc - blob > FG_JAVA_OFF_MAX ? FG_JAVA_OFF_MAX : pc - blob) << FG_JAVA_SEG_BITS) |
	       ((__u64)(id & ((1U << FG_JAVA_ID_BITS) - 1)) << (FG_JAVA_SEG_BITS + FG_JAVA_OFF_BITS));
	put_word(buf, n, word);
	if (nmethod)
		java_announce(pid, FG_PROC_JAVA_NMETHOD, blob, id);
	else
		java_announce(pid, FG_PROC_JAVA_STUB, blob, 0);
	if (n > 0 && pc == jp->call_stub_ra) {
		/* The call stub: Java entered from native code, which goes on
		 * below by rbp. */
		__u64 bp, ra;

		if (stack_read(w, w->bp, &bp, false) || stack_read(w, w->bp + 8, &ra, false)) {
			st->java_fault++;
			w->end = WALK_FAULT;
			return JAVA_OVER;
		}
		w->sp = w->bp + 16;
		w->bp = bp;
		w->ip = ra;
		return JAVA_STEPPED;
	}
	if (!frame_size || frame_size > 0x10000) {
		st->java_lost++;
		w->end = WALK_LOST_FP;
		return JAVA_OVER;
	}
	code_begin = java_code_field(w, jp, blob, jp->cb_code_begin, false);
	if (n == 0 && nmethod) {
		__u32 fc = jp->flags & FG_JAVA_FC_INT16 ? head_u16(w, jp->cb_frame_complete)
							 : head_u32(w, jp->cb_frame_complete);
		int epi;

		if (code_begin && pc < code_begin + fc) {
			/* In the prologue: from the entry below pc. */
			__u64 uep = java_code_field(w, jp, blob, jp->nm_entry, true);
			__u64 vep = java_code_field(w, jp, blob, jp->nm_verified_entry, true);
			__u64 osr = java_code_field(w, jp, blob, jp->nm_osr_entry, true);
			__u64 entry = 0;
			long pushed;

			if (uep && uep <= pc && uep > entry)
				entry = uep;
			if (vep && vep <= pc && vep > entry)
				entry = vep;
			if (osr && osr <= pc && osr > entry)
				entry = osr;
			if (entry == uep && vep > pc) {
				/* The inline cache check: nothing pushed yet. */
				if (!java_pop(w, w->sp, 0))
					goto fault;
				goto next;
			}
			pushed = entry ? java_prologue(w, entry, pc) : -1;
			if (pushed < 0) {
				st->java_prologue++;
				w->end = WALK_UNSUPPORTED;
				return JAVA_OVER;
			}
			if (!java_pop(w, w->sp + pushed, w->java_rbp_at >= 0 ? w->sp + w->java_rbp_at : 0))
				goto fault;
			goto next;
		}
		epi = java_epilogue(w, pc);
		if (epi == 1) {
			if (!java_pop(w, w->sp + 8, w->sp))
				goto fault;
			goto next;
		}
		if (epi == 2) {
			if (!java_pop(w, w->sp, 0))
				goto fault;
			goto next;
		}
	}
	/* The frame's size: return address on top, the caller's rbp below. */
	if (!java_pop(w, w->sp + 8 * (__u64)frame_size - 8, w->sp + 8 * (__u64)frame_size - 16))
		goto fault;
next:
	/* A Java frame's caller is Java code or the call stub, both in the
	 * code cache: anything else is a walk gone wrong. */
	if (w->ip < jp->code_lo || w->ip >= jp->code_hi) {
		st->java_lost++;
		w->end = WALK_LOST_FP;
		return JAVA_OVER;
	}
	return JAVA_STEPPED;
fault:
	st->java_fault++;
	w->end = WALK_FAULT;
	return JAVA_OVER;
}

#endif
