//! The Go runtime's structures as a binary's own DWARF lays them out:
//! `runtime.g` (its stack, saved registers, status, id, wait reason,
//! labels and m), `runtime.m`'s current goroutine, and what holds a
//! goroutine's pprof labels (up to Go 1.23 a map: `runtime.hmap` and its
//! buckets of strings; from 1.24 `runtime/pprof.labelMap`'s list).
//! Go writes the DWARF of every type it links in; read from there, the
//! offsets follow the binary's Go version with no table to fall behind.

use std::borrow::Cow;

use super::{LabelLayout, LabelList, LabelMap, Layout, Running};
use crate::procs::elf::section_bytes;

/// Where a Go program's structures are, as far as its DWARF says.
pub(crate) struct Found {
    pub layout: Layout,
    /// Whether its goroutines can be told on its threads' stacks, and how.
    pub running: Result<Running, String>,
}

/// A DWARF section's bytes, inflated (empty when missing or unreadable).
fn dwarf_section<'a>(obj: &object::File<'a>, name: &str) -> Cow<'a, [u8]> {
    use object::Object;
    obj.section_by_name(name).and_then(|s| section_bytes(&s)).unwrap_or(Cow::Borrowed(&[]))
}

/// `runtime.g`'s layout and the rest, from the binary's DWARF; `tls_g`
/// is where the binary keeps g in a thread's TLS.
pub(crate) fn read(obj: &object::File<'_>, tls_g: i64) -> Result<Found, String> {
    let sections = gimli::DwarfSections::load(|id| Ok::<_, gimli::Error>(dwarf_section(obj, id.name())))
        .map_err(|e| format!("its DWARF could not be read: {e}"))?;
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, gimli::LittleEndian));
    let mut structs = Structs::default();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else { continue };
        // The runtime's types are in a unit of the runtime's (Go's linker
        // writes its functions and its types in several).
        if unit.name.is_some_and(|n| n.slice() == b"runtime") {
            structs.read(&dwarf, &unit);
        }
    }
    if structs.get("g").is_empty() {
        return Err(
            "the binary has no DWARF describing runtime.g (built with -ldflags=-w or stripped): its goroutines cannot be read"
                .into(),
        );
    }
    let layout = layout(&structs)?;
    Ok(Found { layout, running: running(&structs, tls_g) })
}

fn of(fields: &[(String, u64)], f: &str) -> Option<u64> {
    fields.iter().find(|(n, _)| n == f).map(|&(_, o)| o)
}

/// Offsets above 4 KB are not believed: the structures read are smaller.
fn small(o: u64) -> Option<u16> {
    (o < 4096).then_some(o as u16)
}

fn layout(structs: &Structs) -> Result<Layout, String> {
    let g = structs.get("g");
    let need = |what: &str, v: Option<u64>| v.ok_or_else(|| format!("its runtime.g has no {what} (a Go version fgbpf does not read)"));
    let stack = need("stack", of(g, "stack"))?;
    let sched = need("sched", of(g, "sched"))?;
    let fields = [
        stack + need("stack.lo", of(structs.get("stack"), "lo"))?,
        stack + need("stack.hi", of(structs.get("stack"), "hi"))?,
        sched + need("sched.sp", of(structs.get("gobuf"), "sp"))?,
        sched + need("sched.pc", of(structs.get("gobuf"), "pc"))?,
        sched + need("sched.bp", of(structs.get("gobuf"), "bp"))?,
        need("syscallpc", of(g, "syscallpc"))?,
        need("atomicstatus", of(g, "atomicstatus"))?,
        need("goid", of(g, "goid"))?,
        need("waitreason", of(g, "waitreason"))?,
        need("startpc", of(g, "startpc"))?,
    ];
    let max = fields.iter().max().copied().unwrap_or(0) + 8;
    if max > 4096 {
        return Err("its runtime.g is laid out beyond 4 KB (DWARF not trusted)".into());
    }
    let o = |i: usize| fields[i] as u16;
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

/// What the BPF walker needs to tell a thread's goroutine, and how its
/// labels are kept.
fn running(structs: &Structs, tls_g: i64) -> Result<Running, String> {
    let g = structs.get("g");
    let need = |what: &str, v: Option<u64>| {
        v.and_then(small).ok_or_else(|| format!("its runtime has no {what} fgbpf knows (a Go version it does not read)"))
    };
    let labels = match structs.label_map.as_deref() {
        // runtime/pprof not linked in: no goroutine has labels.
        None => Ok(None),
        // Go's DWARF names a map by its header: *hash<K,V>.
        Some("*hash<string,string>" | "map[string]string") => label_map(structs).map(|m| Some(LabelLayout::Map(m))),
        // Go 1.24: a struct holding a sorted list.
        Some("runtime/pprof.labelMap") => label_list(structs).map(|l| Some(LabelLayout::List(l))),
        Some("") => Err("the type of its pprof labels could not be read from its DWARF".into()),
        Some(t) => Err(format!("its pprof labels are a {}, which fgbpf does not read", t.chars().take(40).collect::<String>())),
    };
    Ok(Running {
        tls_g,
        g_m: need("runtime.g.m", of(g, "m"))?,
        g_goid: need("runtime.g.goid", of(g, "goid"))?,
        g_labels: need("runtime.g.labels", of(g, "labels"))?,
        m_curg: need("runtime.m.curg", of(structs.get("m"), "curg"))?,
        labels,
    })
}

/// A `map[string]string`'s layout (Go up to 1.23: `runtime.hmap` and
/// buckets of eight keys and eight values).
fn label_map(structs: &Structs) -> Result<LabelMap, String> {
    let (h, b) = (structs.get("hmap"), structs.get("bucket"));
    let need = |what: &str, v: Option<u64>| {
        v.and_then(small).ok_or_else(|| format!("its map of pprof labels has no {what} (a Go version fgbpf does not read)"))
    };
    let m = LabelMap {
        count: need("hmap.count", of(h, "count"))?,
        log2_buckets: need("hmap.B", of(h, "B"))?,
        buckets: need("hmap.buckets", of(h, "buckets"))?,
        old_buckets: need("hmap.oldbuckets", of(h, "oldbuckets"))?,
        top_hash: need("bucket.tophash", of(b, "tophash"))?,
        keys: need("bucket.keys", of(b, "keys"))?,
        values: need("bucket.values", of(b, "values").or_else(|| of(b, "elems")))?,
        overflow: need("bucket.overflow", of(b, "overflow"))?,
    };
    // Eight slots: tophash bytes, then 16-byte strings.
    if m.keys < m.top_hash + 8 || m.values < m.keys + 8 * 16 || m.overflow < m.values + 8 * 16 {
        return Err("its map of pprof labels is laid out as fgbpf does not read it".into());
    }
    Ok(m)
}

/// Go 1.24's `labelMap`: its `LabelSet`'s `list`, a slice of labels of
/// two strings each.
fn label_list(structs: &Structs) -> Result<LabelList, String> {
    let need = |what: &str, v: Option<u64>| {
        v.and_then(small).ok_or_else(|| format!("its list of pprof labels has no {what} (a Go version fgbpf does not read)"))
    };
    let set = need("labelMap.LabelSet", of(structs.get("labelMap"), "LabelSet"))?;
    let l = LabelList {
        list: set + need("LabelSet.list", of(structs.get("labelSet"), "list"))?,
        array: need("slice array", of(structs.get("labels"), "array"))?,
        len: need("slice len", of(structs.get("labels"), "len"))?,
        key: need("label.key", of(structs.get("label"), "key"))?,
        value: need("label.value", of(structs.get("label"), "value"))?,
        size: need("label's size", structs.size("label"))?,
    };
    // Two strings of 16 bytes in each label.
    if l.key + 16 > l.size || l.value + 16 > l.size || l.key.abs_diff(l.value) < 16 {
        return Err("its list of pprof labels is laid out as fgbpf does not read it".into());
    }
    Ok(l)
}

/// The members (name, offset) and sizes of the runtime structures read,
/// and the type pprof's labels have.
#[derive(Default)]
struct Structs {
    found: Vec<(&'static str, Vec<(String, u64)>)>,
    sizes: Vec<(&'static str, u64)>,
    label_map: Option<String>,
}

type Slice<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;

/// The structures read, by DWARF name, and what they are called here.
const WANTED: [(&str, &str); 10] = [
    ("runtime.g", "g"),
    ("runtime.gobuf", "gobuf"),
    ("runtime.stack", "stack"),
    ("runtime.m", "m"),
    ("runtime.hmap", "hmap"),
    ("bucket<string,string>", "bucket"),
    ("runtime/pprof.labelMap", "labelMap"),
    ("runtime/pprof.LabelSet", "labelSet"),
    ("[]runtime/pprof.label", "labels"),
    ("runtime/pprof.label", "label"),
];

impl Structs {
    fn get(&self, what: &str) -> &[(String, u64)] {
        self.found.iter().find(|(n, _)| *n == what).map(|(_, f)| f.as_slice()).unwrap_or(&[])
    }

    fn size(&self, what: &str) -> Option<u64> {
        self.sizes.iter().find(|(n, _)| *n == what).map(|&(_, s)| s)
    }

    fn read(&mut self, dwarf: &gimli::Dwarf<Slice<'_>>, unit: &gimli::Unit<Slice<'_>>) {
        let mut entries = unit.entries();
        // The structure being read, if it is one wanted.
        let mut current: Option<usize> = None;
        let mut struct_depth = 0isize;
        while let Ok(Some(entry)) = entries.next_dfs() {
            let depth = entry.depth();
            if current.is_some() && depth <= struct_depth {
                current = None;
            }
            match entry.tag() {
                gimli::DW_TAG_structure_type => {
                    let name = name_of(dwarf, unit, entry);
                    current = WANTED.iter().find(|(n, _)| name.as_deref() == Some(n)).and_then(|&(_, what)| {
                        if !self.get(what).is_empty() {
                            return None;
                        }
                        self.found.push((what, Vec::new()));
                        if let Some(size) = entry.attr_value(gimli::DW_AT_byte_size).and_then(|v| v.udata_value()) {
                            self.sizes.push((what, size));
                        }
                        Some(self.found.len() - 1)
                    });
                    struct_depth = depth;
                }
                gimli::DW_TAG_member if current.is_some() && depth == struct_depth + 1 => {
                    let (Some(name), Some(offset)) = (name_of(dwarf, unit, entry), member_offset(entry)) else {
                        continue;
                    };
                    let into = &mut self.found[current.unwrap_or(0)].1;
                    if into.len() < 512 {
                        into.push((name, offset));
                    }
                }
                gimli::DW_TAG_typedef
                    if self.label_map.is_none()
                        && name_of(dwarf, unit, entry).as_deref() == Some("runtime/pprof.labelMap") =>
                {
                    self.label_map = Some(type_name(dwarf, unit, entry).unwrap_or_default());
                }
                _ => {}
            }
        }
    }
}

/// The name of the type an entry's DW_AT_type refers to, in its unit.
fn type_name(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &gimli::Unit<Slice<'_>>,
    entry: &gimli::DebuggingInformationEntry<Slice<'_>>,
) -> Option<String> {
    let at = match entry.attr_value(gimli::DW_AT_type)? {
        gimli::AttributeValue::UnitRef(at) => at,
        gimli::AttributeValue::DebugInfoRef(at) => at.to_unit_offset(&unit.header)?,
        _ => return None,
    };
    let target = unit.entry(at).ok()?;
    name_of(dwarf, unit, &target)
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
