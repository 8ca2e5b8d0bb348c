//! What the BPF walker needs of one JVM (`struct fg_java_proc`), taken
//! from its vmStructs: the offsets of its version, fixed once found, and
//! the addresses of its code cache, interpreter and call stub, read from
//! the live process (they exist once the JVM has initialized its code
//! cache). Also the offsets the naming side reads nmethods with.

use super::names::MethodOffsets;
use super::vmstructs::VmStructs;
use crate::procs::mem::Mem;

/// src/runtimes/java/java.h FG_JAVA_*.
pub const MAX_HEAPS: usize = 4;
pub const NONE_OFF: u16 = 0xffff;
pub const FLAG_CODE_OFFSETS: u8 = 1;
pub const FLAG_HAS_KIND: u8 = 2;
pub const FLAG_FC_INT16: u8 = 4;
/// walk.bpf.h FG_JAVA_HEAD: the bytes of a blob's head the walker reads.
pub const HEAD: u64 = 384;

/// `struct fg_java_proc`, field for field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub code_lo: u64,
    pub code_hi: u64,
    pub heap_lo: [u64; MAX_HEAPS],
    pub heap_hi: [u64; MAX_HEAPS],
    pub segmap: [u64; MAX_HEAPS],
    pub interp_lo: u64,
    pub interp_hi: u64,
    pub call_stub_ra: u64,
    pub name_nmethod: u64,
    pub nheaps: u32,
    pub log2_seg: u8,
    pub heap_block_size: u8,
    pub major: u8,
    pub flags: u8,
    pub cb_name: u16,
    pub cb_kind: u16,
    pub cb_frame_size: u16,
    pub cb_frame_complete: u16,
    pub cb_code_begin: u16,
    pub cb_code_end: u16,
    pub nm_compile_id: u16,
    pub nm_entry: u16,
    pub nm_verified_entry: u16,
    pub nm_osr_entry: u16,
    pub nm_deopt_handler: u16,
    pub nm_orig_pc_offset: u16,
    pub m_const_method: u16,
    pub cm_size: u16,
    pub cm_code_size: u16,
    pub pad: u16,
}

/// Where the live values are: static fields' addresses and the offsets to
/// follow from them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Statics {
    low_bound: u64,
    high_bound: u64,
    heaps: u64,
    ga_len: u64,
    ga_data: u64,
    heap_memory: u64,
    heap_segmap: u64,
    heap_log2_seg: u64,
    vs_low_boundary: u64,
    vs_high_boundary: u64,
    vs_high: u64,
    hb_length: u64,
    hb_used: u64,
    interp_code: u64,
    sq_buffer: u64,
    sq_limit: u64,
    call_stub_ra: u64,
}

/// Offsets of the nmethod's debug data, for naming; `None` for layouts
/// fgbpf does not know, whose nmethods are named by their own method only.
#[derive(Clone, Copy, Debug, Default)]
pub struct NmethodOffsets {
    pub method: u64,
    pub comp_level: Option<u64>,
    pub debug: Option<Debug>,
}

/// Where an nmethod keeps its PcDescs, scopes and metadata.
#[derive(Clone, Copy, Debug)]
pub enum Debug {
    /// JDK 9 to 22: all in the blob, after its code
    /// (CompiledMethod::_scopes_data_begin a pointer, the rest offsets).
    InBlob(DebugOffsets),
    /// JDK 25 (VMStructs' names decide): PcDescs and scopes in the
    /// nmethod's immutable data, its metadata in its mutable data after
    /// the relocations.
    Split(SplitOffsets),
}

#[derive(Clone, Copy, Debug, Default)]
pub struct SplitOffsets {
    /// CodeBlob: where its code begins (an int from the blob), its mutable
    /// data (a pointer), its relocations' size and the mutable data's.
    pub code_offset: u64,
    pub mutable_data: u64,
    pub relocation_size: u64,
    pub mutable_data_size: u64,
    /// nmethod: its immutable data (a pointer), that data's size, and where
    /// in it the PcDescs and the scopes begin (ints).
    pub immutable_data: u64,
    pub immutable_data_size: u64,
    pub scopes_pcs: u64,
    pub scopes_data: u64,
    pub pc_size: u64,
    pub pc_pc: u64,
    pub pc_scope: u64,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct DebugOffsets {
    pub code_begin: u64,
    pub metadata: u64,
    pub scopes_data_begin: u64,
    pub scopes_pcs: u64,
    pub dependencies: u64,
    pub pc_size: u64,
    pub pc_pc: u64,
    pub pc_scope: u64,
}

/// Everything fixed for one JVM build.
#[derive(Clone, Copy, Debug)]
pub struct Offsets {
    pub base: Layout,
    pub statics: Statics,
    pub nm: NmethodOffsets,
    pub methods: MethodOffsets,
}

fn need<T>(v: Option<T>, what: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("vmStructs has no {what}"))
}

fn off16(v: u64, what: &str) -> Result<u16, String> {
    if v >= HEAD {
        return Err(format!("{what} is at {v}, beyond the {HEAD} bytes the walker reads"));
    }
    Ok(v as u16)
}

/// The offsets of a JVM of feature version `major`.
pub fn offsets(vm: &VmStructs, major: u32) -> Result<Offsets, String> {
    let cb = ["CodeBlob"];
    let nm = ["nmethod", "CompiledMethod"];
    let f = |tys: &[&str], names: &[&str]| vm.offset(tys, names);
    let ty = |t: &str, n: &str| vm.field(t, n).and_then(|f| f.ty);
    let st = |t: &str, n: &str| need(vm.address(t, n), &format!("{t}::{n}"));
    let nf = |tys: &[&str], n: &str| need(f(tys, &[n]), &format!("{}::{n}", tys[0]));

    let heaps = st("CodeCache", "_heaps").map_err(|_| {
        // JDK 8's HotSpot calls itself version 25: not said as a JDK.
        "no CodeCache::_heaps, so JDK 8 or older (one code heap), which fgbpf does not read".to_string()
    })?;
    let statics = Statics {
        low_bound: st("CodeCache", "_low_bound")?,
        high_bound: st("CodeCache", "_high_bound")?,
        heaps,
        ga_len: need(
            f(&["GrowableArrayBase", "GenericGrowableArray"], &["_len"]),
            "GrowableArrayBase::_len",
        )?,
        ga_data: nf(&["GrowableArray<int>"], "_data")?,
        heap_memory: nf(&["CodeHeap"], "_memory")?,
        heap_segmap: nf(&["CodeHeap"], "_segmap")?,
        heap_log2_seg: nf(&["CodeHeap"], "_log2_segment_size")?,
        vs_low_boundary: nf(&["VirtualSpace"], "_low_boundary")?,
        vs_high_boundary: nf(&["VirtualSpace"], "_high_boundary")?,
        vs_high: nf(&["VirtualSpace"], "_high")?,
        hb_length: nf(&["HeapBlock::Header"], "_length")? + f(&["HeapBlock"], &["_header"]).unwrap_or(0),
        hb_used: nf(&["HeapBlock::Header"], "_used")? + f(&["HeapBlock"], &["_header"]).unwrap_or(0),
        interp_code: st("AbstractInterpreter", "_code")?,
        sq_buffer: nf(&["StubQueue"], "_stub_buffer")?,
        sq_limit: nf(&["StubQueue"], "_buffer_limit")?,
        call_stub_ra: st("StubRoutines", "_call_stub_return_address")?,
    };

    let mut l = Layout {
        major: major.min(255) as u8,
        heap_block_size: need(vm.size("HeapBlock"), "sizeof(HeapBlock)")?.min(255) as u8,
        ..Layout::default()
    };
    // JDK 23 turned CodeBlob's code pointers into int offsets, and the
    // nmethod entry points into u16 offsets.
    let code_offsets = f(&cb, &["_code_begin"]).is_none() && f(&cb, &["_code_offset"]).is_some();
    if code_offsets {
        l.flags |= FLAG_CODE_OFFSETS;
        l.cb_code_begin = off16(nf(&cb, "_code_offset")?, "CodeBlob::_code_offset")?;
        l.cb_code_end = off16(nf(&cb, "_data_offset")?, "CodeBlob::_data_offset")?;
        l.nm_entry = off16(nf(&nm, "_entry_offset")?, "nmethod::_entry_offset")?;
        l.nm_verified_entry = off16(nf(&nm, "_verified_entry_offset")?, "nmethod::_verified_entry_offset")?;
        // An OSR entry is an offset only where vmStructs says it is not a
        // pointer.
        l.nm_osr_entry = match (f(&nm, &["_osr_entry_offset"]), f(&nm, &["_osr_entry_point"])) {
            (Some(o), _) => off16(o, "nmethod::_osr_entry_offset")?,
            (None, Some(o)) if ty("nmethod", "_osr_entry_point") != Some("address") => {
                off16(o, "nmethod::_osr_entry_point")?
            }
            _ => NONE_OFF,
        };
    } else {
        l.cb_code_begin = off16(nf(&cb, "_code_begin")?, "CodeBlob::_code_begin")?;
        l.cb_code_end = off16(nf(&cb, "_code_end")?, "CodeBlob::_code_end")?;
        l.nm_entry = off16(nf(&nm, "_entry_point")?, "nmethod::_entry_point")?;
        l.nm_verified_entry = off16(nf(&nm, "_verified_entry_point")?, "nmethod::_verified_entry_point")?;
        l.nm_osr_entry = off16(nf(&nm, "_osr_entry_point")?, "nmethod::_osr_entry_point")?;
    }
    // JDK 25: CodeBlob::_kind says what a blob is, and the frame-complete
    // offset shrank to an int16.
    match f(&cb, &["_kind"]) {
        Some(k) => {
            l.flags |= FLAG_HAS_KIND;
            l.cb_kind = off16(k, "CodeBlob::_kind")?;
        }
        None => l.cb_kind = NONE_OFF,
    }
    if matches!(ty("CodeBlob", "_frame_complete_offset"), Some("int16_t")) {
        l.flags |= FLAG_FC_INT16;
    }
    l.cb_name = off16(nf(&cb, "_name")?, "CodeBlob::_name")?;
    l.cb_frame_size = off16(nf(&cb, "_frame_size")?, "CodeBlob::_frame_size")?;
    l.cb_frame_complete = off16(nf(&cb, "_frame_complete_offset")?, "CodeBlob::_frame_complete_offset")?;
    l.nm_compile_id = off16(nf(&nm, "_compile_id")?, "nmethod::_compile_id")?;
    l.nm_deopt_handler = match f(&nm, &["_deopt_handler_begin", "_deopt_handler_offset"]) {
        Some(o) => off16(o, "nmethod::_deopt_handler_begin")?,
        None => NONE_OFF,
    };
    l.nm_orig_pc_offset = match f(&nm, &["_orig_pc_offset"]) {
        Some(o) => off16(o, "nmethod::_orig_pc_offset")?,
        None => NONE_OFF,
    };
    let m_const_method = nf(&["Method"], "_constMethod")?;
    let cm_size = need(vm.size("ConstMethod"), "sizeof(ConstMethod)")?;
    let cm_code_size = nf(&["ConstMethod"], "_code_size")?;
    l.m_const_method = u16::try_from(m_const_method).map_err(|_| "Method::_constMethod is out of range")?;
    l.cm_size = u16::try_from(cm_size).map_err(|_| "sizeof(ConstMethod) is out of range")?;
    l.cm_code_size = u16::try_from(cm_code_size).map_err(|_| "ConstMethod::_code_size is out of range")?;

    let split = || {
        Some(Debug::Split(SplitOffsets {
            code_offset: f(&cb, &["_code_offset"])?,
            mutable_data: f(&cb, &["_mutable_data"])?,
            relocation_size: f(&cb, &["_relocation_size"])?,
            mutable_data_size: f(&cb, &["_mutable_data_size"])?,
            immutable_data: f(&nm, &["_immutable_data"])?,
            immutable_data_size: f(&nm, &["_immutable_data_size"])?,
            scopes_pcs: f(&nm, &["_scopes_pcs_offset"])?,
            scopes_data: f(&nm, &["_scopes_data_offset"])?,
            pc_size: vm.size("PcDesc")?,
            pc_pc: f(&["PcDesc"], &["_pc_offset"])?,
            pc_scope: f(&["PcDesc"], &["_scope_decode_offset"])?,
        }))
    };
    let debug = (|| {
        Some(DebugOffsets {
            code_begin: f(&cb, &["_code_begin"])?,
            metadata: f(&nm, &["_metadata_offset"])?,
            scopes_data_begin: f(&nm, &["_scopes_data_begin"])?,
            scopes_pcs: f(&nm, &["_scopes_pcs_offset"])?,
            dependencies: f(&nm, &["_dependencies_offset"])?,
            pc_size: vm.size("PcDesc")?,
            pc_pc: f(&["PcDesc"], &["_pc_offset"])?,
            pc_scope: f(&["PcDesc"], &["_scope_decode_offset"])?,
        })
    })()
    .map(Debug::InBlob)
    .or_else(split);
    let nm_offsets = NmethodOffsets {
        method: nf(&nm, "_method")?,
        comp_level: f(&nm, &["_comp_level"]),
        debug,
    };
    let methods = MethodOffsets {
        m_const_method,
        m_access_flags: nf(&["Method"], "_access_flags")?,
        cm_constants: nf(&["ConstMethod"], "_constants")?,
        cm_name_index: nf(&["ConstMethod"], "_name_index")?,
        cm_signature_index: nf(&["ConstMethod"], "_signature_index")?,
        cm_code_size,
        cm_flags: f(&["ConstMethod"], &["_flags"]).unwrap_or(0),
        cm_size_words: nf(&["ConstMethod"], "_constMethod_size")?,
        cm_idnum: nf(&["ConstMethod"], "_method_idnum")?,
        cm_size,
        cm_has_lines: match (
            f(&["ConstMethod"], &["_flags"]),
            vm.int("ConstMethod::_has_linenumber_table"),
        ) {
            (Some(_), Some(bit)) if bit > 0 => bit as u32,
            _ => 0,
        },
        cp_holder: nf(&["ConstantPool"], "_pool_holder")?,
        cp_length: nf(&["ConstantPool"], "_length")?,
        cp_size: need(vm.size("ConstantPool"), "sizeof(ConstantPool)")?,
        klass_name: nf(&["Klass"], "_name")?,
        ik_methods: nf(&["InstanceKlass"], "_methods")?,
        array_length: f(&["Array<int>"], &["_length"]).unwrap_or(0),
        array_data: nf(&["Array<Method*>"], "_data")?,
        sym_length: nf(&["Symbol"], "_length")?,
        sym_body: nf(&["Symbol"], "_body")?,
    };
    Ok(Offsets {
        base: l,
        statics,
        nm: nm_offsets,
        methods,
    })
}

/// The live part of the layout: code cache bounds, heaps, interpreter and
/// call stub. `None` until the JVM has set them up.
pub fn read_live(mem: &Mem, o: &Offsets) -> Option<Layout> {
    let s = &o.statics;
    let mut l = o.base;
    l.code_lo = mem.u64(s.low_bound)?;
    l.code_hi = mem.u64(s.high_bound)?;
    if l.code_lo == 0 || l.code_hi <= l.code_lo {
        return None;
    }
    let arr = mem.u64(s.heaps)?;
    let len = mem.i32(arr.checked_add(s.ga_len)?)?;
    let data = mem.u64(arr + s.ga_data)?;
    if len <= 0 {
        return None;
    }
    let mut log2 = None;
    for i in 0..(len as usize).min(MAX_HEAPS) {
        let heap = mem.u64(data.checked_add(8 * i as u64)?)?;
        let memory = heap.checked_add(s.heap_memory)?;
        let lo = mem.u64(memory + s.vs_low_boundary)?;
        let hi = mem.u64(memory + s.vs_high_boundary)?;
        let segmap = mem.u64(heap + s.heap_segmap + s.vs_low_boundary)?;
        let seg = mem.i32(heap + s.heap_log2_seg)?;
        if lo < l.code_lo || hi > l.code_hi || lo >= hi || segmap == 0 || !(4..=16).contains(&seg) {
            return None;
        }
        if log2.is_some_and(|g| g != seg) {
            return None; // one segment size for all heaps (CodeCacheSegmentSize)
        }
        log2 = Some(seg);
        l.heap_lo[i] = lo;
        l.heap_hi[i] = hi;
        l.segmap[i] = segmap;
        l.nheaps += 1;
    }
    l.log2_seg = log2? as u8;
    let code = mem.u64(s.interp_code)?;
    if code != 0 {
        l.interp_lo = mem.u64(code.checked_add(s.sq_buffer)?)?;
        l.interp_hi = l.interp_lo.checked_add(mem.i32(code + s.sq_limit)?.max(0) as u64)?;
    }
    l.call_stub_ra = mem.u64(s.call_stub_ra)?;
    Some(l)
}

/// Blocks looked at per heap when looking for an nmethod's name.
const MAX_BLOCKS: u64 = 100_000;

/// The `const char*` every nmethod's CodeBlob::_name holds ("nmethod", one
/// string literal of libjvm): found in the first nmethod met walking the
/// heaps' used blocks (HeapBlock lengths, in segments, up to the committed
/// end). 0 while no nmethod exists.
pub fn find_name_nmethod(mem: &Mem, o: &Offsets, l: &Layout) -> u64 {
    let s = &o.statics;
    let Some(heaps_arr) = mem.u64(s.heaps) else { return 0 };
    let data = mem.u64(heaps_arr + s.ga_data).unwrap_or(0);
    for i in 0..l.nheaps as u64 {
        let Some(heap) = mem.u64(data + 8 * i) else { continue };
        let Some(committed) = mem.u64(heap + s.heap_memory + s.vs_high) else {
            continue;
        };
        let (lo, seg) = (l.heap_lo[i as usize], 1u64 << l.log2_seg);
        let mut block = lo;
        for _ in 0..MAX_BLOCKS {
            if block >= committed.min(l.heap_hi[i as usize]) {
                break;
            }
            let Some(len) = mem.u64(block + s.hb_length) else { break };
            if len == 0 || len > (committed - block) / seg + 1 {
                break;
            }
            let used = mem.u8(block + s.hb_used).unwrap_or(0) != 0;
            let blob = block + l.heap_block_size as u64;
            if used {
                if let Some(name) = mem.u64(blob + l.cb_name as u64) {
                    if name != 0 && mem.cstr(name, 16).as_deref() == Some("nmethod") {
                        return name;
                    }
                }
            }
            block += len * seg;
        }
    }
    0
}
