/* The BEAM's (Erlang's) part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_BEAM_H
#define FGBPF_BEAM_H

/* An Erlang stack (beam.bpf.h) ends, after this marker (not a user
 * address), with one word naming the Erlang process it is, not a frame:
 * the process's id (Process.common.id, an internal pid term), which user
 * space prints as Erlang does (<0.N.S>) and gives the stack as its label. */
#define FG_BEAM_MARKER 0xffffffffffffff56ULL

/* A process running the BEAM's JIT (src/runtimes/beam/): the span of
 * its JIT's code, where an Erlang process ends (the return address every
 * Erlang process's stack starts with), and whether the node keeps frame
 * pointers, for the walker (beam.bpf.h). */
struct fg_beam_proc {
	__u64 lo, hi;
	__u64 normal_exit;
	__u32 frame_pointers;
	__u32 pad;
};

#endif
