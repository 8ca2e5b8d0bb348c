/* Prints the offsets fgbpf's Perl walker reads (src/runtimes/perl/), as
 * Rust fields, from the Perl headers it is compiled against
 * (scripts/perl-layouts.sh compiles it with `perl -MExtUtils::Embed -e
 * ccopts`). Threaded (ithreads) and unthreaded builds differ: the
 * interpreter's variables are fields of struct interpreter only in a
 * threaded one, which is all this reads. */
#include <stddef.h>
#include <stdio.h>
#include "EXTERN.h"
#include "perl.h"

#ifndef MULTIPLICITY
#error "fgbpf reads threaded (MULTIPLICITY) Perl builds"
#endif

#define F(name, expr) printf("    %s: %lu,\n", name, (unsigned long)(expr))

int main(void)
{
	printf("    version: (%d, %d),\n", PERL_REVISION, PERL_VERSION);
	F("interp_size", sizeof(struct interpreter));
	F("i_curstackinfo", offsetof(struct interpreter, Icurstackinfo));
	F("i_curcop", offsetof(struct interpreter, Icurcop));
	F("i_main_cv", offsetof(struct interpreter, Imain_cv));
	F("si_cxstack", offsetof(struct stackinfo, si_cxstack));
	F("si_prev", offsetof(struct stackinfo, si_prev));
	F("si_cxix", offsetof(struct stackinfo, si_cxix));
	F("si_type", offsetof(struct stackinfo, si_type));
	F("cx_size", sizeof(PERL_CONTEXT));
	F("cx_type", offsetof(PERL_CONTEXT, cx_u.cx_subst.sbu_type));
	F("cx_oldcop", offsetof(PERL_CONTEXT, cx_u.cx_blk.blku_oldcop));
	F("cx_sub_cv", offsetof(PERL_CONTEXT, cx_u.cx_blk.blk_u.blku_sub.cv));
	F("cop_line", offsetof(COP, cop_line));
	F("cop_file", offsetof(COP, cop_file));
	F("sv_any", offsetof(SV, sv_any));
	F("sv_flags", offsetof(SV, sv_flags));
	F("sv_u", offsetof(SV, sv_u));
	F("xcv_stash", offsetof(XPVCV, xcv_stash));
	F("xcv_gv_u", offsetof(XPVCV, xcv_gv_u));
	F("xcv_file", offsetof(XPVCV, xcv_file));
	F("xcv_flags", offsetof(XPVCV, xcv_flags));
	F("xgv_namehek", offsetof(XPVGV, xiv_u.xivu_namehek));
	F("xgv_stash", offsetof(XPVGV, xnv_u.xgv_stash));
#if PERL_VERSION >= 36
	/* The aux struct in the hash's body. */
	F("xhv_aux_name", offsetof(struct xpvhv_with_aux, xhv_aux.xhv_name_u));
	F("xhv_aux_name_count", offsetof(struct xpvhv_with_aux, xhv_aux.xhv_name_count));
	F("xhv_max", offsetof(XPVHV, xhv_max));
	printf("    aux_after_array: false,\n");
#else
	/* Before 5.36 the aux struct follows the bucket array (HvAUX). */
	F("xhv_aux_name", offsetof(struct xpvhv_aux, xhv_name_u));
	F("xhv_aux_name_count", offsetof(struct xpvhv_aux, xhv_name_count));
	F("xhv_max", offsetof(XPVHV, xhv_max));
	printf("    aux_after_array: true,\n");
#endif
	F("hek_len", offsetof(HEK, hek_len));
	F("hek_key", offsetof(HEK, hek_key));
	F("svt_pvcv", SVt_PVCV);
	F("svt_pvgv", SVt_PVGV);
	F("svt_pvhv", SVt_PVHV);
	F("cvf_named", CVf_NAMED);
	F("svf_ook", SVf_OOK);
	F("cxt_sub", CXt_SUB);
	F("cxt_format", CXt_FORMAT);
	F("cxt_eval", CXt_EVAL);
	F("perlsi_main", PERLSI_MAIN);
	return 0;
}
