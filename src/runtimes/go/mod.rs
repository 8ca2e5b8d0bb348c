//! Go programs in profiled processes: which binaries are Go, where their
//! runtime keeps its goroutines, and the layout of a goroutine (`runtime.g`)
//! in the binary's Go version, read from the binary's own DWARF (no table
//! of versions to fall behind). Reading the goroutines of a live process
//! is [`goroutines`]. A binary built with `-ldflags=-s -w` has neither the
//! symbol table that locates `runtime.allgs` nor the DWARF that lays out
//! `runtime.g`: its goroutines are not read, and the capture says why.

mod dwarf;
pub mod goroutines;
pub mod heap;
pub mod labels;
pub mod label_walker;
pub mod walker;

use std::fs::File;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::procs::elf::load_bias;

/// Go's goroutine and thread start, its stack switches; its runtime and
/// standard library's system calls.
pub const PLUMBING: super::Plumbing = super::Plumbing {
    exact: &[
        "runtime.goexit",
        "runtime.main",
        "runtime.mstart",
        "runtime.mstart0",
        "runtime.mstart1",
        "runtime.systemstack",
        "runtime.mcall",
    ],
    prefixes: &[],
    libraries: &["runtime.", "syscall.", "internal/"],
};

/// Where a Go runtime keeps its goroutines in one process, and how one
/// is laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// The Go version the binary was built with, e.g. `go1.19.8`.
    pub version: String,
    /// Run-time addresses of `runtime.allgs` (a `[]*g`: pointer, length,
    /// capacity) and of `runtime.waitReasonStrings` (`[n]string`) with n.
    pub allgs: u64,
    pub reasons: u64,
    pub reasons_len: u32,
    /// Run-time addresses of `runtime.mbuckets` (the heap profile's
    /// buckets) and `runtime.MemProfileRate`, when the binary has both.
    pub heap: Option<(u64, u64)>,
    /// `runtime.disableMemoryProfiling`'s run-time address (Go 1.18 and
    /// later), 0 if none; and the binary's load bias.
    pub heap_off: u64,
    pub bias: u64,
    pub layout: Layout,
    /// What tells the goroutine a thread runs, for the BPF walker; why
    /// not, for a binary whose runtime fgbpf does not know.
    pub running: Result<Running, String>,
}

/// Where a thread's goroutine and its labels are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Running {
    /// g's offset from the thread pointer (fsbase).
    pub tls_g: i64,
    /// Offsets of `runtime.g`'s m, goid and labels, and `runtime.m`'s curg.
    pub g_m: u16,
    pub g_goid: u16,
    pub g_labels: u16,
    pub m_curg: u16,
    /// How pprof's labels are kept; `Ok(None)` when the program has no
    /// runtime/pprof (no goroutine has labels).
    pub labels: Result<Option<LabelLayout>, String>,
}

/// How a Go version keeps a goroutine's pprof labels (what `g.labels`
/// points to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelLayout {
    /// A `map[string]string` (Go up to 1.23).
    Map(LabelMap),
    /// A sorted `[]label` of key and value strings (Go 1.24 and later).
    List(LabelList),
}

/// Offsets into `runtime/pprof.labelMap` of Go 1.24: the slice of its
/// `LabelSet`, the slice header's array and length, and one label's key,
/// value and size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LabelList {
    pub list: u16,
    pub array: u16,
    pub len: u16,
    pub key: u16,
    pub value: u16,
    pub size: u16,
}

/// Offsets into a `map[string]string`: its `runtime.hmap` and buckets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LabelMap {
    pub count: u16,
    pub log2_buckets: u16,
    pub buckets: u16,
    pub old_buckets: u16,
    pub top_hash: u16,
    pub keys: u16,
    pub values: u16,
    pub overflow: u16,
}

/// Offsets into `runtime.g` (and its `stack` and `sched`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub stack_lo: u16,
    pub stack_hi: u16,
    pub sched_sp: u16,
    pub sched_pc: u16,
    pub sched_bp: u16,
    pub syscall_pc: u16,
    pub status: u16,
    pub goid: u16,
    pub wait_reason: u16,
    pub start_pc: u16,
    /// Bytes of a `g` read to reach every field above.
    pub size: u16,
}

/// Whether the file mapped at `start` from `offset` is a Go program, and
/// if so where its goroutines are: `Ok(None)` for a binary that is not Go;
/// `Err(why)` for a Go binary whose goroutines cannot be read.
pub fn find(file: &File, start: u64, offset: u64) -> Result<Option<Runtime>, String> {
    let Some(data) = crate::procs::elf::map(file) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    // Every Go binary has its function table (kept by -s -w too).
    if obj.section_by_name(".gopclntab").is_none() && obj.section_by_name(".data.rel.ro.gopclntab").is_none() {
        return Ok(None);
    }
    let symbol = |name: &str| {
        obj.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| (s.address(), s.size()))
    };
    let Some((allgs, _)) = symbol("runtime.allgs") else {
        return Err(
            "its binary has no symbol table to find runtime.allgs in (built with -ldflags=-s -w); its CPU and thread profiles are not affected"
                .into(),
        );
    };
    let (reasons, reasons_size) = symbol("runtime.waitReasonStrings").unwrap_or((0, 0));
    let found = dwarf::read(&obj, tls_g(&data, &obj))?;
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err("its load address could not be worked out".into());
    };
    let version = build_version(&obj).unwrap_or_else(|| "go (version unknown)".into());
    let heap_off = symbol("runtime.disableMemoryProfiling").map_or(0, |(a, _)| a.wrapping_add(bias));
    let heap = symbol("runtime.mbuckets").zip(symbol("runtime.MemProfileRate")).map(|((b, _), (r, _))| (b.wrapping_add(bias), r.wrapping_add(bias)));
    Ok(Some(Runtime {
        version,
        allgs: allgs.wrapping_add(bias),
        reasons: if reasons == 0 { 0 } else { reasons.wrapping_add(bias) },
        reasons_len: (reasons_size / 16).min(256) as u32,
        heap,
        heap_off,
        bias,
        layout: found.layout,
        running: found.running,
    }))
}

/// Where g is in a thread's TLS, from the thread pointer: a program
/// linked with a C library keeps it in its TLS block (`runtime.tlsg`, in
/// the executable's block, which ends at the thread pointer on x86-64:
/// tests/go.rs's waits, with cgo, and labels, without, are both read);
/// one linked by Go alone has no TLS segment and keeps it at -8, where
/// the runtime's settls put the thread pointer.
fn tls_g(data: &[u8], obj: &object::File<'_>) -> i64 {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(data) else { return -8 };
    let e = elf.endian();
    let Some(tls) = elf.elf_program_headers().iter().find(|p| p.p_type(e) == object::elf::PT_TLS) else {
        return -8;
    };
    // Go's linker puts it first in the segment when it writes no symbol
    // for it (Debian's Go 1.19 with cgo).
    let at = obj.symbols().find(|s| s.name() == Ok("runtime.tlsg")).map_or(0, |s| s.address());
    let align = tls.p_align(e).max(1);
    let size = tls.p_memsz(e).div_ceil(align) * align;
    at as i64 - size as i64
}

/// The Go version, from the build information the linker writes
/// (`.go.buildinfo`: "\xff Go buildinf:", then, since Go 1.18, inline
/// length-prefixed strings, the version first).
fn build_version(obj: &object::File<'_>) -> Option<String> {
    let data = obj.section_by_name(".go.buildinfo")?.data().ok()?;
    let head = data.get(..32)?;
    if !head.starts_with(b"\xff Go buildinf:") || head[15] & 2 == 0 {
        return None;
    }
    let (len, n) = uvarint(data.get(32..)?)?;
    let text = data.get(32 + n..32 + n + (len as usize).min(64))?;
    let text = String::from_utf8_lossy(text);
    text.starts_with("go").then(|| text.chars().filter(|c| c.is_ascii_graphic()).collect())
}

/// A Go unsigned varint and its length.
fn uvarint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().take(10).enumerate() {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvarints_read_as_go_writes_them() {
        assert_eq!(uvarint(&[0x08]), Some((8, 1)));
        assert_eq!(uvarint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(uvarint(&[0xff; 11]), None);
    }

    #[test]
    fn a_binary_that_is_not_go_is_not_taken_for_one() {
        let exe = File::open("/proc/self/exe").unwrap();
        assert_eq!(find(&exe, 0, 0), Ok(None));
    }
}
