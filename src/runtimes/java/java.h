/* HotSpot's (Java's) part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_JAVA_H
#define FGBPF_JAVA_H

/* HotSpot frame words (kind, payload):
 * COMPILED: bits 0-21 the segment index of the nmethod's heap block
 *   ((block - code_lo) >> log2_seg), 22-38 the pc's offset from the
 *   CodeBlob (FG_JAVA_OFF_MAX: at or beyond), 39-57 compile_id & 0x7ffff.
 * INTERPRETED: bits 0-43 the Method* >> 3, 44-57 the bci (FG_JAVA_BCI_NONE:
 *   unknown, or a native method).
 * STUB: any other code blob, as COMPILED without the compile id. */
enum fg_java_kind {
	FG_JAVA_COMPILED = 0,
	FG_JAVA_INTERPRETED = 1,
	FG_JAVA_STUB = 2,
};
#define FG_JAVA_SEG_BITS 22
#define FG_JAVA_OFF_BITS 17
#define FG_JAVA_OFF_MAX ((1U << FG_JAVA_OFF_BITS) - 1)
#define FG_JAVA_ID_BITS 19
#define FG_JAVA_BCI_NONE 0x3fff

enum fg_java_flags {
	/* JDK 23+: CodeBlob's code range is int offsets from the blob, and
	 * nmethod entries are u16 offsets (else pointers). */
	FG_JAVA_CODE_OFFSETS = 1,
	/* JDK 25: CodeBlob::_kind says what a blob is (else its name). */
	FG_JAVA_HAS_KIND = 2,
	/* CodeBlob::_frame_complete_offset is an int16 (JDK 25), else int. */
	FG_JAVA_FC_INT16 = 4,
};

#define FG_JAVA_MAX_HEAPS 4
#define FG_JAVA_NONE_OFF 0xffff

/* A HotSpot JVM, as user space read it from the JVM's own vmStructs
 * (src/runtimes/java/): where its code is and the offsets of its version,
 * for the walker (java.bpf.h). */
struct fg_java_proc {
	__u64 code_lo, code_hi;           /* CodeCache::_low_bound, _high_bound */
	__u64 heap_lo[FG_JAVA_MAX_HEAPS]; /* each CodeHeap's reserved bounds */
	__u64 heap_hi[FG_JAVA_MAX_HEAPS];
	__u64 segmap[FG_JAVA_MAX_HEAPS];  /* its segment map: one byte per segment */
	__u64 interp_lo, interp_hi;       /* the Interpreter's code */
	__u64 call_stub_ra;               /* StubRoutines::_call_stub_return_address */
	__u64 name_nmethod;               /* CodeBlob::_name of nmethods */
	__u32 nheaps;
	__u8 log2_seg;
	__u8 heap_block_size;             /* sizeof(HeapBlock) */
	__u8 major;                       /* the JDK's feature version */
	__u8 flags;                       /* enum fg_java_flags */
	__u16 cb_name, cb_kind, cb_frame_size, cb_frame_complete;
	__u16 cb_code_begin, cb_code_end;
	__u16 nm_compile_id, nm_entry, nm_verified_entry, nm_osr_entry;
	__u16 nm_deopt_handler, nm_orig_pc_offset;
	__u16 m_const_method, cm_size, cm_code_size;
	__u16 pad;
};

#endif
