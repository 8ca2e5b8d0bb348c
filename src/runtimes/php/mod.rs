//! PHP interpreters in profiled processes (the CLI, php-fpm's workers, the
//! CGI): which processes run one and which version (what the binary says
//! of itself, else its name), where the BPF walker
//! (src/runtimes/php/php.bpf.h) finds the current execute data, the
//! offsets of its version (layouts.rs, generated from each version's own
//! headers by scripts/php-layouts.sh, which tests/php.rs runs to compare),
//! the checks before a layout is trusted (the binary's module API and
//! thread safety, `executor_globals`' size, the live process's current
//! function), and naming the functions it records. `executor_globals` is
//! a dynamic symbol of PHP's NTS builds (stripped ones too). Every byte
//! read from the target is untrusted: the function's type and its
//! strings' types are checked, lengths capped, text decoded lossily.

pub mod walker;
use std::fs::File;

use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable};

use crate::procs::elf::load_bias;
use crate::procs::lookup::{Lookup, Reason};
use crate::procs::mem::Mem;

/// Offsets into the structures of one PHP version (NTS, x86_64), as
/// scripts/php-layouts.sh writes them into layouts.rs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// (major, minor).
    pub version: (u32, u32),
    /// ZEND_MODULE_API_NO: the binary says it in its build id,
    /// `API20240924,NTS`.
    pub api: u32,
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

mod layouts;
pub use layouts::{LAYOUTS, LAYOUT_82, LAYOUT_84};

/// The known layout of PHP `version` (major, minor).
pub fn layout(version: (u32, u32)) -> Option<Layout> {
    LAYOUTS.iter().find(|l| l.version == version).copied()
}

/// The versions fgbpf reads, for messages and docs/runtimes/php.md.
pub const SUPPORTED: &str = "7.4, 8.2 and 8.4";

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

/// What a PHP binary says of itself in its read-only data: its version
/// (`X-Powered-By: PHP/8.4.27`), its module API and whether it is
/// thread-safe (its build id, `API20240924,NTS`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Said {
    pub version: Option<(u32, u32)>,
    /// The full version, `8.4.27`.
    pub release: Option<String>,
    pub api: Option<u32>,
    pub zts: Option<bool>,
}

/// Reads [`Said`] from a binary's `.rodata` (untrusted bytes: only digits
/// and dots are taken after each marker, at most 16).
pub fn said(rodata: &[u8]) -> Said {
    let after = |marker: &[u8]| -> Option<&[u8]> {
        let at = rodata.windows(marker.len()).position(|w| w == marker)? + marker.len();
        Some(&rodata[at..rodata.len().min(at + 20)])
    };
    let digits = |b: &[u8]| -> String { b.iter().take_while(|c| c.is_ascii_digit() || **c == b'.').take(16).map(|&c| c as char).collect() };
    let release = after(b"X-Powered-By: PHP/").map(digits).filter(|r| r.split('.').count() >= 2);
    let version = release.as_deref().and_then(|r| {
        let mut p = r.split('.').map(|x| x.parse::<u32>().ok());
        Some((p.next()??, p.next()??))
    });
    let (mut api, mut zts) = (None, None);
    // The build id is `API` then ZEND_MODULE_API_NO (8 digits), then
    // `,NTS` or `,TS` (and a compiler's suffix on Windows).
    let mut from = 0;
    while let Some(at) = rodata[from..].windows(3).position(|w| w == b"API") {
        let rest = &rodata[from + at + 3..];
        let n = digits(rest);
        if n.len() == 8 && !n.contains('.') {
            let tail = &rest[8..];
            if tail.starts_with(b",NTS") || tail.starts_with(b",TS") {
                api = n.parse().ok();
                zts = Some(tail.starts_with(b",TS"));
                break;
            }
        }
        from += at + 3;
    }
    Said { version, release, api, zts }
}

/// Looks for the interpreter in a file mapped executable at `start` from
/// file offset `offset`: `Ok(None)` when it is none. `Err`: it is one, but
/// one fgbpf cannot read, and why. Its version is what the binary says
/// (a renamed `php`, as official images name it, is read too), else its
/// name's; the binary must agree with the version's layout (its module
/// API, `executor_globals`' size) before the layout is trusted.
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
    let eg = symbol("executor_globals");
    // A thread-safe build keeps its globals per thread, found through
    // an offset (PHP 8) or an id (PHP 7) into the thread's resources.
    let zts = eg.is_none() && (symbol("executor_globals_offset").is_some() || symbol("executor_globals_id").is_some());
    if eg.is_none() && !zts {
        return Ok(None);
    }
    let rodata = obj.section_by_name(".rodata").and_then(|s| s.data().ok()).unwrap_or_default();
    let said = said(rodata);
    let version = said.version.or_else(|| version_in_name(path));
    let named = match (&said.release, version) {
        (Some(r), _) => format!("PHP {r}"),
        (None, Some(v)) => format!("PHP {}.{}", v.0, v.1),
        (None, None) => "PHP".to_string(),
    };
    if zts || said.zts == Some(true) {
        return Err(format!("{named}, a thread-safe (ZTS) build (fgbpf reads NTS builds)"));
    }
    let Some(eg) = eg else { return Ok(None) };
    let Some(version) = version else {
        return Err("its version could not be read from the binary or its name".into());
    };
    let Some(layout) = layout(version) else {
        return Err(format!("{named} (fgbpf reads {SUPPORTED})"));
    };
    if let Some(api) = said.api.filter(|&a| a != layout.api) {
        return Err(format!(
            "{named}, whose module API is {api}, not PHP {}.{}'s {} (a build fgbpf does not know)",
            version.0, version.1, layout.api
        ));
    }
    if eg.size() != layout.eg_size {
        return Err(format!(
            "{named}: its executor_globals is {} bytes, not PHP {}.{}'s {} (a thread-safe build, or another layout)",
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

/// How many times [`check`] reads the current function before it refuses:
/// the process runs on while it is read, and a frame may end between two
/// reads.
const CHECK_TRIES: u32 = 5;

/// Reads what the layout says the process must hold before the walker
/// trusts it: `executor_globals.current_execute_data` is either none (no
/// script running yet, or between requests) or execute data whose
/// function reads as a zend_function (its type, name, class and file
/// strings). `Err`: why the layout does not fit the process.
pub fn check(mem: &Mem, i: &Interpreter) -> Result<(), String> {
    let l = &i.layout;
    for _ in 0..CHECK_TRIES {
        let Some(ex) = mem.u64(i.current) else {
            return Err("its executor_globals could not be read".into());
        };
        if ex == 0 {
            return Ok(());
        }
        let func = mem.u64(ex + u64::from(l.ex_func)).unwrap_or(0);
        if func != 0 && read_function(mem, l, func).is_some() {
            return Ok(());
        }
    }
    Err(format!(
        "its current execute data does not hold a function as PHP {}.{}'s layout reads it",
        i.version.0, i.version.1
    ))
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
        for l in LAYOUTS {
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
    fn a_binary_says_its_version_api_and_thread_safety() {
        let rodata = b"\0API420240924,NTS\0junk API2024\0API20240924,NTS\0X-Powered-By: PHP/8.4.27\0";
        let s = said(rodata);
        assert_eq!(s.version, Some((8, 4)));
        assert_eq!(s.release.as_deref(), Some("8.4.27"));
        assert_eq!(s.api, Some(20240924));
        assert_eq!(s.zts, Some(false));
        assert_eq!(said(b"API20220829,TS\0").zts, Some(true));
        assert_eq!(said(b"X-Powered-By: PHP/\xff\0"), Said::default(), "no digits: nothing said");
    }

    /// `check` on memory laid out as PHP 8.4's, in this process (read
    /// through /proc/self/mem, as a target is): no execute data, a
    /// function that reads as one, and one that does not.
    #[test]
    fn the_check_reads_the_current_function() {
        let l = LAYOUT_84;
        // A zend_string: refcount, type_info (IS_STRING), hash, len, val.
        let string = |text: &str| -> Vec<u64> {
            let mut w = vec![1 | (u64::from(IS_STRING) << 32), 0, text.len() as u64];
            let mut bytes = text.as_bytes().to_vec();
            bytes.resize(text.len().div_ceil(8) * 8 + 8, 0);
            w.extend(bytes.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())));
            w
        };
        let (name, file) = (string("inner"), string("/srv/busy.php"));
        // Every other word points at bytes that are no string, as a live
        // op_array's other fields are no strings.
        let garbage = [u64::MAX; 8];
        let mut function = vec![garbage.as_ptr() as u64; 64];
        function[0] = u64::from(ZEND_USER_FUNCTION);
        function[usize::from(l.fn_scope) / 8] = 0;
        function[usize::from(l.fn_name) / 8] = name.as_ptr() as u64;
        function[usize::from(l.op_filename) / 8] = file.as_ptr() as u64;
        let mut not_function = function.clone();
        not_function[0] = 9;
        let mut ex = [0u64; 8];
        let mut current = [0u64; 1];
        let mem = Mem::open(std::process::id()).unwrap();
        let i = Interpreter { version: l.version, current: current.as_ptr() as u64, layout: l, binary: "php8.4".into() };
        assert_eq!(check(&mem, &i), Ok(()), "no execute data yet");
        current[0] = ex.as_ptr() as u64;
        ex[usize::from(l.ex_func) / 8] = function.as_ptr() as u64;
        std::hint::black_box((&current, &ex));
        assert_eq!(check(&mem, &i), Ok(()));
        ex[usize::from(l.ex_func) / 8] = not_function.as_ptr() as u64;
        std::hint::black_box((&current, &ex));
        let why = check(&mem, &i).unwrap_err();
        assert!(why.contains("does not hold a function as PHP 8.4's layout reads it"), "{why}");
        // PHP 8.2's layout on 8.4's memory: the file is not where 8.2 has it.
        let old = Interpreter { layout: LAYOUT_82, version: (8, 2), ..i.clone() };
        ex[usize::from(l.ex_func) / 8] = function.as_ptr() as u64;
        std::hint::black_box((&current, &ex));
        assert!(check(&mem, &old).is_err(), "8.2's layout read 8.4's function");
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
