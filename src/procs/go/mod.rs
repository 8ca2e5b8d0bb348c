//! Go programs in profiled processes: which binaries are Go, where their
//! runtime keeps its goroutines, and the layout of a goroutine (`runtime.g`)
//! in the binary's Go version, read from the binary's own DWARF (no table
//! of versions to fall behind). Reading the goroutines of a live process
//! is [`goroutines`]. A binary built with `-ldflags=-s -w` has neither the
//! symbol table that locates `runtime.allgs` nor the DWARF that lays out
//! `runtime.g`: its goroutines are not read, and the capture says why.

pub mod goroutines;

use std::borrow::Cow;
use std::fs::File;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::procs::elf::{load_bias, section_bytes};

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
    pub layout: Layout,
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
    // SAFETY: read-only private mapping of a file mapped executable by a
    // process: binaries are not rewritten in place.
    let Ok(data) = (unsafe { memmap2::Mmap::map(file) }) else {
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
    let layout = layout_from_dwarf(&obj)?;
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err("its load address could not be worked out".into());
    };
    let version = build_version(&obj).unwrap_or_else(|| "go (version unknown)".into());
    Ok(Some(Runtime {
        version,
        allgs: allgs.wrapping_add(bias),
        reasons: if reasons == 0 { 0 } else { reasons.wrapping_add(bias) },
        reasons_len: (reasons_size / 16).min(256) as u32,
        layout,
    }))
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

/// A DWARF section's bytes, inflated (empty when missing or unreadable).
fn dwarf_section<'a>(obj: &object::File<'a>, name: &str) -> Cow<'a, [u8]> {
    obj.section_by_name(name).and_then(|s| section_bytes(&s)).unwrap_or(Cow::Borrowed(&[]))
}

/// `runtime.g`'s layout from the binary's DWARF.
fn layout_from_dwarf(obj: &object::File<'_>) -> Result<Layout, String> {
    let sections = gimli::DwarfSections::load(|id| Ok::<_, gimli::Error>(dwarf_section(obj, id.name())))
        .map_err(|e| format!("its DWARF could not be read: {e}"))?;
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, gimli::LittleEndian));
    let mut structs = Structs::default();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else { continue };
        // The runtime's types are in a unit of the runtime's (Go's linker
        // writes its functions and its types in two).
        let is_runtime = unit.name.is_some_and(|n| n.slice() == b"runtime");
        if !is_runtime {
            continue;
        }
        structs.read(&dwarf, &unit);
        if !structs.g.is_empty() && !structs.gobuf.is_empty() && !structs.stack.is_empty() {
            break;
        }
    }
    if structs.g.is_empty() {
        return Err(
            "the binary has no DWARF describing runtime.g (built with -ldflags=-w or stripped): its goroutines cannot be read"
                .into(),
        );
    }
    let g = |f: &str| structs.g.iter().find(|(n, _)| n == f).map(|&(_, o)| o);
    let of = |fields: &[(String, u64)], f: &str| fields.iter().find(|(n, _)| n == f).map(|&(_, o)| o);
    let need = |what: &str, v: Option<u64>| v.ok_or_else(|| format!("its runtime.g has no {what} (a Go version fgbpf does not read)"));
    let stack = need("stack", g("stack"))?;
    let sched = need("sched", g("sched"))?;
    let fields = [
        ("stack.lo", stack + need("stack.lo", of(&structs.stack, "lo"))?),
        ("stack.hi", stack + need("stack.hi", of(&structs.stack, "hi"))?),
        ("sched.sp", sched + need("sched.sp", of(&structs.gobuf, "sp"))?),
        ("sched.pc", sched + need("sched.pc", of(&structs.gobuf, "pc"))?),
        ("sched.bp", sched + need("sched.bp", of(&structs.gobuf, "bp"))?),
        ("syscallpc", need("syscallpc", g("syscallpc"))?),
        ("atomicstatus", need("atomicstatus", g("atomicstatus"))?),
        ("goid", need("goid", g("goid"))?),
        ("waitreason", need("waitreason", g("waitreason"))?),
        ("startpc", need("startpc", g("startpc"))?),
    ];
    let max = fields.iter().map(|&(_, o)| o).max().unwrap_or(0) + 8;
    if max > 4096 {
        return Err("its runtime.g is laid out beyond 4 KB (DWARF not trusted)".into());
    }
    let o = |i: usize| fields[i].1 as u16;
    Ok(Layout {
        stack_lo: o(0),
        stack_hi: o(1),
        sched_sp: o(2),
        sched_pc: o(3),
        sched_bp: o(4),
        syscall_pc: o(5),
        status: o(6),
        goid: o(7),
        wait_reason: o(8),
        start_pc: o(9),
        size: max as u16,
    })
}

/// The members (name, offset) of the runtime structures read.
#[derive(Default)]
struct Structs {
    g: Vec<(String, u64)>,
    gobuf: Vec<(String, u64)>,
    stack: Vec<(String, u64)>,
}

type Slice<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;

impl Structs {
    fn read(&mut self, dwarf: &gimli::Dwarf<Slice<'_>>, unit: &gimli::Unit<Slice<'_>>) {
        let mut entries = unit.entries();
        // Members of the structure being read, if it is one wanted.
        let mut current: Option<&'static str> = None;
        let mut struct_depth = 0isize;
        while let Ok(Some(entry)) = entries.next_dfs() {
            let depth = entry.depth();
            if current.is_some() && depth <= struct_depth {
                current = None;
            }
            match entry.tag() {
                gimli::DW_TAG_structure_type => {
                    let name = name_of(dwarf, unit, entry);
                    current = match name.as_deref() {
                        Some("runtime.g") if self.g.is_empty() => Some("g"),
                        Some("runtime.gobuf") if self.gobuf.is_empty() => Some("gobuf"),
                        Some("runtime.stack") if self.stack.is_empty() => Some("stack"),
                        _ => None,
                    };
                    struct_depth = depth;
                }
                gimli::DW_TAG_member if current.is_some() && depth == struct_depth + 1 => {
                    let (Some(name), Some(offset)) = (name_of(dwarf, unit, entry), member_offset(entry)) else {
                        continue;
                    };
                    let into = match current {
                        Some("g") => &mut self.g,
                        Some("gobuf") => &mut self.gobuf,
                        _ => &mut self.stack,
                    };
                    if into.len() < 512 {
                        into.push((name, offset));
                    }
                }
                _ => {}
            }
        }
    }
}

fn name_of(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &gimli::Unit<Slice<'_>>,
    entry: &gimli::DebuggingInformationEntry<Slice<'_>>,
) -> Option<String> {
    let attr = entry.attr_value(gimli::DW_AT_name)?;
    let s = dwarf.attr_string(unit, attr).ok()?;
    (s.len() <= 256).then(|| String::from_utf8_lossy(s.slice()).into_owned())
}

fn member_offset(entry: &gimli::DebuggingInformationEntry<Slice<'_>>) -> Option<u64> {
    match entry.attr_value(gimli::DW_AT_data_member_location)? {
        gimli::AttributeValue::Udata(v) => Some(v),
        gimli::AttributeValue::Data1(v) => Some(u64::from(v)),
        gimli::AttributeValue::Data2(v) => Some(u64::from(v)),
        gimli::AttributeValue::Data4(v) => Some(u64::from(v)),
        gimli::AttributeValue::Data8(v) => Some(v),
        gimli::AttributeValue::Sdata(v) => u64::try_from(v).ok(),
        _ => None,
    }
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
