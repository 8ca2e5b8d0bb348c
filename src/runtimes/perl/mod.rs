//! Perl interpreters in profiled processes (Debian's `/usr/bin/perl`,
//! which links `libperl.so.5.36`, and any program embedding libperl):
//! which processes run one and which version (libperl's own `PL_revision`
//! and `PL_version`), where the BPF walker (src/runtimes/perl/perl.bpf.h)
//! finds the interpreter (`PL_curinterp`, a dynamic symbol of threaded
//! builds), the offsets of its version (layouts.rs, generated from the
//! version's own headers by scripts/perl-layouts.sh, which a test here
//! runs to compare), the check before a layout is trusted (the live
//! interpreter's bottom stack info is the main one, its main CV a CV),
//! where each ithread's own interpreter is ([`tsd`]), and naming the subs
//! and statements (COPs) it records. Every byte read from
//! the target is untrusted: the SVs' types are checked, lengths capped,
//! text decoded lossily.

pub mod tsd;
pub mod walker;
use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable};

use crate::procs::elf::load_bias;
use crate::procs::mem::Mem;

/// Offsets into the structures of one Perl version (threaded, x86_64),
/// and the constants of its headers, as scripts/perl-layouts.sh writes
/// them into layouts.rs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// (revision, version): (5, 36).
    pub version: (u32, u32),
    /// sizeof(struct interpreter), and its Icurstackinfo, Icurcop and
    /// Imain_cv.
    pub interp_size: u64,
    pub i_curstackinfo: u16,
    pub i_curcop: u16,
    pub i_main_cv: u16,
    /// struct stackinfo (PERL_SI).
    pub si_cxstack: u16,
    pub si_prev: u16,
    pub si_cxix: u16,
    pub si_type: u16,
    /// PERL_CONTEXT: its size, cx_type, blk_oldcop, blk_sub.cv.
    pub cx_size: u16,
    pub cx_type: u16,
    pub cx_oldcop: u16,
    pub cx_sub_cv: u16,
    /// COP: cop_line, cop_file (a C string in threaded builds).
    pub cop_line: u16,
    pub cop_file: u16,
    /// SV head: sv_any, sv_flags, sv_u.
    pub sv_any: u16,
    pub sv_flags: u16,
    pub sv_u: u16,
    /// XPVCV: xcv_stash, xcv_gv_u (a GV, or a name HEK when CvNAMED),
    /// xcv_file, xcv_flags.
    pub xcv_stash: u16,
    pub xcv_gv_u: u16,
    pub xcv_file: u16,
    pub xcv_flags: u16,
    /// XPVGV: its name HEK, its stash.
    pub xgv_namehek: u16,
    pub xgv_stash: u16,
    /// The stash's aux struct: its name (a HEK, or HEKs when counted);
    /// the hash's xhv_max; whether the aux struct follows the bucket
    /// array (before 5.36: `HvARRAY + xhv_max + 1` pointers) rather than
    /// being in the hash's body (xpvhv_with_aux).
    pub xhv_aux_name: u16,
    pub xhv_aux_name_count: u16,
    pub xhv_max: u16,
    pub aux_after_array: bool,
    /// HEK: hek_len, hek_key.
    pub hek_len: u16,
    pub hek_key: u16,
    pub svt_pvcv: u32,
    pub svt_pvgv: u32,
    pub svt_pvhv: u32,
    pub cvf_named: u32,
    pub svf_ook: u32,
    pub cxt_sub: u8,
    pub cxt_format: u8,
    pub cxt_eval: u8,
    pub perlsi_main: u8,
}

mod layouts;
pub use layouts::{LAYOUTS, LAYOUT_536};

/// The bytes of a PERL_CONTEXT the walker reads: to the end of the last
/// field it reads.
pub fn cx_read(l: &Layout) -> u16 {
    l.cx_type.max(l.cx_oldcop).max(l.cx_sub_cv) + 8
}

/// The known layout of Perl `version` (revision, version).
pub fn layout(version: (u32, u32)) -> Option<Layout> {
    LAYOUTS.iter().find(|l| l.version == version).copied()
}

/// The versions fgbpf reads, for messages and docs/runtimes/perl.md.
pub const SUPPORTED: &str = "5.32, 5.36 and 5.40 (threaded)";

/// A Perl interpreter found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    pub version: (u32, u32),
    /// `5.36.0`.
    pub release: String,
    /// Address of PL_curinterp in the process.
    pub curinterp: u64,
    /// Address of PL_thr_key, and where the process's libc keeps a
    /// thread's value of it ([`tsd`]), once [`check`] has seen the process:
    /// `None` when its other threads' interpreters are not read.
    pub thr_key_at: u64,
    pub tsd: Cell<Option<u16>>,
    pub layout: Layout,
    /// The file it was found in, untrusted.
    pub binary: String,
}

/// Whether a mapped file may hold the interpreter: `libperl.so.5.36`, or a
/// `perl` linked statically, by name.
pub fn may_be_interpreter(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.starts_with("libperl") || base.starts_with("perl")
}

/// Looks for the interpreter in a file mapped executable at `start` from
/// file offset `offset`: `Ok(None)` when it is none. `Err`: it is one, but
/// one fgbpf cannot read, and why. Its version is libperl's own
/// (`PL_revision`, `PL_version`, `PL_subversion`, read from the file).
pub fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
    let Some(data) = crate::procs::elf::map(file) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let Some(table) = obj.dynamic_symbol_table() else {
        return Ok(None);
    };
    let symbol = |name: &str| table.symbols().find(|s| s.name() == Ok(name) && s.address() != 0);
    let Some(curinterp) = symbol("PL_curinterp") else {
        return Ok(None);
    };
    let byte = |name: &str| -> Option<u8> {
        let s = symbol(name)?;
        obj.sections()
            .find(|sec| sec.address() <= s.address() && s.address() < sec.address() + sec.size())
            .and_then(|sec| sec.data_range(s.address(), 1).ok().flatten())
            .map(|b| b[0])
    };
    let (Some(rev), Some(ver), Some(sub)) = (byte("PL_revision"), byte("PL_version"), byte("PL_subversion")) else {
        return Err("Perl, whose version could not be read from libperl (PL_revision, PL_version)".into());
    };
    let version = (u32::from(rev), u32::from(ver));
    let release = format!("{rev}.{ver}.{sub}");
    // An unthreaded build keeps the interpreter's variables as globals.
    let thr_key = symbol("PL_thr_key").filter(|_| symbol("PL_curstackinfo").is_none());
    let Some(thr_key) = thr_key else {
        return Err(format!("Perl {release}, an unthreaded build (fgbpf reads {SUPPORTED})"));
    };
    let Some(layout) = layout(version) else {
        return Err(format!("Perl {release} (fgbpf reads {SUPPORTED})"));
    };
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err("its load address could not be worked out".into());
    };
    Ok(Some(Interpreter {
        version,
        release,
        curinterp: curinterp.address().wrapping_add(bias),
        thr_key_at: thr_key.address().wrapping_add(bias),
        tsd: Cell::new(None),
        layout,
        binary: path.to_string(),
    }))
}

/// A test hook: the stack info type the check expects at the bottom of
/// the interpreter's stack (default the layout's PERLSI_MAIN).
/// tests/perl.rs sets another to see an interpreter refused.
const EXPECT_ENV: &str = "FGBPF_TEST_PERL_MAIN_SI";

/// How many stack infos the check follows down to the main one.
const MAX_STACK_INFOS: usize = 64;

/// Reads what the layout says the process must hold before the walker
/// trusts it: PL_curinterp is none (not constructed yet: not checked
/// yet), or an interpreter whose stack infos end at the main one
/// (PERLSI_MAIN) and whose main CV, once there, is a CV. `Err`: why the
/// layout does not fit the process. Once it does, learns whether the
/// process's other threads' interpreters can be read ([`tsd`]).
pub fn check(mem: &Mem, i: &Interpreter) -> Result<(), String> {
    check_layout(mem, i)?;
    i.tsd.set(tsd::for_process(mem));
    Ok(())
}

fn check_layout(mem: &Mem, i: &Interpreter) -> Result<(), String> {
    let l = &i.layout;
    let fail = |why: String| Err(format!("Perl {}: the layout's check failed ({why})", i.release));
    let Some(interp) = mem.u64(i.curinterp) else {
        return fail("PL_curinterp could not be read".into());
    };
    if interp == 0 {
        return Ok(());
    }
    let Some(mut si) = mem.u64(interp + u64::from(l.i_curstackinfo)) else {
        return fail("the interpreter could not be read".into());
    };
    if si == 0 {
        return Ok(());
    }
    let expect = std::env::var(EXPECT_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(i32::from(l.perlsi_main));
    let mut bottom = None;
    for _ in 0..MAX_STACK_INFOS {
        let (Some(prev), Some(kind)) = (mem.u64(si + u64::from(l.si_prev)), mem.i32(si + u64::from(l.si_type))) else {
            return fail("a stack info could not be read".into());
        };
        if prev == 0 {
            bottom = Some(kind);
            break;
        }
        si = prev;
    }
    match bottom {
        Some(kind) if kind == expect => {}
        Some(kind) => return fail(format!("its bottom stack info's type is {kind}, not {expect} (PERLSI_MAIN)")),
        None => return fail(format!("no bottom stack info within {MAX_STACK_INFOS}")),
    }
    let main_cv = mem.u64(interp + u64::from(l.i_main_cv)).unwrap_or(0);
    if main_cv != 0 && sv_type(mem, l, main_cv) != Some(l.svt_pvcv) {
        return fail("PL_main_cv is not a CV".into());
    }
    Ok(())
}

/// An SV's type (SVTYPEMASK).
fn sv_type(mem: &Mem, l: &Layout, sv: u64) -> Option<u32> {
    mem.u32(sv + u64::from(l.sv_flags)).map(|f| f & 0x1f)
}

const MAX_TEXT: usize = 512;

/// A sub as its CV says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sub {
    /// `Package::name`, or `<main>` for the main program.
    pub name: String,
    /// CvFILE's base name; empty when unknown.
    pub file: String,
}

/// A statement (COP): its line and file, and the sub it is in when
/// announced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cop {
    pub line: u32,
    pub file: String,
    pub cv: Option<(u64, bool)>,
}

/// Why a frame could not be named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unnamed {
    Gone,
    NotSub,
    NotAnnounced,
}

/// The subs and statements of one Perl process, read as they are met.
pub struct Reader {
    mem: Option<Mem>,
    layout: Layout,
    subs: HashMap<u64, Result<Sub, Unnamed>>,
    cops: HashMap<u64, Result<Cop, Unnamed>>,
}

impl Reader {
    pub fn new(pid: u32, layout: Layout) -> Self {
        Reader {
            mem: Mem::open(pid).ok(),
            layout,
            subs: HashMap::new(),
            cops: HashMap::new(),
        }
    }

    /// Reads a sub's CV, once.
    pub fn read_cv(&mut self, cv: u64, main: bool) {
        if self.subs.contains_key(&cv) {
            return;
        }
        let s = match self.mem.as_ref() {
            None => Err(Unnamed::Gone),
            Some(mem) => read_sub(mem, &self.layout, cv, main).ok_or(if mem.u8(cv).is_some() { Unnamed::NotSub } else { Unnamed::Gone }),
        };
        self.subs.insert(cv, s);
    }

    /// Reads a COP, once, and the sub it is in (`cv`: its CV, and whether
    /// it is the main program's) when known.
    pub fn read_cop(&mut self, cop: u64, cv: Option<(u64, bool)>) {
        if let Some((cv, main)) = cv {
            self.read_cv(cv, main);
        }
        match self.cops.get_mut(&cop) {
            Some(Ok(c)) => {
                if c.cv.is_none() {
                    c.cv = cv;
                }
                return;
            }
            Some(Err(_)) => return,
            None => {}
        }
        let c = match self.mem.as_ref() {
            None => Err(Unnamed::Gone),
            Some(mem) => {
                let l = &self.layout;
                match mem.u32(cop + u64::from(l.cop_line)) {
                    None => Err(Unnamed::Gone),
                    Some(line) => {
                        let file = mem.u64(cop + u64::from(l.cop_file)).filter(|&p| p != 0).and_then(|p| mem.cstr(p, MAX_TEXT)).unwrap_or_default();
                        Ok(Cop { line, file: base_name(&file), cv })
                    }
                }
            }
        };
        self.cops.insert(cop, c);
    }

    pub fn sub(&self, cv: u64) -> Result<&Sub, Unnamed> {
        match self.subs.get(&cv) {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(*e),
            None => Err(Unnamed::NotAnnounced),
        }
    }

    pub fn cop(&self, cop: u64) -> Result<&Cop, Unnamed> {
        match self.cops.get(&cop) {
            Some(Ok(c)) => Ok(c),
            Some(Err(e)) => Err(*e),
            None => Err(Unnamed::NotAnnounced),
        }
    }
}

fn base_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// A HEK's text, lossily, its length capped.
fn hek(mem: &Mem, l: &Layout, hek: u64) -> Option<String> {
    if hek == 0 {
        return None;
    }
    let len = mem.i32(hek + u64::from(l.hek_len))?;
    let len = usize::try_from(len).ok()?.min(MAX_TEXT);
    let bytes = mem.bytes(hek + u64::from(l.hek_key), len)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The most buckets a stash is believed to have.
const MAX_BUCKETS: u64 = 1 << 28;

/// A stash's name (HvNAME).
fn stash_name(mem: &Mem, l: &Layout, hv: u64) -> Option<String> {
    if hv == 0 || sv_type(mem, l, hv)? != l.svt_pvhv || mem.u32(hv + u64::from(l.sv_flags))? & l.svf_ook == 0 {
        return None;
    }
    let any = mem.u64(hv + u64::from(l.sv_any))?;
    let aux = if l.aux_after_array {
        let array = mem.u64(hv + u64::from(l.sv_u))?;
        let max = mem.u64(any + u64::from(l.xhv_max))?;
        if array == 0 || max >= MAX_BUCKETS {
            return None;
        }
        array.checked_add((max + 1) * 8)?
    } else {
        any
    };
    let count = mem.i32(aux + u64::from(l.xhv_aux_name_count))?;
    let name = mem.u64(aux + u64::from(l.xhv_aux_name))?;
    let name = if count != 0 { mem.u64(name)? } else { name };
    hek(mem, l, name)
}

fn read_sub(mem: &Mem, l: &Layout, cv: u64, main: bool) -> Option<Sub> {
    if sv_type(mem, l, cv)? != l.svt_pvcv {
        return None;
    }
    let any = mem.u64(cv + u64::from(l.sv_any))?;
    let file = mem.u64(any + u64::from(l.xcv_file)).filter(|&p| p != 0).and_then(|p| mem.cstr(p, MAX_TEXT)).unwrap_or_default();
    let file = base_name(&file);
    if main {
        return Some(Sub { name: "<main>".into(), file });
    }
    let flags = mem.u32(any + u64::from(l.xcv_flags))?;
    let gv_u = mem.u64(any + u64::from(l.xcv_gv_u))?;
    let (name, stash) = if flags & l.cvf_named != 0 {
        (hek(mem, l, gv_u), mem.u64(any + u64::from(l.xcv_stash))?)
    } else if gv_u != 0 && sv_type(mem, l, gv_u)? == l.svt_pvgv {
        let gany = mem.u64(gv_u + u64::from(l.sv_any))?;
        (hek(mem, l, mem.u64(gany + u64::from(l.xgv_namehek))?), mem.u64(gany + u64::from(l.xgv_stash))?)
    } else {
        (None, mem.u64(any + u64::from(l.xcv_stash))?)
    };
    let name = name.unwrap_or_else(|| "__ANON__".into());
    let name = match stash_name(mem, l, stash) {
        Some(pkg) => format!("{pkg}::{name}"),
        None => name,
    };
    Some(Sub { name, file })
}

#[cfg(test)]
mod tests;
