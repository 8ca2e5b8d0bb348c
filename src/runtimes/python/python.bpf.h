/* CPython interpreter stacks, read from the kernel side. A native walk of a
 * Python thread shows the evaluator (_PyEval_EvalFrameDefault) over and
 * over; the functions it runs live in the interpreter's frame chain. When
 * the current process is a known interpreter (`py_procs`, filled by user
 * space with its version's offsets), find the thread's PyThreadState (by
 * pthread id, which is the thread's fs base on x86_64), follow its frame
 * chain and append one word per Python frame after FG_PY_MARKER: the code
 * object and instruction. User space names the code objects and puts the
 * frames in place of the evaluator frames they ran in. */
#ifndef FGBPF_PYTHON_BPF_H
#define FGBPF_PYTHON_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "targets.bpf.h"
#include "interp.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_py_proc);
} py_procs SEC(".maps");

/* A thread's PyThreadState, found once and checked at each use (thread
 * states are freed and reused). `tstate` 0: the thread had none when last
 * looked for, at `checked` (ns); looked for again after PY_RECHECK_NS. */
struct py_thread {
	__u64 tstate;
	__u64 checked;
};

#define PY_RECHECK_NS 50000000ULL
#define PY_MAX_THREADS 256

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct py_thread);
} py_threads SEC(".maps");

/* Off with --no-python. */
const volatile bool python_frames = true;


struct py_find {
	struct fg_py_proc *py;
	__u64 ts;
	__u64 fsbase;
	__u64 found;
};

static long py_find_step(__u32 i, void *ctx)
{
	struct py_find *f = ctx;
	__u64 id = 0;

	if (!f->ts || !f->py)
		return 1;
	if (bpf_probe_read_user(&id, sizeof(id), (void *)(f->ts + f->py->ts_thread_id)))
		return 1;
	if (id == f->fsbase) {
		f->found = f->ts;
		return 1;
	}
	if (bpf_probe_read_user(&f->ts, sizeof(f->ts), (void *)(f->ts + f->py->ts_next)))
		return 1;
	return 0;
}

/* The current thread's PyThreadState, 0 when it has none. */
static __always_inline __u64 py_thread_state(struct fg_py_proc *py, __u32 tid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct py_find f = { .py = py };
	struct py_thread *known, entry = {};
	__u64 now = bpf_ktime_get_ns(), interp = 0, id = 0;

	f.fsbase = BPF_CORE_READ(task, thread.fsbase);
	known = bpf_map_lookup_elem(&py_threads, &tid);
	if (known && known->tstate &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(known->tstate + py->ts_thread_id)) &&
	    id == f.fsbase)
		return known->tstate;
	if (known && !known->tstate && now - known->checked < PY_RECHECK_NS)
		return 0;
	/* The main interpreter's threads; subinterpreters are not walked. */
	if (!bpf_probe_read_user(&interp, sizeof(interp), (void *)(py->runtime + py->interp_head)) &&
	    interp &&
	    !bpf_probe_read_user(&f.ts, sizeof(f.ts), (void *)(interp + py->threads_head)))
		bpf_loop(PY_MAX_THREADS, py_find_step, &f, 0);
	entry.tstate = f.found;
	entry.checked = now;
	bpf_map_update_elem(&py_threads, &tid, &entry, BPF_ANY);
	return f.found;
}

struct py_walk {
	struct fg_py_proc *py;
	struct stack_buf *buf;
	__u64 frame;
	__u32 pid;
	__u32 n;
	__u32 first; /* index of the first Python word */
	__u32 end;   /* enum fg_interp_walk once ended */
};

static long py_step(__u32 i, void *ctx)
{
	struct py_walk *w = ctx;
	struct fg_py_proc *py = w->py;
	__u64 frame = w->frame, code = 0, back = 0, instr = 0, word;
	__u8 entry = 0;
	__u32 n = w->n;

	if (!frame) {
		w->end = FG_INTERP_WHOLE;
		return 1;
	}
	if (bpf_probe_read_user(&code, sizeof(code), (void *)(frame + py->f_code)) ||
	    bpf_probe_read_user(&back, sizeof(back), (void *)(frame + py->f_back))) {
		w->end = FG_INTERP_FAULT;
		return 1;
	}
	if (py->f_entry != FG_PY_NONE_OFF &&
	    bpf_probe_read_user(&entry, sizeof(entry), (void *)(frame + py->f_entry))) {
		w->end = FG_INTERP_FAULT;
		return 1;
	}
	w->frame = back;
	if (py->kind == FG_PY_INTERP_SHIM && entry == FG_PY_OWNED_BY_CSTACK) {
		/* The frame below a shim is where an evaluator call began. */
		interp_mark_entry(w->buf, w->n, w->first);
		return 0;
	}
	if (n >= MAX_STACK_DEPTH) {
		w->end = FG_INTERP_CUT;
		return 1;
	}
	if (py->kind == FG_PY_FRAME_OBJECT) {
		int lasti = 0;

		bpf_probe_read_user(&lasti, sizeof(lasti), (void *)(frame + py->f_instr));
		instr = lasti < 0 ? 0 : lasti;
	} else {
		/* The instruction pointer, in 2-byte code units from the code's
		 * first instruction; before the first, 0. */
		__u64 at = 0, first = code + py->co_code;

		bpf_probe_read_user(&at, sizeof(at), (void *)(frame + py->f_instr));
		instr = at > first ? (at - first) / 2 : 0;
	}
	if (instr > 0x7ffff)
		instr = 0x7ffff;
	word = ((code >> 3) & ((1ULL << 44) - 1)) | (instr << 44);
	if (py->kind == FG_PY_FRAME_OBJECT || (py->kind == FG_PY_INTERP_ENTRY_FLAG && entry))
		word |= FG_INTERP_ENTRY;
	/* Bounded again next to the store: Linux 6.1's verifier forgets the
	 * bound of a 32-bit index spilled to the stack since the check above
	 * and refuses the whole object (6.12 keeps it). */
	barrier_var(n);
	if (n >= MAX_STACK_DEPTH) {
		w->end = FG_INTERP_CUT;
		return 1;
	}
	w->buf->ips[n] = word;
	w->n = n + 1;
	interp_announce(w->pid, FG_PROC_PY_CODE, code, 0);
	return 0;
}

/* Appends the current thread's Python frames to the `n` native frames in
 * `buf` when its process is a known interpreter. Returns the new length
 * and says in *walk how the Python stack was read (enum fg_interp_walk). A
 * global function: the verifier checks it once, on its own. */
__noinline __u32 add_python(struct stack_buf *buf, __u32 n, __u32 pid, struct fg_stats *st,
			    __u32 *walk)
{
	struct py_walk w = { .buf = buf, .pid = pid };
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 ts, frame = 0;

	if (!python_frames || !buf || !st || !walk)
		return n;
	w.py = bpf_map_lookup_elem(&py_procs, &pid);
	if (!w.py)
		return n;
	ts = py_thread_state(w.py, tid);
	if (!ts) {
		st->py_no_thread++;
		*walk = FG_INTERP_NO_THREAD;
		return n;
	}
	if (bpf_probe_read_user(&frame, sizeof(frame), (void *)(ts + w.py->ts_frame)) ||
	    (w.py->cframe_frame != FG_PY_NONE_OFF && frame &&
	     bpf_probe_read_user(&frame, sizeof(frame), (void *)(frame + w.py->cframe_frame)))) {
		st->py_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	if (n >= MAX_STACK_DEPTH - 1) {
		st->py_cut++;
		*walk = FG_INTERP_CUT;
		return n;
	}
	buf->ips[n] = FG_PY_MARKER;
	w.n = n + 1;
	w.first = w.n;
	w.frame = frame;
	bpf_loop(MAX_STACK_DEPTH, py_step, &w, 0);
	switch (w.end) {
	case FG_INTERP_WHOLE:
		st->py_whole++;
		break;
	case FG_INTERP_FAULT:
		st->py_fault++;
		break;
	default:
		w.end = FG_INTERP_CUT;
		st->py_cut++;
	}
	*walk = w.end;
	return w.n;
}

#endif
