//! PHP interpreters in profiled processes (the CLI, php-fpm's workers, the
//! CGI): which processes run one, where the BPF walker
//! (src/runtimes/php/php.bpf.h) finds the current execute data, the offsets of its
//! version, and naming the functions it records. `executor_globals` is a
//! dynamic symbol of PHP's NTS builds (stripped ones too); the offsets are
//! those of PHP's own headers (php8.2-dev), which tests/php.rs checks
//! again by compiling against them, and the symbol's size must be the one
//! the headers give. Every byte read from the target is untrusted: the
//! function's type and its strings' types are checked, lengths capped,
//! text decoded lossily.

pub mod walker;
use std::fs::File;

use object::{Object, ObjectSymbol, ObjectSymbolTable};

use crate::procs::elf::load_bias;
use crate::procs::lookup::{Lookup, Reason};
use crate::procs::mem::Mem;

/// Offsets into the structures of one PHP version (NTS, x86_64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// sizeof(zend_executor_globals): `executor_globals`' symbol size.
    pub eg_size: u64,
    pub eg_current_execute_data: u16,
    /// zend_execute_data: opline, func, This.u1.type_info,
    /// prev_execute_data.
    pub ex_opline: u16,
    pub ex_func: u16,
    pub ex_type_info: u16,
    pub ex_prev: u16,
    /// zend_function: function_name, scope; zend_op_array: last,
    /// opcodes, filename, line_start; zend_op: lineno, its size;
    /// zend_class_entry: name; zend_string: len, val.
    pub fn_name: u16,
    pub fn_scope: u16,
    pub op_last: u16,
    pub op_opcodes: u16,
    pub op_filename: u16,
    pub op_line_start: u16,
    pub zop_lineno: u16,
    pub zop_size: u16,
    pub ce_name: u16,
    pub str_len: u16,
    pub str_val: u16,
}

pub const LAYOUT_82: Layout = Layout {
    eg_size: 1800,
    eg_current_execute_data: 488,
    ex_opline: 0,
    ex_func: 24,
    ex_type_info: 40,
    ex_prev: 48,
    fn_name: 8,
    fn_scope: 16,
    op_last: 80,
    op_opcodes: 88,
    op_filename: 152,
    op_line_start: 160,
    zop_lineno: 24,
    zop_size: 32,
    ce_name: 8,
    str_len: 16,
    str_val: 24,
};

/// The known layout of PHP `version` (major, minor).
pub fn layout(version: (u32, u32)) -> Option<Layout> {
    match version {
        (8, 2) => Some(LAYOUT_82),
        _ => None,
    }
}

/// The versions fgbpf reads, for messages and docs/runtimes/php.md.
pub const SUPPORTED: &str = "8.2";

/// A PHP interpreter found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    pub version: (u32, u32),
    /// Address of executor_globals.current_execute_data in the process.
    pub current: u64,
    pub layout: Layout,
    /// The file it was found in, untrusted.
    pub binary: String,
}

/// Whether a mapped file may hold the interpreter: `php8.2`,
/// `php-fpm8.2`, `php-cgi8.2`, `libphp8.2.so`, by name.
pub fn may_be_interpreter(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.starts_with("php") || base.starts_with("libphp")
}

/// (major, minor) from `php8.2`, `php-fpm8.2`, `libphp8.2.so`.
pub fn version_in_name(path: &str) -> Option<(u32, u32)> {
    let base = path.rsplit('/').next()?;
    let at = base.find(|c: char| c.is_ascii_digit())?;
    let mut parts = base[at..].split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Looks for the interpreter in a file mapped executable at `start` from
/// file offset `offset`: `Ok(None)` when it has no `executor_globals`.
/// `Err`: it is one, but one fgbpf cannot read, and why.
pub fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
    // SAFETY: read-only private mapping of a file mapped executable by a
    // process: binaries are not rewritten in place.
    let Ok(data) = (unsafe { memmap2::Mmap::map(file) }) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let Some(table) = obj.dynamic_symbol_table() else {
        return Ok(None);
    };
    let Some(eg) = table.symbols().find(|s| s.name() == Ok("executor_globals") && s.address() != 0) else {
        return Ok(None);
    };
    let Some(version) = version_in_name(path) else {
        return Err("its version could not be read from its name".into());
    };
    let Some(layout) = layout(version) else {
        return Err(format!("PHP {}.{} (fgbpf reads {SUPPORTED})", version.0, version.1));
    };
    if eg.size() != layout.eg_size {
        return Err(format!(
            "its executor_globals is {} bytes, not PHP {}.{}'s {} (a thread-safe build, or another layout)",
            eg.size(),
            version.0,
            version.1,
            layout.eg_size
        ));
    }
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err("its load address could not be worked out".into());
    };
    Ok(Some(Interpreter {
        version,
        current: eg.address().wrapping_add(bias) + u64::from(layout.eg_current_execute_data),
        layout,
        binary: path.to_string(),
    }))
}

/// What a zend_function says of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// `name`, `Class::name`, or `{main}` for a file's top level.
    pub name: String,
    /// The file's base name; empty for an internal (C) function.
    pub file: String,
    pub line_start: u32,
    pub internal: bool,
    opcodes: u64,
    /// Each op's line.
    lines: Vec<u32>,
}

impl Function {
    /// The line of the op at `opline_bits` (bits 3-20 of the frame's
    /// opline, as the walker kept them); the first line when unknown.
    pub fn line(&self, opline_bits: u64, bits: u32, op_size: u16) -> u32 {
        let units = u64::from(op_size / 8).max(1);
        let n = opline_bits.wrapping_sub(self.opcodes >> 3) & ((1u64 << bits) - 1);
        match self.lines.get((n / units) as usize) {
            Some(&l) if n % units == 0 && l > 0 => l,
            _ => self.line_start,
        }
    }
}

const ZEND_INTERNAL_FUNCTION: u8 = 1;
const ZEND_USER_FUNCTION: u8 = 2;
const ZEND_EVAL_CODE: u8 = 4;
/// zend_refcounted_h's type (GC_TYPE_MASK) of a string.
const IS_STRING: u32 = 6;
const MAX_TEXT: u64 = 4096;
const MAX_OPS: u64 = 1 << 16;

/// Why a function could not be named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unnamed {
    Gone,
    NotFunction,
}

impl Reason for Unnamed {
    const GONE: Self = Unnamed::Gone;
}

/// The functions of one PHP process, read as they are met.
pub struct Reader {
    mem: Option<Mem>,
    layout: Layout,
    functions: Lookup<u64, Function, Unnamed>,
}

impl Reader {
    pub fn new(pid: u32, layout: Layout) -> Self {
        Reader {
            mem: Mem::open(pid).ok(),
            layout,
            functions: Lookup::new(),
        }
    }

    /// Reads an announced function, once.
    pub fn read(&mut self, addr: u64) {
        if self.functions.unread(&addr) {
            let f = match self.mem.as_ref() {
                None => Err(Unnamed::Gone),
                Some(mem) => read_function(mem, &self.layout, addr).ok_or(if mem.u8(addr).is_some() {
                    Unnamed::NotFunction
                } else {
                    Unnamed::Gone
                }),
            };
            self.functions.keep(addr, f);
        }
    }

    pub fn function(&self, addr: u64) -> Result<&Function, Unnamed> {
        self.functions.get(&addr)
    }
}

fn read_function(mem: &Mem, l: &Layout, addr: u64) -> Option<Function> {
    let kind = mem.u8(addr)?;
    if !matches!(kind, ZEND_INTERNAL_FUNCTION | ZEND_USER_FUNCTION | ZEND_EVAL_CODE) {
        return None;
    }
    let at = |off: u16| addr + u64::from(off);
    let name = match mem.u64(at(l.fn_name))? {
        0 => None,
        s => Some(string(mem, l, s)?),
    };
    let class = match mem.u64(at(l.fn_scope))? {
        0 => None,
        ce => Some(string(mem, l, mem.u64(ce + u64::from(l.ce_name))?)?),
    };
    let name = match (class, name) {
        (Some(c), Some(n)) => format!("{c}::{n}"),
        (None, Some(n)) => n,
        (_, None) => "{main}".to_string(),
    };
    if kind == ZEND_INTERNAL_FUNCTION {
        return Some(Function {
            name,
            file: String::new(),
            line_start: 0,
            internal: true,
            opcodes: 0,
            lines: Vec::new(),
        });
    }
    let path = match mem.u64(at(l.op_filename))? {
        0 => String::new(),
        s => string(mem, l, s)?,
    };
    let file = path.rsplit('/').next().unwrap_or(&path).to_string();
    let line_start = mem.u32(at(l.op_line_start))?;
    let last = u64::from(mem.u32(at(l.op_last))?);
    let opcodes = mem.u64(at(l.op_opcodes))?;
    let lines = if last > 0 && last <= MAX_OPS {
        let size = u64::from(l.zop_size);
        mem.bytes(opcodes, (last * size) as usize)
            .map(|b| {
                b.chunks_exact(size as usize)
                    .map(|op| {
                        let o = usize::from(l.zop_lineno);
                        u32::from_le_bytes(op[o..o + 4].try_into().expect("4 bytes"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Some(Function {
        name,
        file,
        line_start,
        internal: false,
        opcodes,
        lines,
    })
}

/// A zend_string's text, lossily; None when it is not a string.
fn string(mem: &Mem, l: &Layout, s: u64) -> Option<String> {
    let type_info = mem.u32(s + 4)?;
    if type_info & 0xf != IS_STRING {
        return None;
    }
    let len = mem.u64(s + u64::from(l.str_len))?.min(MAX_TEXT);
    let bytes = mem.bytes(s + u64::from(l.str_val), len as usize)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// src/runtimes/php/php.bpf.h reads the execute data up to prev_execute_data
    /// (at most 64 bytes, src/runtimes/php/walker.rs) and masks the offsets into it
    /// instead of checking them: each must be inside.
    #[test]
    fn the_walkers_offsets_are_inside_what_it_reads() {
        for l in [LAYOUT_82] {
            let read = l.ex_prev + 8;
            assert!(read <= 64, "php.bpf.h reads at most 64 bytes of execute data, not {read}");
            for off in [l.ex_opline, l.ex_func, l.ex_type_info] {
                assert!(off + 8 <= read, "offset {off} past the {read} bytes php.bpf.h reads");
            }
        }
    }

    #[test]
    fn versions_come_from_the_binarys_name() {
        assert_eq!(version_in_name("/usr/bin/php8.2"), Some((8, 2)));
        assert_eq!(version_in_name("/usr/sbin/php-fpm8.2"), Some((8, 2)));
        assert_eq!(version_in_name("/usr/lib/apache2/modules/libphp8.2.so"), Some((8, 2)));
        assert_eq!(version_in_name("/usr/bin/php"), None);
        assert!(may_be_interpreter("/usr/sbin/php-fpm8.2"));
        assert!(!may_be_interpreter("/usr/bin/python3"));
    }

    #[test]
    fn an_opline_is_on_its_ops_line() {
        let f = Function {
            name: "inner".into(),
            file: "busy.php".into(),
            line_start: 3,
            internal: false,
            opcodes: 0x1000,
            lines: vec![3, 4, 4, 6],
        };
        let op = |i: u64| ((0x1000 + i * 32) >> 3) & ((1 << 18) - 1);
        assert_eq!(f.line(op(1), 18, 32), 4);
        assert_eq!(f.line(op(3), 18, 32), 6);
        assert_eq!(f.line(op(9), 18, 32), 3, "past the ops: the first line");
    }
}
