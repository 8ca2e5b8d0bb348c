/* Ruby's part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_RUBY_H
#define FGBPF_RUBY_H

/* Ruby frames follow a user stack's native frames after this marker, one
 * word each, leaf first, as Python's do after theirs (the same contract:
 * bit 63 FG_INTERP_ENTRY on the outermost frame of one call of the VM, which
 * user space puts in place of that rb_vm_exec frame): bits 0-43 the
 * object's address >> 3, an instruction sequence's (rb_iseq_t), or with
 * FG_RB_CFUNC a C method's entry (rb_callable_method_entry_t); bits
 * 44-61 for an iseq, bits 3-20 of the frame's pc (user space finds the
 * instruction from the iseq's start). */
#define FG_RB_MARKER 0xffffffffffffff51ULL
#define FG_RB_CFUNC (1ULL << 62)
#define FG_RB_PC_BITS 18

/* rb_control_frame_t's ep[0] flags (vm_core.h, the same 2.7 to 3.4). */
#define FG_RB_FRAME_MAGIC_MASK 0x7fff0001ULL
#define FG_RB_FRAME_MAGIC_METHOD 0x11110001ULL
#define FG_RB_FRAME_MAGIC_CFUNC 0x55550001ULL
#define FG_RB_FRAME_FLAG_FINISH 0x0020ULL
#define FG_RB_FRAME_FLAG_CFRAME 0x0080ULL

/* A process running Ruby, as user space found it (src/runtimes/ruby/):
 * where its thread's execution context is and its version's offsets. From
 * 3.0 the context is libruby's thread-local ruby_current_ec, found through
 * the thread's DTV: the module id ld.so wrote in libruby's DTPMOD64 slot,
 * the variable's offset in the module's block. Ruby 2.7 (modid_at 0)
 * keeps it in the thread's rb_thread_t, one of the VM's living_threads,
 * told by its thread_id (its pthread_t: the thread's fsbase). */
struct fg_rb_proc {
	__u64 modid_at;      /* the DTPMOD64 slot's address; 0: 2.7 */
	__u64 tls_off;       /* ruby_current_ec in libruby's TLS block */
	__u64 ec_at;         /* 2.7: &ruby_current_execution_context_ptr */
	__u64 vm_at;         /* 2.7: &ruby_current_vm_ptr */
	__u16 ec_vm_stack;   /* rb_execution_context_t: vm_stack */
	__u16 ec_stack_size; /* ... vm_stack_size, in VALUEs */
	__u16 ec_cfp;        /* ... cfp, the current control frame */
	__u16 cfp_size;      /* sizeof(rb_control_frame_t) */
	__u16 cfp_pc;
	__u16 cfp_iseq;
	__u16 cfp_ep;
	__u16 ec_thread_ptr; /* 2.7: rb_execution_context_t's thread_ptr */
	__u16 vm_threads;    /* 2.7: rb_vm_t's living_threads (a list_head) */
	__u16 th_node;       /* 2.7: rb_thread_t's vmlt_node */
	__u16 th_thread_id;  /* 2.7: ... thread_id (pthread_t) */
	__u16 th_ec;         /* 2.7: ... ec */
};

#endif
