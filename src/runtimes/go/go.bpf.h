/* The goroutine a Go thread runs, read from the kernel side for each of
 * its stacks: Go programs keep the current g in the thread's TLS, its m
 * the goroutine it runs (curg), and a goroutine its id and the pprof
 * labels runtime/pprof.Do set. When the current process is a known Go
 * program (`go_procs`, filled by user space with the offsets of its
 * binary's DWARF, src/runtimes/go/), append FG_GO_MARKER, the goroutine's
 * id and its labels' address to the stack (fgbpf.h): five reads. User
 * space reads the labels (announced the first time a process shows
 * them, while they live) and gives the stack its goroutine as labels,
 * not frames. The goroutines of a whole program, running or not, are
 * read from user space (src/runtimes/go/walker.rs). */
#ifndef FGBPF_GO_BPF_H
#define FGBPF_GO_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "interp.bpf.h"
#include "walk.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_go_proc);
} go_procs SEC(".maps");

/* Off with --no-go. */
const volatile bool go_labels = true;

static __always_inline bool go_read(__u64 *v, __u64 at)
{
	return bpf_probe_read_user(v, sizeof(*v), (void *)at) == 0;
}

/* Appends the current thread's goroutine to the `n` frames in `buf` when
 * its process is a known Go program. Returns the new length and says in
 * *walk how it went (enum fg_interp_walk: WHOLE when read, NO_THREAD when no
 * goroutine runs). A global function: the verifier checks it once. */
__noinline __u32 add_go(struct stack_buf *buf, __u32 n, __u32 pid, struct fg_stats *st, __u32 *walk)
{
	struct fg_go_proc *go;
	struct task_struct *task;
	__u64 fsbase, g = 0, m = 0, curg = 0, goid = 0, labels = 0;

	if (!go_labels || !buf || !st || !walk)
		return n;
	go = bpf_map_lookup_elem(&go_procs, &pid);
	if (!go)
		return n;
	task = bpf_get_current_task_btf();
	fsbase = BPF_CORE_READ(task, thread.fsbase);
	/* A thread with no g (one a C library started, or Go's before it set
	 * its TLS) or an m running no goroutine (the scheduler looking for
	 * work) runs none. */
	if (!fsbase || !go_read(&g, fsbase + go->tls_g) || !g || !go_read(&m, g + go->g_m) || !m ||
	    !go_read(&curg, m + go->m_curg) || !curg) {
		st->go_none++;
		*walk = FG_INTERP_NO_THREAD;
		return n;
	}
	if (!go_read(&goid, curg + go->g_goid) || !go_read(&labels, curg + go->g_labels)) {
		st->go_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	barrier_var(n);
	if (n >= MAX_STACK_DEPTH - 3) {
		st->go_cut++;
		*walk = FG_INTERP_CUT;
		return n;
	}
	put_word(buf, n, FG_GO_MARKER);
	put_word(buf, n + 1, goid);
	put_word(buf, n + 2, labels);
	if (labels)
		interp_announce(pid, FG_PROC_GO_LABELS, labels, 0);
	st->go_read++;
	*walk = FG_INTERP_WHOLE;
	return n + 3;
}

#endif
