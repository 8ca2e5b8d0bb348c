/* A start in two stages (src/probe/staged.rs), for system-wide captures.
 * The .eh_frame walker and the runtimes' walkers are most of what the
 * verifier checks at load (HotSpot's, PHP's, Python's, Ruby's and V8's:
 * about 12,000 of the sampler's 19,000 instructions processed), so the
 * object is first loaded and attached without them (`staged` set: user
 * stacks by the kernel's frame-pointer walk, unwind.bpf.h; the runtimes'
 * rodata flags off), and sampling starts at once. The same object is then
 * loaded a second time with them, sharing the first load's maps, and each
 * program of the first load (a _staged variant) tail-calls its twin of the
 * second (the plain program, as an unstaged start loads it) through a
 * one-entry program array: from then on every event runs the whole
 * program. The first load counts what it recorded before. The tail call
 * is kept out of the plain programs: it grows their frame, and the
 * switch-out path's frames are within bytes of the verifier's 512. */
#ifndef FGBPF_STAGED_BPF_H
#define FGBPF_STAGED_BPF_H

#include "fgbpf.h"

/* Set in the first load only. */
const volatile bool staged = false;

/* The twin of the second load, for each program of the first: an array
 * per program type (the kernel ties an array to the type of the first
 * program that uses it). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} full_sample SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} full_switch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} full_waking SEC(".maps");

/* In a program of the first load: runs its twin instead, once the second
 * load put it in `array`; returns only while it is not there. */
static __always_inline void run_full(void *ctx, void *array)
{
	if (staged)
		bpf_tail_call(ctx, array, 0);
}

#endif
