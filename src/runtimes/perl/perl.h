/* Perl's part of what fgbpf's BPF object and its loader agree on
 * (src/bpf/fgbpf.h includes it): the words its walker writes and the
 * layout user space gives it. */
#ifndef FGBPF_PERL_H
#define FGBPF_PERL_H

/* Perl frames follow a user stack's native frames after this marker, one
 * word each, leaf first, the same contract again (bit 63 FG_INTERP_ENTRY
 * on the outermost frame of one stack info, one call of the runops
 * loop): bits 0-43 the address >> 3 of the frame's current COP (the
 * statement it runs, which user space reads for file and line, announced
 * with the sub's CV), or with FG_PERL_CV of the sub's CV when it has no
 * COP. */
#define FG_PERL_MARKER 0xffffffffffffff54ULL
#define FG_PERL_CV (1ULL << 62)

/* A process running Perl (threaded, libperl), as user space found it
 * (src/runtimes/perl/): where PL_curinterp is and its version's offsets. */
struct fg_perl_proc {
	__u64 curinterp;     /* &PL_curinterp */
	/* &PL_thr_key, whose value in a thread's thread-specific data
	 * (pthread_getspecific) is its own interpreter (ithreads), at
	 * fsbase + tsd_data + 16 * key for the first 32 keys (glibc's struct
	 * pthread). 0: only the main thread is read, with PL_curinterp's. */
	__u64 thr_key_at;
	__u16 i_curstackinfo; /* struct interpreter: Icurstackinfo */
	__u16 i_curcop;      /* ... Icurcop */
	__u16 i_main_cv;     /* ... Imain_cv */
	__u16 si_cxstack;    /* struct stackinfo: si_cxstack */
	__u16 si_prev;
	__u16 si_cxix;       /* I32 */
	__u16 si_type;       /* I32 */
	__u16 cx_size;       /* sizeof(PERL_CONTEXT) */
	__u16 cx_type;       /* U8, CXTYPEMASK 0xf */
	__u16 cx_oldcop;     /* blk_oldcop */
	__u16 cx_sub_cv;     /* blk_sub.cv */
	__u8 cxt_sub;
	__u8 cxt_format;
	__u8 cxt_eval;
	__u8 perlsi_main;
	__u16 tsd_data;      /* struct pthread: specific_1stblock[0].data */
	__u16 cx_read;       /* bytes of a PERL_CONTEXT read, to its last field read */
	__u16 pad;
};

#endif
