/* CPython's part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_PYTHON_H
#define FGBPF_PYTHON_H

/* Python interpreter frames follow a user stack's native frames after this
 * marker (not a user address), one word each, leaf first:
 * bits 0-43 the code object's address >> 3, bits 44-62 the instruction
 * (see fg_py_proc.kind), bit 63 set on the outermost frame of one call of
 * the evaluator, which user space puts in place of that native frame. */
#define FG_PY_MARKER 0xffffffffffffff50ULL
#define FG_INTERP_ENTRY (1ULL << 63)

enum fg_py_kind {
	/* 3.8-3.10: PyFrameObject chain from tstate->frame; the instruction is
	 * f_lasti; one evaluator call per frame. */
	FG_PY_FRAME_OBJECT = 1,
	/* 3.11: _PyInterpreterFrame chain; the instruction is prev_instr in
	 * code units from co_code_adaptive; entry frames flagged is_entry. */
	FG_PY_INTERP_ENTRY_FLAG = 2,
	/* 3.12+: as 3.11, but an evaluator call begins above a shim frame
	 * whose owner is FRAME_OWNED_BY_CSTACK. */
	FG_PY_INTERP_SHIM = 3,
};
#define FG_PY_OWNED_BY_CSTACK 3
#define FG_PY_NONE_OFF 0xffff /* an offset a version does not have */

/* A process running CPython, as user space found it (src/runtimes/python/):
 * where its runtime is and the offsets of its version. */
struct fg_py_proc {
	__u64 runtime;      /* address of _PyRuntime */
	__u16 interp_head;  /* _PyRuntime: interpreters.head */
	__u16 threads_head; /* PyInterpreterState: first thread state */
	__u16 ts_next;      /* PyThreadState: next */
	__u16 ts_thread_id; /* PyThreadState: thread_id (pthread_self) */
	__u16 ts_frame;     /* PyThreadState: frame, cframe or current_frame */
	__u16 cframe_frame; /* _PyCFrame: current_frame; FG_PY_NONE_OFF: none */
	__u16 f_code;       /* frame: its code object */
	__u16 f_back;       /* frame: its caller */
	__u16 f_instr;      /* frame: f_lasti, prev_instr or instr_ptr */
	__u16 f_entry;      /* frame: is_entry (3.11) or owner (3.12+) */
	__u16 co_code;      /* code: co_code_adaptive (3.11+) */
	__u8 kind;          /* enum fg_py_kind */
	__u8 pad;
};

#endif
