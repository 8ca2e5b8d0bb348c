/* LuaJIT's part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_LUAJIT_H
#define FGBPF_LUAJIT_H

/* LuaJIT frames follow a user stack's native frames after this marker,
 * one word each, leaf first, the interpreters' contract (bit 63
 * FG_INTERP_ENTRY on the outermost frame of one call into the VM from C):
 * bits 0-43 the address >> 3 of the function's prototype (GCproto), bits
 * 44-59 the index + 1 of the bytecode it runs (0: not known),
 * FG_LUAJIT_TRACE when the frame is where compiled code (a trace) was
 * entered and the sample is in that code. */
#define FG_LUAJIT_MARKER 0xffffffffffffff55ULL
#define FG_LUAJIT_TRACE (1ULL << 60)

/* A process running LuaJIT 2.1 (GC64 or not), as user space found it
 * (src/runtimes/luajit/): the VM's code and its version's offsets. */
struct fg_luajit_proc {
	__u64 vm_start;      /* the VM's assembler code (lj_vm_asm_begin..) */
	__u64 vm_end;
	__u16 gg_dispatch;   /* GG_State: dispatch (DISPATCH, r14, points there) */
	__u16 gg_g;          /* ... g, the global_State */
	__u16 l_glref;       /* lua_State: glref */
	__u16 l_base;
	__u16 l_maxstack;
	__u16 l_stack;
	__u16 g_vmstate;     /* global_State: vmstate (int32) */
	__u16 g_cur_L;
	__u16 g_jit_base;
	__u16 fn_ffid;       /* GCfunc: ffid (u8; 0: a Lua function) */
	__u16 fn_pc;         /* ... pc: its bytecode, after the GCproto */
	__u16 pt_size;       /* sizeof(GCproto) */
	__u16 pt_sizebc;     /* GCproto: sizebc (u32) */
	__u16 l_cframe;      /* lua_State: cframe (the VM's C frame, its rsp) */
	__u16 g_to_j;        /* GG_State: J - g (the jit_State) */
	__u16 j_trace;       /* jit_State: trace (GCRef[], by trace number) */
	__u16 t_mcode;       /* GCtrace: mcode */
	__u16 t_szmcode;     /* GCtrace: szmcode (u32) */
	__u16 gc64;          /* 1: GC64 (references of 8 bytes, frames of two
	                      * slots); 0: references of 4 bytes (below 4 GiB),
	                      * frames of one slot (2.1.0-beta3) */
	__u16 fn_gct;        /* GC objects' type byte (gct); a frame's function
	                      * is checked by it where its slot has no type */
	/* A global_State user space found in the process's memory (its
	 * GG_State), for threads whose r14 was never seen holding DISPATCH
	 * (blocked in C since the capture began); 0: none. */
	__u64 g_hint;
};

#endif
