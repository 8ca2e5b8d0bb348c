//! Perl interpreters in the kernel ([`crate::runtimes::interp`]'s
//! contract): each process the probe sees is checked for libperl
//! ([`crate::runtimes::perl`]); an interpreter's `PL_curinterp` and
//! offsets go into `perl_procs` for the BPF walker
//! (src/runtimes/perl/perl.bpf.h); the statements (COPs) and subs (CVs)
//! its stacks name are read when the walker announces them, and named at
//! the end: `Package::sub (file:line)`.

use std::fs::File;
use std::sync::Arc;

use crate::bpf::{types, FgbpfMaps};
use crate::procs::mem::Mem;
use crate::profile::{Evaluator, Pattern};
use crate::runtimes::interp::{address_of, Interp, Walker};
use crate::runtimes::perl::{self, Interpreter, Reader, Unnamed};
use crate::runtimes::{BpfWalker, Found, Runtime, Settings};

/// FG_PERL_MARKER of src/runtimes/perl/perl.h.
pub(crate) const MARKER: u64 = 0xffff_ffff_ffff_ff54;
/// FG_PERL_CV: the word names a CV, not a COP.
const CV_WORD: u64 = 1 << 62;

pub(crate) struct PerlWalker;

pub(crate) type Perl = Interp<PerlWalker>;

/// How the summary speaks of it.
pub const LANG: super::super::walks::Lang = super::super::walks::Lang {
    name: "Perl",
    whole: "with the Perl stack read whole",
    cut: "cut at the 127-frame limit (its outermost Perl frames are missing)",
    fault: "cut by interpreter memory that could not be read",
    not_read: "Perl frames not read",
    early: "taken before fgbpf was reading the interpreter (native frames only)",
    runtime: "Perl",
    native: "the runops loop's native frames (Perl_runops_standard)",
    outside: "outside Perl code (start-up, a thread with no interpreter, or, where its libc is not fgbpf's, a thread of another interpreter, ithreads, whose subs are not read)",
};

/// What the Perl folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::super::Plumbing::NONE,
    thread_roles: &[],
    marker: Some(MARKER),
    walker_maps: &["perl_reads"],
    id_label: None,
};

/// Its walker, when the capture reads Perl frames.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(BpfWalker::Perl).then(|| Box::new(Perl::new(s.no_lines)) as Box<dyn Runtime>)
}

impl Walker for PerlWalker {
    type Found = Interpreter;
    type Reader = Reader;
    const MARKER: u64 = MARKER;
    const LANG: &'static super::super::walks::Lang = &LANG;
    /// Perl's runops loop: a sub call does not recurse in C, a call from
    /// C (a sort block, a tie, call_sv) runs another loop on another
    /// stack info.
    const EVALUATOR: Evaluator = Evaluator {
        frames: &[Pattern::Is("Perl_runops_standard"), Pattern::Is("Perl_runops_debug")],
        loops: &[],
        jit: &[],
        jit_callers: &[],
    };
    const ANNOUNCED: u32 = 14;

    fn procs<'a, 'obj>(maps: &'a FgbpfMaps<'obj>) -> &'a libbpf_rs::MapMut<'obj> {
        &maps.perl_procs
    }

    fn results(found: &mut Found) -> (&mut Vec<(u32, (u32, u32), String)>, &mut Vec<(u32, String)>) {
        (&mut found.perls, &mut found.perl_unsupported)
    }

    fn described(i: &Interpreter) -> ((u32, u32), String) {
        (i.version, i.binary.clone())
    }

    fn may_be(path: &str) -> bool {
        perl::may_be_interpreter(path)
    }

    fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
        perl::find(file, path, start, offset)
    }

    fn check(mem: &Mem, i: &Interpreter) -> Result<(), String> {
        perl::check(mem, i)
    }

    fn map_value(i: &Interpreter) -> Vec<u8> {
        let l = &i.layout;
        let v = types::fg_perl_proc {
            curinterp: i.curinterp,
            thr_key_at: if i.tsd.get().is_some() { i.thr_key_at } else { 0 },
            tsd_data: i.tsd.get().unwrap_or(0),
            i_curstackinfo: l.i_curstackinfo,
            i_curcop: l.i_curcop,
            i_main_cv: l.i_main_cv,
            si_cxstack: l.si_cxstack,
            si_prev: l.si_prev,
            si_cxix: l.si_cxix,
            si_type: l.si_type,
            cx_size: l.cx_size,
            cx_type: l.cx_type,
            cx_oldcop: l.cx_oldcop,
            cx_sub_cv: l.cx_sub_cv,
            cxt_sub: l.cxt_sub,
            cxt_format: l.cxt_format,
            cxt_eval: l.cxt_eval,
            perlsi_main: l.perlsi_main,
            cx_read: perl::cx_read(l),
            ..Default::default()
        };
        // SAFETY: fg_perl_proc is a plain struct of integers.
        unsafe { plain::as_bytes(&v) }.to_vec()
    }

    fn reader(pid: u32, i: &Interpreter) -> Reader {
        Reader::new(pid, i.layout)
    }

    fn read_word(reader: &mut Reader, word: u64) {
        if word & CV_WORD != 0 {
            reader.read_cv(address_of(word), false);
        } else {
            reader.read_cop(address_of(word), None);
        }
    }

    /// A COP with its CV (`addr2`; bit 0: the main program's), or a CV
    /// alone (`addr2` 2, 3 for the main program's).
    fn read_announced(reader: &mut Reader, addr: u64, addr2: u64) {
        if addr2 & 2 != 0 {
            reader.read_cv(addr, addr2 & 1 != 0);
        } else {
            reader.read_cop(addr, Some((addr2 & !7, addr2 & 1 != 0)));
        }
    }

    fn text(_: &Interpreter, reader: &Reader, word: u64, no_lines: bool) -> Arc<str> {
        let addr = address_of(word);
        let (cv, line, cop_file) = if word & CV_WORD != 0 {
            (Ok(addr), None, None)
        } else {
            match reader.cop(addr) {
                Ok(c) => (c.cv.map(|(cv, _)| cv).ok_or(Unnamed::NotAnnounced), Some(c.line), Some(c.file.as_str())),
                Err(e) => (Err(e), None, None),
            }
        };
        let sub = cv.and_then(|cv| reader.sub(cv));
        let name = match &sub {
            Ok(s) => s.name.as_str(),
            Err(Unnamed::NotSub) => "[perl: not a sub]",
            Err(Unnamed::Gone) => "[perl: process gone before its sub was read]",
            Err(Unnamed::NotAnnounced) => "[perl: sub not announced]",
        };
        let file = cop_file.filter(|f| !f.is_empty()).or(sub.as_ref().ok().map(|s| s.file.as_str()).filter(|f| !f.is_empty())).unwrap_or("?");
        match line {
            Some(line) if !no_lines => format!("{name} ({file}:{line})").into(),
            _ => format!("{name} ({file})").into(),
        }
    }
}
