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

/* A frame of Erlang code the interpreter (OTP 23) runs: the address of a
 * word of its loaded code (the instruction running, or a continuation
 * pointer), named by user space by the function whose code it is. */
#define FG_BEAM_WORD (FG_RT_TAG | ((__u64)FG_RT_BEAM << FG_RT_SHIFT))

/* A process running the BEAM (src/runtimes/beam/), for the walker
 * (beam.bpf.h): the span of its JIT's code, where an Erlang process ends
 * (the return address every Erlang process's stack starts with), and
 * whether the node keeps frame pointers. An emulator without the JIT
 * (`interp`, OTP 23): lo..hi is its loop (process_main), and heap_at and
 * hend_at where a process (struct process) keeps the start and end of
 * its heap, whose top is its stack. */
struct fg_beam_proc {
	__u64 lo, hi;
	__u64 normal_exit;
	__u32 frame_pointers;
	__u32 interp;
	__u32 heap_at, hend_at;
};

#endif
