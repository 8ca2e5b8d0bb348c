/* `fgbpf alloc`: the C library's allocator calls, sampled by bytes.
 * Uprobes on malloc, calloc, realloc, memalign (aligned_alloc is the same
 * address in glibc), posix_memalign and anonymous mmap that gives access
 * (a PROT_NONE one reserves address space only: counted apart; the BPF cookie
 * says which; calls nested in another of them are left out) keep
 * a per-thread countdown of bytes drawn from an exponential distribution
 * of mean alloc_mean (Poisson sampling, as Go, jemalloc and tcmalloc
 * sample): an allocation that reaches it is sampled. A sampled call's
 * stack is walked at the entry, its size and key kept per thread until
 * the return (uretprobe), where the address is known: the key goes into
 * counts with the kind and size in its cgroup field (FG_ALLOC_SHIFT), and
 * into alloc_live under the address. A free of an address in alloc_live
 * counts the same key as freed; frees of other addresses (unsampled
 * allocations, or from before the capture) are counted only. User space
 * weighs each sample by its size (src/profile/alloc.rs). Every call that
 * could not be followed in full is counted in alloc_stats. These
 * programs load only for `alloc`. */
#ifndef FGBPF_ALLOC_BPF_H
#define FGBPF_ALLOC_BPF_H

#include "fgbpf.h"
#include "counts.bpf.h"
#include "stacks.bpf.h"
#include "unwind.bpf.h"
#include "targets.bpf.h"

/* The kind of a count, in the top byte of fg_key.cgroup; the size is in
 * the rest (src/probe/alloc.rs reads both). */
#define FG_ALLOC_SHIFT 56
#define FG_ALLOC_KIND_ALLOC 1ULL
#define FG_ALLOC_KIND_FREE 2ULL
#define FG_ALLOC_SIZE_MASK ((1ULL << FG_ALLOC_SHIFT) - 1)

/* Which function a uprobe is on: its cookie's low byte; the byte above
 * says which library (0: the C library, or the one target's replacement
 * allocator; 1 to FG_ALLOC_LIBS - 1: a command's candidate replacement,
 * src/probe/alloc.rs), whose calls are counted apart. */
#define FG_ALLOC_LIBS 8
enum fg_alloc_fn {
	FG_MALLOC = 0,
	FG_CALLOC = 1,
	FG_REALLOC = 2,
	FG_MEMALIGN = 3,
	FG_POSIX_MEMALIGN = 4,
	FG_MMAP = 5,
};

#define FG_MAP_ANONYMOUS 0x20

/* The per-CPU counters (src/probe/alloc.rs: Tally, same order). */
struct fg_alloc_stats {
	__u64 calls;           /* allocation calls in the targets */
	__u64 sampled;         /* of which sampled (stack walked) */
	__u64 recorded;        /* sampled and returned an address: counted */
	__u64 failed;          /* sampled but returned no address */
	__u64 lost_returns;    /* an entry whose return never came (longjmp, exit) */
	__u64 lost_counts;     /* counts map full */
	__u64 lost_user_stack; /* stack map full: counted without its stack */
	__u64 live_full;       /* alloc_live full: its free cannot be matched */
	__u64 frees;           /* free calls (and realloc's of a pointer) */
	__u64 frees_matched;   /* of a sampled allocation */
	__u64 threads_full;    /* calls of a thread alloc_threads had no room for */
	__u64 lost_free_counts; /* a matched free the counts map had no room for */
	__u64 calls_in[FG_ALLOC_LIBS]; /* calls, by the cookie's library */
	__u64 reserved;        /* anonymous mmaps with no access: left out */
};

struct fg_alloc_thread {
	__s64 countdown; /* bytes left before the next sample */
	__u64 size;      /* the pending call's */
	__u64 memptr;    /* posix_memalign: where the address is written */
	__u32 pending;   /* 0: none; 1: address returned; 2: through memptr */
	__u32 pad;
	/* The stack pointer at the entry of the outermost probed call in
	 * progress (0: none). glibc's functions call each other (realloc(NULL)
	 * and small-aligned memalign call malloc, malloc calls mmap): a call
	 * entered deeper (a lower sp, or the same: a tail call) is nested,
	 * left to the outer one, and so is its return; a return above it is
	 * the outer call's. */
	__u64 outer_sp;
	struct fg_key key; /* the pending call's, stack taken at the entry */
};

/* Mean bytes between samples (--sample-bytes); 1: every allocation. */
const volatile __u64 alloc_mean = 524288;
/* -ln((i + 0.5) / 4096) in 1/65536ths: an exponential draw of mean 1 from
 * 12 random bits, filled by user space. */
const volatile __u32 alloc_exp[4096] = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_alloc_stats);
} alloc_stats SEC(".maps");

/* Sized by user space (1 unless `alloc`). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_alloc_thread);
} alloc_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct fg_key);
} alloc_live SEC(".maps");

static __always_inline __s64 alloc_draw(void)
{
	__u32 i = bpf_get_prandom_u32() & 4095;

	return (__s64)((alloc_mean * (__u64)alloc_exp[i]) >> 16);
}

static __always_inline struct fg_alloc_stats *alloc_stats_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&alloc_stats, &zero);
}

/* A free of addr: the key of its sampled allocation counted as freed. */
static __always_inline void alloc_free(struct fg_alloc_stats *as, __u64 addr)
{
	struct fg_key *live, key;
	bool fresh = false;

	if (!addr)
		return;
	as->frees++;
	live = bpf_map_lookup_elem(&alloc_live, &addr);
	if (!live)
		return;
	__builtin_memcpy(&key, live, sizeof(key));
	bpf_map_delete_elem(&alloc_live, &addr);
	as->frees_matched++;
	key.cgroup = (FG_ALLOC_KIND_FREE << FG_ALLOC_SHIFT) | (key.cgroup & FG_ALLOC_SIZE_MASK);
	if (add_count(&key, 1, &fresh))
		as->lost_free_counts++;
}

static __always_inline bool alloc_is_target(__u32 pid, __u32 tid)
{
	return pid != self_pid && is_target(pid, tid) && in_scope((struct task_struct *)bpf_get_current_task());
}

SEC("uprobe")
int alloc_entry(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), size = 0, memptr = 0, sp;
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid, fn = bpf_get_attach_cookie(ctx) & 0xff;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fg_alloc_stats *as;
	struct fg_alloc_thread *t;
	struct fg_stats *st;

	if (!alloc_is_target(pid, tid))
		return 0;
	as = alloc_stats_get();
	if (!as)
		return 0;
	t = bpf_map_lookup_elem(&alloc_threads, &tid);
	if (!t) {
		struct fg_alloc_thread init = {};

		init.countdown = alloc_draw();
		bpf_map_update_elem(&alloc_threads, &tid, &init, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&alloc_threads, &tid);
		if (!t) {
			as->threads_full++;
			return 0;
		}
	}
	sp = PT_REGS_SP(ctx);
	/* Nested in a probed call: deeper, or tail-called from it at the
	 * same depth (glibc's memalign jumps to malloc). */
	if (t->outer_sp && sp <= t->outer_sp)
		return 0;
	if (t->pending) {
		/* An outer call whose return never came. */
		as->lost_returns++;
		t->pending = 0;
	}
	t->outer_sp = 0;
	if (fn == FG_MMAP && !(PT_REGS_PARM4(ctx) & FG_MAP_ANONYMOUS))
		return 0; /* a file's mapping: not an allocation */
	if (fn == FG_MMAP && PT_REGS_PARM3(ctx) == 0) {
		/* PROT_NONE: address space reserved, not memory (glibc's
		 * malloc arenas and thread stacks, made accessible later;
		 * an arena's memory is counted as the mallocs it serves). */
		as->reserved++;
		return 0;
	}
	t->outer_sp = sp;
	switch (fn) {
	case FG_MALLOC: size = PT_REGS_PARM1(ctx); break;
	case FG_CALLOC: size = PT_REGS_PARM1(ctx) * PT_REGS_PARM2(ctx); break;
	case FG_REALLOC:
		/* The old block is freed (or moved): a free, then an
		 * allocation of the new size (none for size 0). */
		alloc_free(as, PT_REGS_PARM1(ctx));
		size = PT_REGS_PARM2(ctx);
		if (!size)
			return 0;
		break;
	case FG_MEMALIGN: size = PT_REGS_PARM2(ctx); break;
	case FG_MMAP: size = PT_REGS_PARM2(ctx); break;
	default:
		memptr = PT_REGS_PARM1(ctx);
		size = PT_REGS_PARM3(ctx);
		break;
	}
	as->calls++;
	/* Read again rather than kept: the walk's chain of calls has no
	 * stack to spare (src/probe/stack_depth.rs). */
	as->calls_in[(bpf_get_attach_cookie(ctx) >> 8) & (FG_ALLOC_LIBS - 1)]++;
	if (alloc_mean > 1) {
		if ((__s64)size < t->countdown) {
			t->countdown -= size;
			return 0;
		}
		t->countdown = alloc_draw();
	}
	as->sampled++;
	st = get_stats();
	if (!st)
		return 0;
	__builtin_memset(&t->key, 0, sizeof(t->key));
	t->key.pid = pid;
	t->key.tid = tid;
	t->key.start = proc_start(task);
	t->key.state = FG_ONCPU;
	t->key.slice_first = t->key.slice_last = slice_of(bpf_ktime_get_ns());
	t->key.cgroup = (FG_ALLOC_KIND_ALLOC << FG_ALLOC_SHIFT) | (size & FG_ALLOC_SIZE_MASK);
	bpf_get_current_comm(&t->key.comm, sizeof(t->key.comm));
	if (user_stacks && tid) {
		__u32 walk = FG_WALK_NONE;
		bool lost = false;

		t->key.user_stack = store_user_stack(ctx, pid, st, &lost, &walk, NULL, false);
		t->key.flags |= walk << FG_WALK_SHIFT;
		if (lost)
			as->lost_user_stack++;
	}
	t->size = size;
	t->memptr = memptr;
	t->pending = memptr ? 2 : 1;
	return 0;
}

SEC("uretprobe")
int alloc_return(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), addr = PT_REGS_RC(ctx);
	__u32 tid = (__u32)pid_tgid, pending;
	struct fg_alloc_stats *as;
	struct fg_alloc_thread *t;
	bool fresh = false;

	t = bpf_map_lookup_elem(&alloc_threads, &tid);
	if (!t || !t->outer_sp || PT_REGS_SP(ctx) <= t->outer_sp)
		return 0; /* no call, or a nested one's return */
	t->outer_sp = 0;
	if (!t->pending)
		return 0;
	as = alloc_stats_get();
	if (!as)
		return 0;
	pending = t->pending;
	t->pending = 0;
	if (pending == 2) {
		/* posix_memalign: 0 and the address through memptr. */
		if (addr || bpf_probe_read_user(&addr, sizeof(addr), (void *)t->memptr))
			addr = 0;
	}
	if (!addr || addr == (__u64)-1) {
		/* NULL, or mmap's MAP_FAILED */
		as->failed++;
		return 0;
	}
	if (add_count(&t->key, 1, &fresh)) {
		as->lost_counts++;
		return 0;
	}
	as->recorded++;
	if (bpf_map_update_elem(&alloc_live, &addr, &t->key, BPF_ANY))
		as->live_full++;
	if (fresh && t->key.pid)
		note_process(ctx, t->key.pid, (struct task_struct *)bpf_get_current_task());
	return 0;
}

/* free and munmap: a block or mapping given back. */
SEC("uprobe")
int alloc_free_entry(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct fg_alloc_stats *as;

	__u32 tid = (__u32)pid_tgid;
	struct fg_alloc_thread *t;

	if (!alloc_is_target(pid_tgid >> 32, tid))
		return 0;
	/* realloc(p, 0) calls free(p): realloc's entry freed it already. */
	t = bpf_map_lookup_elem(&alloc_threads, &tid);
	if (t && t->outer_sp && PT_REGS_SP(ctx) < t->outer_sp)
		return 0;
	as = alloc_stats_get();
	if (as)
		alloc_free(as, PT_REGS_PARM1(ctx));
	return 0;
}

#endif
