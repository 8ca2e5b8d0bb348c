/* V8's (Node.js's) part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_V8_H
#define FGBPF_V8_H

/* V8 frame words (kind, payload), each with the identity of the frame's
 * function (v8_identity: a hash of its SharedFunctionInfo's address and
 * two of its fields, which tells apart two functions one address held in
 * turn):
 * INTERPRETED: code in a binary (V8's interpreter and builtins): bits 0-43
 *   the SharedFunctionInfo's address >> 3, 44-57 FG_V8_ID_BITS of the
 *   identity.
 * JIT: code V8 compiled (Sparkplug, Maglev, TurboFan), which may hold
 *   functions inlined into it: bits 0-46 the pc, 47 set for the innermost
 *   frame (else the pc is a return address), 48-57 FG_V8_JIT_ID_BITS of
 *   the identity. The pc is announced (FG_PROC_V8_CODE) with the
 *   function, so that user space reads the code holding it. */
enum fg_v8_kind {
	FG_V8_INTERPRETED = 0,
	FG_V8_JIT = 1,
};
#define FG_V8_ID_BITS 14
#define FG_V8_JIT_ID_BITS 10

/* A process running V8, as user space read its layout from the binary's
 * own post-mortem metadata (v8dbg_*, src/runtimes/v8/): offsets from a
 * frame's rbp and into heap objects, for the walker (v8.bpf.h). */
struct fg_v8_proc {
	__s16 fp_marker;   /* the context, or a typed frame's Smi marker */
	__s16 fp_function; /* a JavaScript frame's JSFunction */
	__u16 fn_shared;   /* JSFunction: its SharedFunctionInfo */
	__u16 sfi_name;    /* SharedFunctionInfo: name_or_scope_info */
	__u16 sfi_script;  /* SharedFunctionInfo: script_or_debug_info */
	__u16 pad[3];
};

#endif
