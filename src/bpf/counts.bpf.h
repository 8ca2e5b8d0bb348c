/* The counts every program adds to, double-buffered so that user space can
 * drain them while the capture runs: programs add to counts0 or counts1 as
 * `generation` says; user space flips the generation, lets programs that
 * read the old one finish, then reads and deletes the idle map. */
#ifndef FGBPF_COUNTS_BPF_H
#define FGBPF_COUNTS_BPF_H

#include "fgbpf.h"

/* Sized by the loader before load (--max-entries; the defaults are in
 * src/probe/mod.rs): 1 here is a placeholder. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct fg_key);
	__type(value, __u64);
} counts0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct fg_key);
	__type(value, __u64);
} counts1 SEC(".maps");

/* Written by user space through the mapped .bss; only its low bit counts. */
volatile __u64 generation = 0;

/* Keys inserted into counts0 and counts1 since user space last emptied
 * them: it drains before the interval is up when the one in use is half
 * full (a storm of threads or processes brings a new key each), and
 * zeroes the count of the one it emptied. */
volatile __u64 inserted0 = 0;
volatile __u64 inserted1 = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	/* 0: the counters user space reports; 1: scratch for walks that are
	 * not samples (wakers.bpf.h). */
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fg_stats);
} stats SEC(".maps");

/* Time slices: counts are kept per slice of the capture, so that any range
 * of it can be drawn again. The width is set before load (never 0); the
 * capture's start, on bpf_ktime_get_ns()'s clock, through the mapped .bss
 * just before the first program is attached. */
const volatile __u64 slice_ns = 100000000;
volatile __u64 slice_origin = 0;

/* The slice of the capture that the time `ts` lies in. */
static __always_inline __u32 slice_of(__u64 ts)
{
	__u64 slice;

	if (ts <= slice_origin || !slice_ns)
		return 0;
	slice = (ts - slice_origin) / slice_ns;
	return slice > 0xffffffffULL ? 0xffffffff : (__u32)slice;
}

static __always_inline struct fg_stats *get_stats(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline long add_in(void *map, struct fg_key *key, __u64 value, bool *fresh)
{
	__u64 *total = bpf_map_lookup_elem(map, key);
	long err;

	if (total) {
		__sync_fetch_and_add(total, value);
		return 0;
	}
	err = bpf_map_update_elem(map, key, &value, BPF_NOEXIST);
	if (err == -EEXIST) {
		/* Another CPU inserted the key between our lookup and update. */
		total = bpf_map_lookup_elem(map, key);
		if (total)
			__sync_fetch_and_add(total, value);
		return 0;
	}
	if (!err)
		*fresh = true;
	return err;
}

/* Adds `value` to the bucket `key` of the current generation. Returns 0 on
 * success, an error when the map had no room; sets *fresh when the key is
 * new in this generation. */
static __always_inline long add_count(struct fg_key *key, __u64 value, bool *fresh)
{
	long err;

	if (generation & 1) {
		err = add_in(&counts1, key, value, fresh);
		if (!err && *fresh)
			__sync_fetch_and_add(&inserted1, 1);
		return err;
	}
	err = add_in(&counts0, key, value, fresh);
	if (!err && *fresh)
		__sync_fetch_and_add(&inserted0, 1);
	return err;
}

#endif
