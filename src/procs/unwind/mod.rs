//! Unwind tables: `.eh_frame` compiled into the compact rows the BPF stack
//! walker reads (`struct fg_unwind_row` in `src/bpf/fgbpf.h`), for x86_64.
//!
//! Most user code (Debian's glibc, python3.11, `gcc -O2` builds) keeps no
//! frame pointer, so walking by `rbp` loses the stack after the first frame.
//! The DWARF call frame information in `.eh_frame` says, for every
//! instruction, how to find the caller's frame; it is a bytecode that a BPF
//! program cannot interpret, so user space evaluates it once per binary into
//! a flat table (like the OpenTelemetry eBPF profiler and Parca do) and the
//! walker only does a binary search and a few reads per frame.
//!
//! # Row format
//!
//! A [`Table`] is a run of [`Row`]s sorted by `pc`; a row holds from its `pc`
//! to the next row's. `pc` is relative to [`Table::base`], the lowest ELF
//! virtual address with unwind information, so it fits in 32 bits. Per row:
//!
//! * CFA (the caller's `rsp` before the call, the return address is at
//!   CFA - 8): [`CfaType::Rsp`] `rsp + cfa_off`, [`CfaType::Rbp`]
//!   `rbp + cfa_off`, [`CfaType::Plt`] `rsp + cfa_off + ((rip & 15) >= 11 ?
//!   8 : 0)` (the lazy-binding PLT stubs), [`CfaType::End`] (return address
//!   undefined: the outermost frame, `_start`, `clone3`), [`CfaType::None`]
//!   (a gap between FDEs: no information, e.g. code without CFI) and
//!   [`CfaType::Unsupported`] (any other rule: the walker stops there).
//! * caller's `rbp`: [`RbpType::Same`] (unchanged), [`RbpType::AtCfa`] (saved
//!   at `CFA + rbp_off`) or [`RbpType::Unsupported`].
//!
//! # What is supported
//!
//! `DW_CFA_def_cfa` on `rsp`/`rbp`, the PLT expression, `rbp` saved at a CFA
//! offset, undefined return address. Not supported (rows are
//! [`CfaType::Unsupported`], counted in [`Stats`]): CFA on another register
//! (e.g. `r10` in the stack-realigning prologues), other CFA expressions
//! (signal trampolines such as `__restore_rt` read the saved context with
//! `DW_OP_breg7 160; DW_OP_deref`, DRAP prologues use `DW_OP_breg6 -N;
//! DW_OP_deref`), a return address anywhere but CFA - 8. `.debug_frame` is
//! used only when the binary has no `.eh_frame` (inflated when compressed:
//! Go programs have only a compressed `.debug_frame`, whose rows describe
//! callers above Go's outermost functions too: those are made END rows,
//! [`GO_OUTERMOST`]); separate debug files are not looked for. (The
//! overlap clipping runs in no test on real data: no FDEs overlap in any
//! binary measured below.)
//!
//! # PLT variants
//!
//! binutils' `ld` writes `DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0;
//! DW_OP_lit15; DW_OP_and; DW_OP_litT; DW_OP_ge; DW_OP_lit3; DW_OP_shl;
//! DW_OP_plus` with T = 11 for the classic lazy PLT, 9 with IBT (`endbr64`),
//! 5 with MPX's BND prefix and 10 with both. Only T = 11 is found on this
//! machine (1735 expressions over /usr/bin and /usr/lib/x86_64-linux-gnu,
//! every one T = 11). T = 11 becomes one [`CfaType::Plt`] row, as the C
//! header fixes; any other T is expanded into exact [`CfaType::Rsp`] rows,
//! two per 16-byte PLT entry (`rsp + 8` before the push, `rsp + 16` after),
//! so the walker needs no threshold ([`Stats::plt_expanded`] counts them).
//!
//! # Measured (this machine, release build, one test thread)
//!
//! | binary | FDEs | rows (before merge) | gap rows | table | compile |
//! |---|---|---|---|---|---|
//! | libc.so.6 (1.9 MB) | 3,713 | 28,274 (28,616) | 3,404 | 331 KiB | 2.3 ms |
//! | python3.11 (6.8 MB) | 10,221 | 64,575 (65,847) | 4,465 | 757 KiB | 5.5 ms |
//! | bash (1.3 MB) | 2,277 | 20,668 (20,757) | 2,145 | 242 KiB | 3.0 ms |
//! | fgbpf release (40.9 MB, mostly debug info) | 7,022 | 43,795 (49,733) | 6,459 | 513 KiB | 3.5 ms |
//! | gdb (10.4 MB) | 20,333 | 152,363 (155,617) | 13,868 | 1.8 MiB | 14 ms |
//! | node (98.9 MB) | 75,922 | 371,971 (465,761) | 69,352 | 4.4 MiB | 56 ms |
//! | libLLVM-15.so.1 (117 MB) | 98,256 | 979,120 (981,196) | 93,414 | 11.2 MiB | 90 ms |
//!
//! gimli already emits a row only where a rule changes, so merging gains
//! little inside functions; it joins neighbouring functions with the same
//! rule (Rust's and V8's many small leaf functions). Unsupported CFA rows:
//! libc 6 (the `__longjmp` family, CFA on `rdi` with the return address in
//! `rdx`, and the `__restore_rt` signal trampoline), node 103 (56 DRAP
//! `rbp`-deref expressions, the rest CFA on another register) and 8 rows
//! with an unsupported `rbp` rule; none in python3.11, bash, gdb,
//! libLLVM or fgbpf. Every binary has exactly one PLT row (`.plt`); `END`
//! rows: `_start` and libc's two `clone`s.

mod rows;
#[cfg(test)]
mod tests;

use std::fmt;

use object::{Object, ObjectSection};

/// Where the CFA (the caller's stack pointer) is; `enum fg_cfa_type`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CfaType {
    /// No unwind information here: a gap between FDEs.
    None = 0,
    /// CFA = rsp + cfa_off.
    Rsp = 1,
    /// CFA = rbp + cfa_off.
    Rbp = 2,
    /// CFA = rsp + cfa_off + ((rip & 15) >= 11 ? 8 : 0).
    Plt = 3,
    /// The outermost frame: the return address is undefined.
    End = 4,
    /// A rule the walker cannot follow: stop, counted.
    Unsupported = 5,
    /// A signal's return trampoline: the interrupted frame's registers
    /// are in the kernel's signal frame at rsp.
    Signal = 6,
}

/// Where the caller's rbp is; `enum fg_rbp_type`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RbpType {
    /// rbp keeps the caller's value.
    Same = 0,
    /// The caller's rbp is saved at CFA + rbp_off.
    AtCfa = 1,
    /// Another rule: rbp is unknown from here on.
    Unsupported = 2,
}

impl CfaType {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::None,
            1 => Self::Rsp,
            2 => Self::Rbp,
            3 => Self::Plt,
            4 => Self::End,
            5 => Self::Unsupported,
            6 => Self::Signal,
            _ => return None,
        })
    }
}

impl RbpType {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Same,
            1 => Self::AtCfa,
            2 => Self::Unsupported,
            _ => return None,
        })
    }
}

/// One row, byte for byte `struct fg_unwind_row`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Row {
    /// Start of the range, relative to [`Table::base`].
    pub pc: u32,
    pub cfa_off: i32,
    pub rbp_off: i16,
    /// A [`CfaType`].
    pub cfa_type: u8,
    /// An [`RbpType`].
    pub rbp_type: u8,
}

const _: () = assert!(std::mem::size_of::<Row>() == 12);
const _: () = assert!(std::mem::align_of::<Row>() == 4);

// SAFETY: repr(C), plain integers, no padding (4 + 4 + 2 + 1 + 1 = 12).
unsafe impl plain::Plain for Row {}

impl Row {
    pub fn cfa(&self) -> CfaType {
        CfaType::from_u8(self.cfa_type).unwrap_or(CfaType::Unsupported)
    }

    pub fn rbp(&self) -> RbpType {
        RbpType::from_u8(self.rbp_type).unwrap_or(RbpType::Unsupported)
    }
}

/// What a compile met; counts of rows are of the final (merged) table
/// unless they say otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// The section the rows came from: ".eh_frame" or ".debug_frame".
    pub section: &'static str,
    /// FDEs parsed (including empty and overlapping ones).
    pub fdes: usize,
    /// FDEs covering no address (zero length).
    pub fdes_empty: usize,
    /// FDEs starting before the previous one ended: the earlier (lower
    /// start, then longer) one keeps the overlap, the later is clipped.
    pub fdes_overlapping: usize,
    /// FDEs whose CIE or instructions gimli could not read: left out, so
    /// their range is a gap.
    pub fdes_broken: usize,
    /// Rows before merging identical neighbours (gap rows included).
    pub rows_raw: usize,
    /// Rows in the table.
    pub rows: usize,
    /// Gap rows (CFA NONE).
    pub gaps: usize,
    /// PLT rows.
    pub plt: usize,
    /// Rows from PLT expressions with a threshold other than 11, expanded
    /// into plain rsp rows (before merging).
    pub plt_expanded: usize,
    /// END rows (return address undefined).
    pub end: usize,
    /// Signal trampolines' rows (the signal frame's registers followed).
    pub signal: usize,
    /// Rows with an unsupported CFA rule. Of the rows before the final
    /// merge, `unsupported_ra` had the return address elsewhere than CFA - 8
    /// (checked first), `unsupported_expr` a CFA expression other than the
    /// PLT one; the rest a CFA on another register than rsp/rbp.
    pub cfa_unsupported: usize,
    pub unsupported_expr: usize,
    pub unsupported_ra: usize,
    /// Rows with a followable CFA but an unsupported rbp rule.
    pub rbp_unsupported: usize,
    /// Size of the rows in bytes (rows × 12).
    pub bytes: usize,
}

/// A compiled table: rows sorted by pc, relative to `base`.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// The lowest ELF virtual address the table covers.
    pub base: u64,
    pub rows: Vec<Row>,
    pub stats: Stats,
}

/// log2 of the bytes of code per entry of a table's page index
/// (`FG_PAGE_SHIFT` in `src/bpf/fgbpf.h`).
pub const PAGE_SHIFT: u32 = 8;

impl Table {
    /// The page index the BPF walker narrows its row search with: entry
    /// `p` is the number of rows whose pc is at or below `p << PAGE_SHIFT`,
    /// for every page up to the last row's, plus one closing entry (the
    /// row count). The rows that can hold an address of page `p` are then
    /// those from entry `p` - 1 to entry `p + 1` - 1: at most one row per
    /// byte of the page.
    pub fn pages(&self) -> Vec<u32> {
        let Some(last) = self.rows.last() else {
            return vec![0];
        };
        let npages = (last.pc >> PAGE_SHIFT) as usize + 1;
        let mut out = Vec::with_capacity(npages + 1);
        let mut upto = 0usize;
        for p in 0..=npages {
            let at = (p as u64) << PAGE_SHIFT;
            while upto < self.rows.len() && u64::from(self.rows[upto].pc) <= at {
                upto += 1;
            }
            out.push(upto as u32);
        }
        out
    }
}

#[derive(Debug)]
pub enum Error {
    /// The bytes are not an ELF file `object` can read.
    Elf(object::read::Error),
    /// An ELF file for another architecture (or 32-bit x86).
    NotX86_64(object::Architecture),
    /// Neither `.eh_frame` nor a readable `.debug_frame`.
    NoUnwindInfo,
    /// The section could not be walked at all (individual broken FDEs are
    /// only counted).
    Dwarf {
        section: &'static str,
        error: gimli::Error,
    },
    /// An FDE ends more than 4 GiB above the table's base.
    TooLarge { base: u64, end: u64 },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Elf(e) => write!(f, "not a readable ELF file: {e}"),
            Error::NotX86_64(a) => write!(f, "not an x86_64 ELF file (architecture {a:?})"),
            Error::NoUnwindInfo => f.write_str("no .eh_frame nor .debug_frame section"),
            Error::Dwarf { section, error } => write!(f, "cannot read {section}: {error}"),
            Error::TooLarge { base, end } => write!(
                f,
                "unwind information spans {base:#x}..{end:#x}, more than the 4 GiB a row's 32-bit pc can address"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Elf(e) => Some(e),
            Error::Dwarf { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Compiles the unwind table of an x86_64 ELF file (its whole bytes).
pub fn compile(data: &[u8]) -> Result<Table, Error> {
    let file =
        object::read::elf::ElfFile64::<object::Endianness>::parse(data).map_err(Error::Elf)?;
    let arch = file.architecture();
    if arch != object::Architecture::X86_64 || !file.is_little_endian() {
        return Err(Error::NotX86_64(arch));
    }
    let addr_of = |name: &str| file.section_by_name(name).map(|s| s.address());
    let uncompressed = |name: &str| {
        let s = file.section_by_name(name)?;
        let range = s.compressed_file_range().ok()?;
        if range.format != object::CompressionFormat::None {
            return None;
        }
        s.data()
            .ok()
            .filter(|d| !d.is_empty())
            .map(|d| (s.address(), d))
    };

    let mut bases = gimli::BaseAddresses::default();
    if let Some(a) = addr_of(".text") {
        bases = bases.set_text(a);
    }
    if let Some(a) = addr_of(".got") {
        bases = bases.set_got(a);
    }
    let le = gimli::LittleEndian;
    if let Some((addr, bytes)) = uncompressed(".eh_frame") {
        let mut eh = gimli::EhFrame::new(bytes, le);
        eh.set_address_size(8);
        let bases = bases.set_eh_frame(addr);
        rows::build(&eh, &bases, ".eh_frame")
    } else if let Some(bytes) = file
        .section_by_name(".debug_frame")
        .and_then(|s| crate::procs::elf::section_bytes(&s))
        .filter(|b| !b.is_empty())
    {
        // Go writes no .eh_frame, and its .debug_frame compressed.
        let mut df = gimli::DebugFrame::new(&bytes, le);
        df.set_address_size(8);
        let mut table = rows::build(&df, &bases, ".debug_frame")?;
        if file.section_by_name(".gopclntab").is_some() {
            go_outermost(&file, &mut table);
        }
        signal_trampolines(&file, &mut table);
        Ok(table)
    } else {
        Err(Error::NoUnwindInfo)
    }
}

/// The functions Go's own unwinder stops at (its TOPFRAME functions and
/// those that switch stacks): their `.debug_frame` rows describe a caller
/// there is not (`runtime.goexit` at a goroutine's root, `runtime.mstart`
/// at a thread's, `runtime.mcall` and `runtime.systemstack` at the top of
/// the scheduler's stack), which the walker would follow into whatever
/// lies above.
const GO_OUTERMOST: [&str; 7] = [
    "runtime.goexit",
    "runtime.mstart",
    "runtime.rt0_go",
    "runtime.mcall",
    "runtime.systemstack",
    "runtime.morestack",
    "runtime.asmcgocall",
];

/// Makes the ranges of Go's outermost functions END rows (the walk is
/// whole there).
fn go_outermost<'a>(file: &impl object::Object<'a>, table: &mut Table) {
    use object::ObjectSymbol;
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        let name = name.strip_suffix(".abi0").unwrap_or(name);
        if sym.size() > 0 && GO_OUTERMOST.contains(&name) {
            mark(table, sym.address(), sym.address() + sym.size(), CfaType::End);
            table.stats.end += 1;
        }
    }
}

/// The signal return trampolines whose CFI does not say so (Go's, which
/// its runtime gives the kernel as sa_restorer when no C library does):
/// SIGNAL rows from a byte before them, where a return address to them
/// is looked up. Those of `.eh_frame` (glibc's `__restore_rt`) are marked
/// by their CFI's `S` augmentation ([`rows`]).
const SIGNAL_TRAMPOLINES: [&str; 2] = ["runtime.sigreturn", "runtime.sigreturn__sigaction"];

fn signal_trampolines<'a>(file: &impl object::Object<'a>, table: &mut Table) {
    use object::ObjectSymbol;
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        let name = name.strip_suffix(".abi0").unwrap_or(name);
        if sym.size() > 0 && sym.address() > 0 && SIGNAL_TRAMPOLINES.contains(&name) {
            mark(table, sym.address() - 1, sym.address() + sym.size(), CfaType::Signal);
            table.stats.signal += 1;
        }
    }
}

/// Makes [start, end) (ELF virtual addresses) one row of `cfa_type`, the
/// rows after it unchanged.
fn mark(table: &mut Table, start: u64, end: u64, cfa_type: CfaType) {
    let (Some(from), Some(to)) = (
        start.checked_sub(table.base).and_then(|o| u32::try_from(o).ok()),
        end.checked_sub(table.base).and_then(|o| u32::try_from(o).ok()),
    ) else {
        return;
    };
    let after = lookup(table, end).copied();
    let lo = table.rows.partition_point(|r| r.pc < from);
    let hi = table.rows.partition_point(|r| r.pc < to);
    let mut put = vec![Row {
        pc: from,
        cfa_type: cfa_type as u8,
        ..Row::default()
    }];
    if table.rows.get(hi).is_none_or(|r| r.pc != to) {
        put.push(Row {
            pc: to,
            ..after.unwrap_or_default()
        });
    }
    table.rows.splice(lo..hi, put);
    table.stats.rows = table.rows.len();
}

/// The row that applies at `elf_vaddr` (an ELF virtual address, not a
/// runtime one): the last row whose pc is at or below it, as the BPF walker
/// finds it. `None` below the table's base or past 4 GiB above it; past the
/// last FDE the final gap row answers.
pub fn lookup(table: &Table, elf_vaddr: u64) -> Option<&Row> {
    let off = elf_vaddr.checked_sub(table.base)?;
    let off = u32::try_from(off).ok()?;
    let i = table.rows.partition_point(|r| r.pc <= off);
    i.checked_sub(1).map(|i| &table.rows[i])
}

/// [`lookup`] as the BPF walker does it (`row_of` in
/// `src/bpf/unwind.bpf.h`): through the page index `pages` (from
/// [`Table::pages`]), then a search of at most `FG_PAGE_STEPS` (9)
/// halvings among the page's rows. For tests: both must agree everywhere.
pub fn lookup_paged<'a>(table: &'a Table, pages: &[u32], elf_vaddr: u64) -> Option<&'a Row> {
    let rel = u32::try_from(elf_vaddr.checked_sub(table.base)?).ok()?;
    let npages = pages.len() as u64 - 1;
    let page = u64::from(rel >> PAGE_SHIFT);
    let upto = if page < npages {
        let (mut lo, mut hi) = (pages[page as usize], pages[page as usize + 1]);
        for _ in 0..9 {
            if lo >= hi {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            if table.rows[mid as usize].pc <= rel {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        assert!(lo >= hi, "a page's rows outlast the walker's search");
        lo
    } else {
        table.rows.len() as u32
    };
    upto.checked_sub(1).map(|i| &table.rows[i as usize])
}
