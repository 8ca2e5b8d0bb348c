/* The unwind tables as the walker reads them (src/procs/unwind/ compiles
 * them, src/probe/unwind.rs loads them): the rows of every binary and their
 * page indexes, each process's executable mappings, and the searches that
 * find the row of an address, with a per-CPU cache of the rows of return
 * addresses met lately. The walk itself is unwind.bpf.h. */
#ifndef FGBPF_TABLES_BPF_H
#define FGBPF_TABLES_BPF_H

#include "fgbpf.h"

/* Sized by the loader; user space fills it through a memory mapping. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fg_unwind_row);
} unwind_rows SEC(".maps");

/* The tables' page indexes (see FG_PAGE_SHIFT); sized and filled as
 * unwind_rows. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u32);
} unwind_pages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct fg_proc_unwind);
} proc_unwind SEC(".maps");

/* Off when the user asked for frame pointers only (or no process has
 * tables): stacks are then walked by frame pointers alone. */
const volatile bool use_tables = false;

/* The searches are global functions: the verifier checks each once on
 * its own, instead of once per path through the walk. */

/* Scratch for the mapping search: see mapping_in. */
struct search_pad {
	__u32 lo, hi;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct search_pad);
} search_pads SEC(".maps");

/* Index of the mapping holding pc, or FG_MAX_MAPPINGS for none. */
static __always_inline __u32 mapping_in(struct fg_proc_unwind *proc, __u64 pc)
{
	struct search_pad *pad;
	__u32 lo = 0, hi, idx, zero = 0;

	pad = bpf_map_lookup_elem(&search_pads, &zero);
	if (!proc || !pad)
		return FG_MAX_MAPPINGS;
	hi = proc->count;
	if (hi > FG_MAX_MAPPINGS)
		hi = FG_MAX_MAPPINGS;
	/* last mapping with start <= pc; 2^7 > FG_MAX_MAPPINGS */
	for (int i = 0; i < 7 && lo < hi; i++) {
		__u32 mid = (lo + hi) / 2;

		if (mid >= FG_MAX_MAPPINGS)
			return FG_MAX_MAPPINGS;
		if (proc->maps[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
		/* Through map memory, which the verifier does not track: it
		 * forgets the two bounds, and meets one state per step instead
		 * of one per path through all the steps. */
		*(volatile __u32 *)&pad->lo = lo;
		*(volatile __u32 *)&pad->hi = hi;
		lo = *(volatile __u32 *)&pad->lo;
		hi = *(volatile __u32 *)&pad->hi;
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
 * tailwalk.bpf.h). One more hash lookup per search. */
__noinline __u32 find_mapping_of(__u32 pid, __u64 pc)
{
	return mapping_in(bpf_map_lookup_elem(&proc_unwind, &pid), pc);
}

/* lo plus the number of rows among [first + lo, first + hi) of
 * unwind_rows whose pc is at or below rel (they are sorted by pc): where
 * the rows of a page end for rel. */
__noinline __u32 rows_upto(__u32 first, __u32 lo, __u32 hi, __u32 rel)
{
	for (int i = 0; i < FG_PAGE_STEPS && lo < hi; i++) {
		__u32 mid = lo + (hi - lo) / 2;
		__u32 key = first + mid;
		struct fg_unwind_row *r = bpf_map_lookup_elem(&unwind_rows, &key);

		if (!r)
			return 0;
		if (r->pc <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The row of mapping m for the address pc, NULL for none. */
static __always_inline struct fg_unwind_row *row_of(struct fg_mapping *m, __u64 pc)
{
	__u64 rel = pc - m->load;
	__u32 key, lo, hi, upto;
	__u32 *e;

	if (!m->count || rel > 0xffffffffULL)
		return NULL;
	if ((rel >> FG_PAGE_SHIFT) < m->npages) {
		key = m->pages + (__u32)(rel >> FG_PAGE_SHIFT);
		e = bpf_map_lookup_elem(&unwind_pages, &key);
		if (!e)
			return NULL;
		lo = *e;
		key++;
		e = bpf_map_lookup_elem(&unwind_pages, &key);
		if (!e)
			return NULL;
		hi = *e;
		upto = rows_upto(m->first, lo, hi, (__u32)rel);
	} else {
		/* Past the last row's page: the last row holds. */
		upto = m->count;
	}
	if (upto == 0 || upto > m->count)
		return NULL;
	key = m->first + upto - 1;
	return bpf_map_lookup_elem(&unwind_rows, &key);
}

/* The rows of the return addresses met lately, per CPU: the outer frames
 * of a busy thread are the same sample after sample, and a hit spares the
 * mapping and row searches. Keyed by the address and the process's list
 * of mappings (fg_proc_unwind.gen), which decide the row; rows and page
 * indexes never change once written. */
#define FG_ROW_CACHE 1024

struct row_cached {
	__u64 pc;
	__u64 gen;
	struct fg_unwind_row row;
	__u8 have_table; /* the code has a table (see walk_frame) */
	__u8 found;      /* row holds a row; else none was found */
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FG_ROW_CACHE);
	__type(key, __u32);
	__type(value, struct row_cached);
} row_cache SEC(".maps");

static __always_inline struct row_cached *row_slot(__u64 pc, __u64 gen)
{
	__u32 i = (__u32)(((pc ^ gen) * 0x9E3779B97F4A7C15ULL) >> 54) & (FG_ROW_CACHE - 1);

	return bpf_map_lookup_elem(&row_cache, &i);
}

/* Mapping mi of proc; NULL for mi out of bounds. */
static __always_inline struct fg_mapping *mapping_at(struct fg_proc_unwind *proc, __u64 mi)
{
	if (mi >= FG_MAX_MAPPINGS)
		return NULL;
	/* The verifier knows the bound of this register: the compiler must
	 * not index with another copy of mi, taken before the check. */
	asm volatile("" : "+r"(mi));
	return &proc->maps[mi];
}


#endif
