/* PHP's part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_PHP_H
#define FGBPF_PHP_H

/* PHP frames follow a user stack's native frames after this marker, one
 * word each, leaf first, the same contract again (bit 63 FG_INTERP_ENTRY on a
 * frame that began a call of execute_ex, ZEND_CALL_TOP): bits 0-43 the
 * zend_function's address >> 3, bits 44-61 bits 3-20 of the frame's
 * opline (user space finds the op from the function's opcodes). */
#define FG_PHP_MARKER 0xffffffffffffff52ULL
#define FG_PHP_CALL_TOP (1U << 17) /* in the frame's This.u1.type_info */

/* A process running PHP (NTS), as user space found it (src/runtimes/php/):
 * where executor_globals.current_execute_data is, and its version's
 * offsets into zend_execute_data. */
struct fg_php_proc {
	__u64 current;       /* &executor_globals.current_execute_data */
	__u16 ex_opline;
	__u16 ex_func;
	__u16 ex_type_info;  /* This.u1.type_info: the call's flags */
	__u16 ex_prev;       /* prev_execute_data */
	__u16 ex_size;       /* bytes of zend_execute_data read, to ex_prev */
	__u16 pad[3];
};

#endif
