/* LuaJIT stacks (2.1, GC64 or not, x86-64), read from the kernel side: a native
 * walk of a LuaJIT thread shows the VM's assembler code (lj_vm_*, lj_BC_*,
 * unnamed in a stripped libluajit) and the compiled traces' machine code;
 * the Lua functions it runs are the frames of the running lua_State's
 * stack (src/runtimes/luajit/).
 *
 * Which global state: the VM keeps DISPATCH (GG_State.dispatch) in r14
 * while it runs Lua code, and compiled traces and the C functions called
 * from Lua keep it (r14 is callee-saved). A candidate is trusted when the
 * GG_State it implies holds its main lua_State at its start, whose glref
 * points back at its global_State; the last one seen per thread is kept
 * (luajit_g), for samples where r14 holds something else; else the one
 * user space found in the process's memory (g_hint: a thread blocked in
 * C since before the capture, its r14 reused).
 *
 * Which frames: global_State.cur_L is the lua_State running (a coroutine
 * included). Its frames begin, leaf first, at
 *   - g->jit_base when vmstate >= 0 (a trace runs: the frame the trace
 *     was entered in; frames the trace inlined are not on the stack),
 *   - BASE (rdx) when the interpreter runs (vmstate INTERP, the pc in the
 *     VM's code): L->base is only written when the VM calls out,
 *   - L->base otherwise (a C function called from Lua, the GC, the JIT
 *     compiler), but only when a native frame is the VM's: else no Lua
 *     code runs (an nginx worker in epoll_wait between requests, whose
 *     last lua_State keeps the frames it had).
 * Each frame is two slots below its base, [func | PC/delta/type] (FR2,
 * GC64), or one, [func (32 bits) PC/delta/type (32 bits)] (not GC64,
 * 2.1.0-beta3: its references are 32 bits, its objects below 4 GiB):
 * a Lua function's prototype is written with the index of the bytecode it
 * runs (from the return pc its callee's frame keeps, or PC, rbx, for the
 * leaf in the interpreter), C and fast functions are left to the native
 * frames, a vararg call's relocated frame is skipped, and a frame called
 * from C (lua_call, lua_pcall, lua_resume) ends one run of the VM
 * (FG_INTERP_ENTRY). Three or four reads a frame. */
#ifndef FGBPF_LUAJIT_BPF_H
#define FGBPF_LUAJIT_BPF_H

#include "fgbpf.h"
#include "stacks.bpf.h"
#include "interp.bpf.h"
#include "walk.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fg_luajit_proc);
} luajit_procs SEC(".maps");

/* The last global_State seen per thread (its r14 read right). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} luajit_g SEC(".maps");

/* Off with --no-luajit. */
const volatile bool luajit_frames = true;

#define LJ_MAX_FRAMES 256
#define LJ_GCVMASK ((1ULL << 47) - 1)
/* A function's TValue (GC64): itype ~LJ_TFUNC in bits 47-63. */
#define LJ_FUNC_ITYPE 0x1fff7ULL
/* A function's type byte (gct: ~LJ_TFUNC), checked where its frame's slot
 * carries no type (not GC64). */
#define LJ_FUNC_GCT 8
#define LJ_VMST_INTERP (-1)
#define LJ_FRAME_C 1
#define LJ_FRAME_VARG 3

struct lj_walk {
	struct stack_buf *buf;
	__u64 frame;    /* the frame's slot: base - 8 */
	__u64 stack;    /* the lua_State's stack, its lowest slot */
	__u64 next_pc;  /* the pc the frame runs, from its callee's link */
	__u64 flags;    /* FG_LUAJIT_TRACE, for the first frame written */
	__u32 pid;
	__u32 n;
	__u32 run_first;
	__u32 end_how;
	__u16 fn_ffid;
	__u16 fn_pc;
	__u16 pt_size;
	__u16 pt_sizebc;
	__u16 gc64;
	__u16 fn_gct;
};

static __always_inline bool lj_put(struct lj_walk *w, __u64 word)
{
	__u32 n = w->n;

	if (n >= MAX_STACK_DEPTH) {
		w->end_how = FG_INTERP_CUT;
		return false;
	}
	put_word(w->buf, n, word);
	w->n = n + 1;
	return true;
}

/* One frame: its function written when a Lua function's, then on to the
 * frame below. */
static long lj_step(__u32 i, void *ctx)
{
	struct lj_walk *w = ctx;
	__u64 slots[2], f = w->frame, ftsz, func, proto, bc = 0, word, idx = 0;
	__u32 ins = 0, sizebc = 0, type;
	__u8 ffid = 0xff, gct = 0;

	/* The bottom frame, below which the stack's first slots are. */
	if (f < w->stack + (w->gc64 ? 16 : 8)) {
		interp_mark_entry(w->buf, w->n, w->run_first);
		w->end_how = FG_INTERP_WHOLE;
		return 1;
	}
	if (w->gc64) {
		if (bpf_probe_read_user(slots, sizeof(slots), (void *)(f - 8))) {
			w->end_how = FG_INTERP_FAULT;
			return 1;
		}
		func = slots[0] & LJ_GCVMASK;
		ftsz = slots[1];
		if ((slots[0] >> 47) != LJ_FUNC_ITYPE) {
			w->end_how = FG_INTERP_FAULT;
			return 1;
		}
	} else {
		if (bpf_probe_read_user(slots, 8, (void *)f)) {
			w->end_how = FG_INTERP_FAULT;
			return 1;
		}
		func = (__u32)slots[0];
		ftsz = slots[0] >> 32;
		if (bpf_probe_read_user(&gct, sizeof(gct), (void *)(func + w->fn_gct)) || gct != LJ_FUNC_GCT) {
			w->end_how = FG_INTERP_FAULT;
			return 1;
		}
	}
	if (bpf_probe_read_user(&ffid, sizeof(ffid), (void *)(func + w->fn_ffid))) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	type = (__u32)ftsz & 7;
	/* A Lua function (ffid 0), not a vararg call's relocated frame (its
	 * function is written at its frame below). */
	if (type != LJ_FRAME_VARG && ffid == 0) {
		if (bpf_probe_read_user(&bc, sizeof(bc), (void *)(func + w->fn_pc))) {
			w->end_how = FG_INTERP_FAULT;
			return 1;
		}
		if (!w->gc64)
			bc = (__u32)bc;
		if (bc < 4096) {
			w->end_how = FG_INTERP_FAULT;
			return 1;
		}
		proto = bc - w->pt_size;
		if (w->next_pc > bc &&
		    !bpf_probe_read_user(&sizebc, sizeof(sizebc), (void *)(proto + w->pt_sizebc)) &&
		    w->next_pc <= bc + 4 * (__u64)sizebc)
			idx = (w->next_pc - bc) / 4; /* the instruction before, + 1 */
		if (idx > 0xffff)
			idx = 0;
		word = ((proto >> 3) & ((1ULL << 44) - 1)) | (idx << 44) | w->flags;
		if (!lj_put(w, word))
			return 1;
		interp_announce(w->pid, FG_PROC_LUAJIT_PROTO, proto, 0);
		w->flags = 0;
	}
	if ((ftsz & 3) == 0) {
		/* Called from Lua: the call's A operand says how far below. */
		if (bpf_probe_read_user(&ins, sizeof(ins), (void *)(ftsz - 4))) {
			w->end_how = FG_INTERP_FAULT;
			return 1;
		}
		w->next_pc = ftsz;
		w->frame = f - 8 * ((w->gc64 ? 2 : 1) + ((ins >> 8) & 0xff));
	} else {
		if (type != LJ_FRAME_VARG)
			w->next_pc = 0;
		if ((ftsz & 3) == LJ_FRAME_C) {
			interp_mark_entry(w->buf, w->n, w->run_first);
			w->run_first = w->n;
		}
		w->frame = f - (ftsz & ~7ULL);
	}
	if (w->frame >= f) {
		w->end_how = FG_INTERP_FAULT;
		return 1;
	}
	return 0;
}

/* Whether a native frame of `buf` (its first n words) is the VM's. */
static __always_inline bool lj_in_vm(struct stack_buf *buf, __u32 n, struct fg_luajit_proc *lj)
{
	for (__u32 i = 0; i < MAX_STACK_DEPTH; i++) {
		if (i >= n)
			break;
		/* <=: a return address past a call that ends the VM's code. */
		if (buf->ips[i] >= lj->vm_start && buf->ips[i] <= lj->vm_end)
			return true;
	}
	return false;
}

/* The global state DISPATCH in `r14` implies, or 0. */
static __always_inline __u64 lj_global(struct fg_luajit_proc *lj, __u64 r14)
{
	__u64 L, g, glref = 0;

	if (r14 < 4096 || r14 > (1ULL << 47))
		return 0;
	L = r14 - lj->gg_dispatch;
	g = L + lj->gg_g;
	if (bpf_probe_read_user(&glref, sizeof(glref), (void *)(L + lj->l_glref)))
		return 0;
	if (!lj->gc64)
		glref = (__u32)glref;
	return glref == g ? g : 0;
}

/* A sample in a trace's machine code (which has no unwind rows, and
 * whose rbp is no frame pointer): the native walk is begun at the VM's
 * C frame instead (lua_State.cframe, the VM's rsp, which the trace runs
 * on), from an address of the VM's code, whose unwind row (CFA rsp + 80)
 * leads to the VM's caller. The trace is the one vmstate names, its code
 * checked to hold the pc. A global function: the verifier checks it
 * once. */
__noinline bool luajit_trace_start(struct walk *w, __u32 pid)
{
	struct fg_luajit_proc *lj;
	struct pt_regs *regs;
	__u64 g, *cached, L = 0, cframe = 0, traces = 0, trace = 0, mcode = 0;
	__s32 vmstate = -1;
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), szmcode = 0, tref = 0;

	if (!luajit_frames || !w)
		return false;
	lj = bpf_map_lookup_elem(&luajit_procs, &pid);
	if (!lj || (w->ip >= lj->vm_start && w->ip < lj->vm_end))
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs)
		return false;
	g = lj_global(lj, BPF_CORE_READ(regs, r14));
	if (!g) {
		cached = bpf_map_lookup_elem(&luajit_g, &tid);
		g = cached ? *cached : lj->g_hint;
	}
	if (!g || bpf_probe_read_user(&vmstate, sizeof(vmstate), (void *)(g + lj->g_vmstate)) || vmstate <= 0 ||
	    bpf_probe_read_user(&traces, sizeof(traces), (void *)(g + lj->g_to_j + lj->j_trace)) || !traces)
		return false;
	/* jit_State.trace: an array of references (GCRef), of 8 or 4 bytes. */
	if (lj->gc64) {
		if (bpf_probe_read_user(&trace, sizeof(trace), (void *)(traces + 8 * (__u64)(__u32)vmstate)))
			return false;
	} else {
		if (bpf_probe_read_user(&tref, sizeof(tref), (void *)(traces + 4 * (__u64)(__u32)vmstate)))
			return false;
		trace = tref;
	}
	if (!trace ||
	    bpf_probe_read_user(&mcode, sizeof(mcode), (void *)(trace + lj->t_mcode)) ||
	    bpf_probe_read_user(&szmcode, sizeof(szmcode), (void *)(trace + lj->t_szmcode)) ||
	    w->ip < mcode || w->ip >= mcode + szmcode ||
	    bpf_probe_read_user(&L, sizeof(L), (void *)(g + lj->g_cur_L)))
		return false;
	L = lj->gc64 ? L & LJ_GCVMASK : (__u32)L;
	if (!L || bpf_probe_read_user(&cframe, sizeof(cframe), (void *)(L + lj->l_cframe)))
		return false;
	cframe &= ~3ULL;
	if (cframe < w->sp || cframe - w->sp > (1 << 20))
		return false;
	w->ip = lj->vm_start;
	w->sp = cframe;
	return true;
}

/* Appends the current thread's Lua frames to the `n` native frames in
 * `buf` when its process is a known LuaJIT. Returns the new length and
 * says in *walk how the Lua stack was read (enum fg_interp_walk). A global
 * function: the verifier checks it once. */
__noinline __u32 add_luajit(struct stack_buf *buf, __u32 n, __u32 pid, struct fg_stats *st, __u32 *walk)
{
	struct fg_luajit_proc *lj;
	struct lj_walk walk_ = {}, *w = &walk_;
	struct pt_regs *regs;
	__u64 g, *cached, L = 0, base = 0, l[4] = {}, gs[2] = {}, jit_base = 0, pc = 0, dx = 0, ip = 0;
	__s32 vmstate = 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (!luajit_frames || !buf || !st || !walk)
		return n;
	lj = bpf_map_lookup_elem(&luajit_procs, &pid);
	if (!lj)
		return n;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs)
		return n;
	g = lj_global(lj, BPF_CORE_READ(regs, r14));
	if (g) {
		bpf_map_update_elem(&luajit_g, &tid, &g, BPF_ANY);
	} else {
		cached = bpf_map_lookup_elem(&luajit_g, &tid);
		g = cached ? *cached : lj->g_hint;
	}
	if (!g) {
		st->lj_no_thread++;
		*walk = FG_INTERP_NO_THREAD;
		return n;
	}
	if (bpf_probe_read_user(&vmstate, sizeof(vmstate), (void *)(g + lj->g_vmstate)) ||
	    bpf_probe_read_user(gs, sizeof(gs), (void *)(g + lj->g_cur_L))) {
		st->lj_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	/* g_jit_base follows g_cur_L (checked in user space): two references
	 * of 8 bytes, or of 4 in one word. */
	if (lj->gc64) {
		L = gs[0] & LJ_GCVMASK;
		jit_base = gs[1];
	} else {
		L = (__u32)gs[0];
		jit_base = gs[0] >> 32;
	}
	if (!L || bpf_probe_read_user(l, sizeof(l), (void *)(L + lj->l_base))) {
		st->lj_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	/* base and top are pointers; maxstack and stack references, of 4
	 * bytes in one word when not GC64. */
	if (!lj->gc64) {
		l[3] = l[2] >> 32;
		l[2] = (__u32)l[2];
	}
	ip = BPF_CORE_READ(regs, ip);
	dx = BPF_CORE_READ(regs, dx);
	/* l: base, top, maxstack, stack. */
	if (vmstate >= 0 && jit_base) {
		base = jit_base;
		w->flags = FG_LUAJIT_TRACE;
	} else if (!lj_in_vm(buf, n, lj)) {
		st->lj_no_thread++;
		*walk = FG_INTERP_NO_THREAD;
		return n;
	} else if (vmstate == LJ_VMST_INTERP && ip >= lj->vm_start && ip < lj->vm_end && dx > l[3] && dx < l[2]) {
		base = dx;
		pc = BPF_CORE_READ(regs, bx);
	} else {
		base = l[0];
	}
	if (base <= l[3] || base >= l[2]) {
		st->lj_fault++;
		*walk = FG_INTERP_FAULT;
		return n;
	}
	barrier_var(n);
	if (n >= MAX_STACK_DEPTH - 1) {
		st->lj_cut++;
		*walk = FG_INTERP_CUT;
		return n;
	}
	buf->ips[n] = FG_LUAJIT_MARKER;
	w->buf = buf;
	w->pid = pid;
	w->n = n + 1;
	w->run_first = n + 1;
	w->frame = base - 8;
	w->stack = l[3];
	w->next_pc = pc;
	w->fn_ffid = lj->fn_ffid;
	w->fn_pc = lj->fn_pc;
	w->pt_size = lj->pt_size;
	w->pt_sizebc = lj->pt_sizebc;
	w->gc64 = lj->gc64;
	w->fn_gct = lj->fn_gct;
	bpf_loop(LJ_MAX_FRAMES, lj_step, w, 0);
	switch (w->end_how) {
	case FG_INTERP_WHOLE:
		st->lj_whole++;
		break;
	case FG_INTERP_FAULT:
		st->lj_fault++;
		break;
	default:
		w->end_how = FG_INTERP_CUT;
		st->lj_cut++;
	}
	*walk = w->end_how;
	return w->n;
}

#endif
