//! LuaJIT in profiled processes (Debian's `luajit` and nginx's Lua module,
//! both linking `libluajit-5.1.so.2`, or a program linking LuaJIT
//! statically): which processes run one and which flavour (OpenResty's
//! 2.1 branch, told by its own exports, or LuaJIT's own 2.1.0-beta3, told
//! by its banner), where the VM's assembler code is
//! (the one `.eh_frame` entry that begins inside a C frame, [`vm_range`]:
//! the library exports no symbol there), the offsets of its layout
//! (layout.rs, from the version's own headers), and naming the
//! prototypes (GCproto) the BPF walker (src/runtimes/luajit/luajit.bpf.h)
//! records: `name (file:line)`, the name from the caller's bytecode as
//! LuaJIT's own tracebacks find it ([`names`]). Every byte read from the
//! target is untrusted: lengths capped, text decoded lossily.

pub mod layout;
pub mod names;
pub mod walker;

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;

use gimli::{BaseAddresses, CfaRule, EhFrame, NativeEndian, UnwindContext, UnwindSection};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable};

use crate::procs::elf::load_bias;
use crate::procs::mem::Mem;
pub use layout::{Layout, LAYOUT_BETA3, LAYOUT_OPENRESTY_21};

/// The versions fgbpf reads, for messages and docs/runtimes/luajit.md.
pub const SUPPORTED: &str = "OpenResty's LuaJIT 2.1 (GC64) and LuaJIT 2.1.0-beta3 (x86-64)";

/// A LuaJIT VM found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vm {
    /// `2.1.0-beta3`, as its banner says.
    pub release: String,
    /// Where its assembler code is mapped in the process.
    pub vm_start: u64,
    pub vm_end: u64,
    pub layout: Layout,
    /// The file it was found in, untrusted.
    pub binary: String,
    /// A global_State found in the process's memory ([`find_global`])
    /// once [`walker`]'s check has seen the process; 0: none.
    pub g_hint: Cell<u64>,
}

/// Whether a mapped file may hold LuaJIT, by name: its library, the
/// `luajit` program, nginx or OpenResty linking it.
pub fn may_be_vm(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.starts_with("libluajit") || base.starts_with("luajit") || base.starts_with("nginx") || base.starts_with("openresty")
}

/// A test hook: refuse what would be read, as a version fgbpf does not
/// know (tests/luajit.rs).
const REFUSE_ENV: &str = "FGBPF_TEST_LUAJIT_REFUSE";

/// Looks for LuaJIT in a file mapped executable at `start` from file
/// offset `offset`: `Ok(None)` when it is none. `Err`: it is one, but one
/// fgbpf cannot read, and why.
pub fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Vm>, String> {
    let Some(data) = crate::procs::elf::map(file) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let Some(table) = obj.dynamic_symbol_table() else {
        return Ok(None);
    };
    let has = |name: &str| table.symbols().any(|s| s.name() == Ok(name) && s.address() != 0);
    if !has("luaJIT_setmode") {
        return Ok(None);
    }
    let release = banner(&obj).unwrap_or_else(|| "(version unknown)".into());
    if !release.starts_with("2.1.") {
        return Err(format!("LuaJIT {release} (fgbpf reads {SUPPORTED})"));
    }
    // OpenResty's branch (lua_State.exdata and exdata2, exported as
    // lua_setexdata2) is built GC64; LuaJIT's own 2.1.0-beta3 (2017,
    // Debian 11's) is not GC64 by default on x86-64. LuaJIT's own later
    // 2.1 builds are GC64 with another layout, not known here.
    let layout = match (has("lua_setexdata2"), release.as_str()) {
        (true, _) => LAYOUT_OPENRESTY_21,
        (false, "2.1.0-beta3") => LAYOUT_BETA3,
        (false, _) => return Err(format!("LuaJIT {release}, neither OpenResty's branch (lua_setexdata2) nor 2.1.0-beta3 (fgbpf reads {SUPPORTED})")),
    };
    if let Ok(v) = std::env::var(REFUSE_ENV) {
        return Err(format!("LuaJIT {release}: refused by {REFUSE_ENV} ({v})"));
    }
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err("its load address could not be worked out".into());
    };
    let Some((lo, hi)) = vm_range(&obj) else {
        return Err(format!("LuaJIT {release}: the VM's code was not found in its .eh_frame"));
    };
    Ok(Some(Vm {
        release,
        vm_start: lo.wrapping_add(bias),
        vm_end: hi.wrapping_add(bias),
        layout,
        binary: path.to_string(),
        g_hint: Cell::new(0),
    }))
}

/// How much of each anonymous mapping [`find_global`] looks at: the
/// GG_State is the first thing LuaJIT's allocator gives out, at the
/// start of its first region.
const SCAN: u64 = 64 << 10;
/// The most mappings looked at.
const SCAN_MAPS: usize = 4096;

/// A LuaJIT global_State in the process: a GG_State (main lua_State, a
/// thread object, then its global_State) whose lua_State's glref points at
/// its global_State and whose global_State's mainthref points back, found
/// at the start of an anonymous writable mapping. The first found.
pub fn find_global(mem: &Mem, l: &Layout) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", mem.pid())).ok()?;
    for line in maps.lines().take(SCAN_MAPS) {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        let path = f.nth(3).unwrap_or("");
        if !perms.starts_with("rw") || !(path.is_empty() || path == "[heap]") {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else { continue };
        let len = (b - a).min(SCAN);
        let Some(bytes) = mem.bytes(a, len as usize) else { continue };
        // A reference (MRef, GCRef): 8 bytes in GC64, else 4.
        let word = |at: usize| match l.gc64 {
            true => bytes.get(at..at + 8).map(|w| u64::from_le_bytes(w.try_into().unwrap())),
            false => bytes.get(at..at + 4).map(|w| u64::from(u32::from_le_bytes(w.try_into().unwrap()))),
        };
        let (glref, gg_g, gct) = (usize::from(l.l_glref), usize::from(l.gg_g), usize::from(l.gct));
        let mainth = gg_g + usize::from(l.g_mainthref);
        for at in (0..bytes.len().saturating_sub(mainth + 8)).step_by(8) {
            let base = a + at as u64;
            if bytes[at + gct] == LJ_TTHREAD && word(at + glref) == Some(base + gg_g as u64) && word(at + mainth) == Some(base) {
                return Some(base + gg_g as u64);
            }
        }
    }
    None
}

/// ~LJ_TTHREAD, a lua_State's gct.
const LJ_TTHREAD: u8 = 6;

/// `2.1.0-beta3` from the banner `LuaJIT 2.1.0-beta3` in read-only data.
fn banner(obj: &object::File) -> Option<String> {
    let sec = obj.section_by_name(".rodata")?;
    let data = sec.data().ok()?;
    let at = data.windows(8).position(|w| &w[..7] == b"LuaJIT " && w[7].is_ascii_digit())?;
    let rest = &data[at + 7..];
    let end = rest.iter().position(|&b| b == 0 || b == b' ')?.min(32);
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// The VM's assembler code (lj_vm_asm_begin to its end): buildvm gives it
/// one `.eh_frame` entry whose first row is already inside the VM's C
/// frame (CFA rsp + CFRAME_SIZE + 8 on x86-64), where a C function's
/// begins at rsp + 8. The largest such entry.
pub fn vm_range(obj: &object::File) -> Option<(u64, u64)> {
    let sec = obj.section_by_name(".eh_frame")?;
    let data = sec.data().ok()?;
    let eh = EhFrame::new(data, NativeEndian);
    let mut bases = BaseAddresses::default().set_eh_frame(sec.address());
    if let Some(text) = obj.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    let mut ctx = Box::new(UnwindContext::new());
    let mut entries = eh.entries(&bases);
    let mut best: Option<(u64, u64)> = None;
    while let Ok(Some(entry)) = entries.next() {
        let gimli::CieOrFde::Fde(partial) = entry else { continue };
        let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) else { continue };
        let Ok(mut rows) = fde.rows(&eh, &bases, &mut ctx) else { continue };
        let Ok(Some(row)) = rows.next_row() else { continue };
        let inside = matches!(row.cfa(), CfaRule::RegisterAndOffset { register, offset } if *register == gimli::X86_64::RSP && *offset >= 48);
        let (lo, hi) = (fde.initial_address(), fde.end_address());
        if inside && best.is_none_or(|(b0, b1)| hi - lo > b1 - b0) {
            best = Some((lo, hi));
        }
    }
    best
}

const MAX_TEXT: usize = 512;
/// The most bytecode read of one prototype (its instructions, 4 bytes
/// each), and the most line-info bytes.
const MAX_BC: u32 = 1 << 16;

/// A prototype as read: where it is defined, its lines, its bytecode, and
/// the names of the functions its calls call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proto {
    /// The chunk's name, `@` dropped, base name; `=stdin` and the like
    /// kept.
    pub file: String,
    pub firstline: u32,
    /// Each instruction's line (index 0: the function's header).
    pub lines: Vec<u32>,
    /// The name the caller's bytecode gives the function each call
    /// instruction calls: (instruction, name).
    pub callees: HashMap<u32, String>,
    /// Whether it is a chunk's main function (no parameters, line 0).
    pub main: bool,
}

/// Why a frame could not be named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unnamed {
    Gone,
    NotProto,
    NotAnnounced,
}

/// The prototypes of one LuaJIT process, read as they are met.
pub struct Reader {
    mem: Option<Mem>,
    layout: Layout,
    protos: HashMap<u64, Result<Proto, Unnamed>>,
}

impl Reader {
    pub fn new(pid: u32, layout: Layout) -> Self {
        Reader {
            mem: Mem::open(pid).ok(),
            layout,
            protos: HashMap::new(),
        }
    }

    /// Reads a prototype, once.
    pub fn read(&mut self, proto: u64) {
        if self.protos.contains_key(&proto) {
            return;
        }
        let p = match self.mem.as_ref() {
            None => Err(Unnamed::Gone),
            Some(mem) => read_proto(mem, &self.layout, proto).ok_or(if mem.u8(proto).is_some() { Unnamed::NotProto } else { Unnamed::Gone }),
        };
        self.protos.insert(proto, p);
    }

    pub fn proto(&self, proto: u64) -> Result<&Proto, Unnamed> {
        match self.protos.get(&proto) {
            Some(Ok(p)) => Ok(p),
            Some(Err(e)) => Err(*e),
            None => Err(Unnamed::NotAnnounced),
        }
    }
}

/// A reference (GCRef, MRef) at `at`: 8 bytes in GC64, else 4.
pub(crate) fn reference(mem: &Mem, l: &Layout, at: u64) -> Option<u64> {
    match l.gc64 {
        true => mem.u64(at),
        false => mem.u32(at).map(u64::from),
    }
}

/// A GCstr's text, lossily, its length capped.
pub(crate) fn gcstr(mem: &Mem, l: &Layout, s: u64) -> Option<String> {
    if s == 0 || mem.u8(s + u64::from(l.gct))? != l.t_str {
        return None;
    }
    let len = mem.u32(s + u64::from(l.str_len))?;
    let bytes = mem.bytes(s + u64::from(l.str_size), (len as usize).min(MAX_TEXT))?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn read_proto(mem: &Mem, l: &Layout, pt: u64) -> Option<Proto> {
    if mem.u8(pt + u64::from(l.gct))? != l.t_proto {
        return None;
    }
    let sizebc = mem.u32(pt + u64::from(l.pt_sizebc))?.min(MAX_BC);
    let firstline = mem.u32(pt + u64::from(l.pt_firstline))?;
    let numline = mem.u32(pt + u64::from(l.pt_numline))?;
    let lineinfo = reference(mem, l, pt + u64::from(l.pt_lineinfo))?;
    let chunk = gcstr(mem, l, reference(mem, l, pt + u64::from(l.pt_chunkname))?).unwrap_or_default();
    let file = match chunk.strip_prefix('@') {
        Some(path) => path.rsplit('/').next().unwrap_or(path).to_string(),
        None => chunk,
    };
    let width: usize = if numline < 256 { 1 } else if numline < 65536 { 2 } else { 4 };
    let mut lines = vec![firstline];
    if lineinfo != 0 && sizebc > 1 {
        let raw = mem.bytes(lineinfo, (sizebc as usize - 1) * width).unwrap_or_default();
        lines.extend(raw.chunks_exact(width).map(|c| {
            let d = match width {
                1 => u32::from(c[0]),
                2 => u32::from(u16::from_ne_bytes([c[0], c[1]])),
                _ => u32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
            };
            firstline.wrapping_add(d)
        }));
    }
    let bc: Vec<u32> = mem
        .bytes(pt + u64::from(l.pt_size), sizebc as usize * 4)
        .map(|b| b.chunks_exact(4).map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect())
        .unwrap_or_default();
    let callees = names::callees(mem, l, pt, &bc);
    Some(Proto {
        file,
        firstline,
        lines,
        callees,
        main: firstline == 0,
    })
}

#[cfg(test)]
mod tests;
