/* Go's part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_GO_H
#define FGBPF_GO_H

/* A Go thread's stack ends, after this marker (not a user address), with
 * two words naming the goroutine it runs, not frames: its id
 * (runtime.g.goid) and its pprof labels (g.labels, a pointer to the
 * map runtime/pprof made; 0: none). The goroutine is the thread's m's
 * curg, found through g in the thread's TLS, so that a thread running
 * the runtime on its g0 stack on behalf of a goroutine carries that
 * goroutine, as Go's own profiler counts it. */
#define FG_GO_MARKER 0xffffffffffffff53ULL

/* A Go process, as user space found it (src/runtimes/go/): where g is in
 * a thread's TLS and the offsets read from the binary's DWARF. */
struct fg_go_proc {
	__s64 tls_g;    /* g's offset from the thread pointer (fsbase) */
	__u16 g_m;      /* runtime.g: m */
	__u16 g_goid;   /* runtime.g: goid */
	__u16 g_labels; /* runtime.g: labels */
	__u16 m_curg;   /* runtime.m: curg */
};

#endif
