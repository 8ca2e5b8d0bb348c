/* A user-stack walk's state, and the window the stack is read through.
 * Reading user memory is a walk's main cost (a helper call each, ~0.1 us on
 * this project's VM, whatever the size): the stack is read through a
 * window of FG_WINDOW bytes copied in one call, which holds the next
 * frames' return addresses and saved registers, and moves up the stack when
 * a read falls outside it. The frame steps are unwind.bpf.h (tables, frame
 * pointers) and java.bpf.h (HotSpot). */
#ifndef FGBPF_WALK_BPF_H
#define FGBPF_WALK_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"

/* java.bpf.h: bytes of a code blob's head read at once (its fields up to
 * the nmethod's compile id, in every JDK), and of code around a pc. */
#define FG_JAVA_HEAD 384
#define FG_JAVA_CODE 64

/* Bytes of user stack copied per read. A frame of a C program is tens of
 * bytes, an interpreter's evaluator a few hundred: one read covers most
 * walks. */
#define FG_WINDOW 1024

enum walk_end {
	WALK_GOING = 0,
	WALK_DONE,        /* reached the outermost frame */
	WALK_FAULT,       /* a read of the stack failed */
	WALK_UNSUPPORTED, /* a rule the walker cannot follow */
	WALK_LOST_FP,     /* no row and no usable frame pointer */
};

/* A walk in progress. It lives in map memory (`walks`, or the tail-call
 * walker's continuation), not on the BPF stack: the verifier does not
 * track values in a map, so it checks the loop's body once instead of
 * once per combination of the flags and counters below. */
struct walk {
	__u64 ip, sp, bp;
	__u64 floor;    /* the innermost frame's sp: no frame lies below it */
	__u64 top;      /* the end of the main thread's stack data (env_end) */
	__u64 win_base; /* user address of win[0] */
	__u64 win_len;  /* bytes of win that hold the stack; 0: none yet */
	__u32 pid;
	__u32 last;     /* the mapping of the last frame; FG_MAX_MAPPINGS: none */
	__u32 n;        /* frames recorded */
	__u32 end;      /* enum walk_end */
	__u8 used_fp;
	__u8 used_rows;
	/* the task is a child of clone or clone3 that has not yet returned
	 * to user space (user_regs, unwind.bpf.h) */
	__u8 fork_child;
	__u8 pad[5];
	__u64 word;     /* a word read outside the window (move_window) */
	__u64 r13;      /* the innermost frame's r13 (HotSpot's interpreter, the BEAM's JIT) */
	__u64 rbx, r12, r15; /* the innermost frame's (the BEAM's interpreter) */
	/* java_prologue's decoding, see there */
	__u32 java_at, java_pushed, java_stop, java_done;
	__s32 java_rbp_at;
	__u32 java_pad;
	/* files.bpf.h: the mapping found last, for a process without tables */
	struct fg_mapping found;
	__u32 found_ok; /* found holds a mapping */
	__u32 asks;     /* mappings asked of the kernel in this walk */
	__s32 asked;    /* what the last one returned (0: found) */
	__u32 in_exec;  /* in execve past its point of no return (unwind.bpf.h) */
	__u8 win[FG_WINDOW];
	/* java.bpf.h: the head of the code blob of a frame, and code bytes;
	 * v8.bpf.h: the head of a SharedFunctionInfo, in `code` */
	__u8 blob[FG_JAVA_HEAD];
	__u8 code[FG_JAVA_CODE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} walks SEC(".maps");

/* What the walk's loop body gets: pointers only, the same at every
 * iteration. proc is NULL for a process without tables. */
struct walk_ref {
	struct walk *w;
	struct fg_proc_unwind *proc;
	struct stack_buf *buf;
};


/* A walk between the tail calls of the walker for kernels without
 * bpf_loop (tailwalk.bpf.h): struct walk holds no pointer, each stage
 * looks the process's mappings and the stack buffer up again; and what
 * its entry program had built. */
struct walk_cont {
	struct walk w;
	__u32 tid;      /* off-CPU: the thread switched out; wakers: the wakee */
	__u32 pad;
	struct fg_key key;       /* on-CPU: the sample's key so far */
	struct fg_start start;   /* off-CPU: the switch-out so far */
	struct fg_waker waker;   /* --wakers: the waker so far */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_cont);
} walk_conts SEC(".maps");

static __always_inline struct walk_cont *walk_cont(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&walk_conts, &zero);
}

/* Writes frame n's word: the bound checked next to the store, on the
 * register the store uses (hidden from the compiler, which knows it holds
 * and would drop the check the verifier needs). */
static __always_inline void put_word(struct stack_buf *buf, __u64 n, __u64 word)
{
	asm volatile("" : "+r"(n));
	if (n < MAX_STACK_DEPTH)
		buf->ips[n] = word;
}

/* Moves the window of the current walk (w, in `walks`, or in the
 * tail-call continuation with `cont`) to hold the 8 bytes at addr: one
 * read of up to FG_WINDOW bytes from a little below addr (where a row's
 * saved rbp is), never below the innermost frame or past the main
 * thread's stack data. When that read fails (the window ran into memory
 * not mapped or not in RAM), the window holds the rest of addr's page
 * only. Returns 0 when the window holds addr, 1 when it cannot and w->word
 * holds the 8 bytes, read on their own, or a read's error. A global
 * function taking scalars: verified once, not at each of its four callers
 * in a frame step, and loadable before 5.12. */
static __always_inline long move_window_of(struct walk *w, __u64 addr)
{
	__u64 start, len;
	long err;

	if (addr < w->floor) {
		err = bpf_probe_read_user(&w->word, sizeof(w->word), (void *)addr);
		return err ? err : 1;
	}
	start = addr - w->floor > 64 ? addr - 64 : w->floor;
	len = FG_WINDOW;
	if (w->top > start && w->top - start < len)
		len = w->top - start;
	if (start + len < addr + 8 ||
	    bpf_probe_read_user(w->win, len & (FG_WINDOW * 2 - 1), (void *)start)) {
		start = addr;
		len = 4096 - (addr & 4095);
		if (len > FG_WINDOW)
			len = FG_WINDOW;
		w->win_len = 0;
		if (len < 8) {
			err = bpf_probe_read_user(&w->word, sizeof(w->word), (void *)addr);
			return err ? err : 1;
		}
		err = bpf_probe_read_user(w->win, len & (FG_WINDOW * 2 - 1), (void *)start);
		if (err)
			return err;
	}
	w->win_base = start;
	w->win_len = len;
	return 0;
}

__noinline long move_window(__u64 addr)
{
	__u32 zero = 0;
	struct walk *w = bpf_map_lookup_elem(&walks, &zero);

	return w ? move_window_of(w, addr) : -EFAULT;
}

__noinline long move_window_cont(__u64 addr)
{
	__u32 zero = 0;
	struct walk_cont *c = bpf_map_lookup_elem(&walk_conts, &zero);

	return c ? move_window_of(&c->w, addr) : -EFAULT;
}

/* The 8 bytes of user stack at addr: from the window, moved to them when
 * it does not hold them (move_window). cont: the tail-call walker's walk.
 * 0 or a read's error. */
static __always_inline long stack_read(struct walk *w, __u64 addr, __u64 *val, const bool cont)
{
	__u64 off = addr - w->win_base;
	long err;

	if (off > FG_WINDOW - 8 || off + 8 > w->win_len) {
		err = cont ? move_window_cont(addr) : move_window(addr);
		if (err == 1) {
			*val = w->word;
			return 0;
		}
		if (err)
			return err;
		off = addr - w->win_base;
		if (off > FG_WINDOW - 8 || off + 8 > w->win_len)
			return -EFAULT;
	}
	*val = *(__u64 *)(w->win + off);
	return 0;
}

#endif
