//! CPython interpreters in profiled processes: which processes run one,
//! where its runtime state is, and the structure offsets of its version,
//! for the BPF walker of interpreter frames (src/runtimes/python/python.bpf.h) and for
//! naming the code objects it records ([`code`]). Versions 3.8 to 3.13 are
//! known; the offsets were read from the DWARF of CPython's own release
//! builds (`scripts/python-offsets.py`, which tests/python.rs runs
//! against every installed CPython), and 3.13+ binaries carry them
//! in `_Py_DebugOffsets`, which is read and preferred. A process running
//! any other version keeps its native frames, with the reason.

pub mod walker;
pub mod code;

use std::fs::File;

use object::{Object, ObjectSymbol};

use crate::procs::elf::load_bias;

/// How an interpreter's frames chain and where each records its
/// instruction (the BPF side's enum fg_py_kind): a version's layout, not
/// what kind of code a frame is (that is [`crate::procs::frame_kind`]'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameChain {
    /// 3.8-3.10: PyFrameObject, one evaluator call per frame.
    FrameObject = 1,
    /// 3.11: _PyInterpreterFrame, entry frames flagged.
    EntryFlag = 2,
    /// 3.12+: _PyInterpreterFrame, entries marked by shim frames.
    Shim = 3,
}

/// How a code object maps instructions to lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineTable {
    /// 3.8-3.9 `co_lnotab`, indexed by byte offset.
    Lnotab,
    /// 3.10 `co_linetable`, by byte offset (f_lasti counts 2-byte units).
    Linetable310,
    /// 3.11+ location table (PEP 657), by 2-byte code unit.
    Locations,
}

/// Offsets into the structures of one CPython version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub kind: FrameChain,
    pub interp_head: u16,
    pub threads_head: u16,
    pub ts_next: u16,
    pub ts_thread_id: u16,
    pub ts_frame: u16,
    /// `_PyCFrame::current_frame` (3.11, 3.12); `None`: no indirection.
    pub cframe_frame: Option<u16>,
    pub f_code: u16,
    pub f_back: u16,
    pub f_instr: u16,
    /// `is_entry` (3.11) or `owner` (3.12+).
    pub f_entry: Option<u16>,
    /// `co_code_adaptive` (3.11+), 0 before.
    pub co_code: u16,
    pub co_filename: u16,
    pub co_name: u16,
    pub co_qualname: Option<u16>,
    pub co_firstlineno: u16,
    pub co_linetable: u16,
    pub lines: LineTable,
    /// sizeof(PyASCIIObject) and sizeof(PyCompactUnicodeObject): where a
    /// compact string's characters start.
    pub ascii_data: u16,
    pub compact_data: u16,
}

const LAYOUT_38: Layout = Layout {
    kind: FrameChain::FrameObject,
    interp_head: 32,
    threads_head: 8,
    ts_next: 8,
    ts_thread_id: 176,
    ts_frame: 24,
    cframe_frame: None,
    f_code: 32,
    f_back: 24,
    f_instr: 104,
    f_entry: None,
    co_code: 0,
    co_filename: 104,
    co_name: 112,
    co_qualname: None,
    co_firstlineno: 40,
    co_linetable: 120,
    lines: LineTable::Lnotab,
    ascii_data: 48,
    compact_data: 72,
};

const LAYOUT_310: Layout = Layout {
    f_instr: 96,
    lines: LineTable::Linetable310,
    ..LAYOUT_38
};

const LAYOUT_311: Layout = Layout {
    kind: FrameChain::EntryFlag,
    interp_head: 40,
    threads_head: 16,
    ts_next: 8,
    ts_thread_id: 152,
    ts_frame: 56,
    cframe_frame: Some(8),
    f_code: 32,
    f_back: 48,
    f_instr: 56,
    f_entry: Some(68),
    co_code: 184,
    co_filename: 112,
    co_name: 120,
    co_qualname: Some(128),
    co_firstlineno: 72,
    co_linetable: 136,
    lines: LineTable::Locations,
    ascii_data: 48,
    compact_data: 72,
};

const LAYOUT_312: Layout = Layout {
    kind: FrameChain::Shim,
    threads_head: 72,
    ts_thread_id: 136,
    cframe_frame: Some(0),
    f_code: 0,
    f_back: 8,
    f_entry: Some(70),
    co_code: 192,
    co_firstlineno: 68,
    ascii_data: 40,
    compact_data: 56,
    ..LAYOUT_311
};

const LAYOUT_313: Layout = Layout {
    interp_head: 632,
    threads_head: 7344,
    ts_thread_id: 152,
    ts_frame: 72,
    cframe_frame: None,
    co_code: 200,
    ..LAYOUT_312
};

/// The known layout of CPython 3.`minor`.
pub fn layout(minor: u32) -> Option<Layout> {
    match minor {
        8 | 9 => Some(LAYOUT_38),
        10 => Some(LAYOUT_310),
        11 => Some(LAYOUT_311),
        12 => Some(LAYOUT_312),
        13 => Some(LAYOUT_313),
        _ => None,
    }
}

/// The versions fgbpf reads, for messages and docs/runtimes/python.md.
pub const SUPPORTED: &str = "3.8 to 3.13";

/// CPython's evaluator, entry points and call dispatch, and its C API.
pub const PLUMBING: super::Plumbing = super::Plumbing {
    exact: &[
        "_PyEval_EvalFrameDefault",
        "_PyEval_EvalFrame",
        "_PyEval_Vector",
        "_PyFunction_Vectorcall",
        "_PyObject_VectorcallTstate",
        "_PyObject_Call",
        "PyObject_Call",
        "PyObject_Vectorcall",
        "_PyObject_MakeTpCall",
        "PyEval_EvalCode",
        "run_eval_code_obj",
        "run_mod",
        "pyrun_file",
        "_PyRun_SimpleFileObject",
        "_PyRun_AnyFileObject",
        "pymain_run_file",
        "pymain_run_file_obj",
        "pymain_run_python",
        "Py_RunMain",
        "Py_BytesMain",
        "pymain_main",
        "thread_run",
        "pythread_wrapper",
    ],
    prefixes: &["cfunction_call", "cfunction_vectorcall", "method_vectorcall", "_PyEval_EvalFrame"],
    libraries: &["Py", "_Py"],
};

/// A CPython interpreter found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    /// Major and minor version, e.g. (3, 11).
    pub version: (u32, u32),
    /// Address of `_PyRuntime` in the process.
    pub runtime: u64,
    pub layout: Layout,
    /// The file it was found in (the executable or libpython), untrusted.
    pub binary: String,
    /// Whether the offsets came from the binary's `_Py_DebugOffsets`.
    pub from_debug_offsets: bool,
}

/// Whether a mapped file may hold the interpreter: `python3.X`,
/// `libpython3.X.so...`, by name, before anything is opened.
pub fn may_be_interpreter(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.starts_with("python") || base.starts_with("libpython")
}

/// Looks for the interpreter in a file mapped executable at `start` from
/// file offset `offset`: `Ok(None)` when the file has no `_PyRuntime` (not
/// an interpreter: a launcher, or a module named python*).
/// `Err`: it is one, but one fgbpf cannot read, and why.
pub fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
    let Some(data) = crate::procs::elf::map(file) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let symbol = |name: &str| {
        obj.dynamic_symbols()
            .chain(obj.symbols())
            .find(|s| s.name() == Ok(name) && s.address() != 0)
            .map(|s| s.address())
    };
    let Some(runtime_vaddr) = symbol("_PyRuntime") else {
        return Ok(None);
    };
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err("its load address could not be worked out".into());
    };
    let read_at = |vaddr: u64, len: usize| -> Option<&[u8]> {
        let off = file_offset(&obj, vaddr)?;
        data.get(off as usize..off as usize + len)
    };
    // Py_Version (3.11+) holds PY_VERSION_HEX; older versions say theirs
    // only in their file name.
    let version = match symbol("Py_Version").and_then(|v| read_at(v, 4)) {
        Some(b) => {
            let hex = u32::from_le_bytes(b.try_into().expect("4 bytes"));
            (hex >> 24, (hex >> 16) & 0xff)
        }
        None => match version_in_name(path) {
            Some(v) => v,
            None => return Err("its version could not be read".into()),
        },
    };
    let Some(mut layout) = (version.0 == 3).then(|| layout(version.1)).flatten() else {
        return Err(format!(
            "CPython {}.{} (fgbpf reads {SUPPORTED})",
            version.0, version.1
        ));
    };
    let mut from_debug_offsets = false;
    if version >= (3, 13) {
        // The static initializer of _PyRuntime starts with its debug
        // offsets: in the file, before the process has even run.
        match read_at(runtime_vaddr, DEBUG_OFFSETS_LEN).and_then(debug_offsets) {
            Some(d) => {
                from_debug_offsets = d != layout;
                layout = d;
            }
            None => return Err("its _Py_DebugOffsets could not be read".into()),
        }
    }
    Ok(Some(Interpreter {
        version,
        runtime: runtime_vaddr.wrapping_add(bias),
        layout,
        binary: path.to_string(),
        from_debug_offsets,
    }))
}

fn file_offset(obj: &object::File<'_>, vaddr: u64) -> Option<u64> {
    use object::ObjectSegment;
    obj.segments().find_map(|s| {
        let (off, size) = s.file_range();
        (vaddr >= s.address() && vaddr - s.address() < size).then(|| vaddr - s.address() + off)
    })
}

/// `(3, minor)` from `python3.minor` or `libpython3.minor...`.
pub fn version_in_name(path: &str) -> Option<(u32, u32)> {
    let base = path.rsplit('/').next()?;
    let rest = base.strip_prefix("lib").unwrap_or(base).strip_prefix("python3.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((3, digits.parse().ok()?))
}

/// Bytes of `_Py_DebugOffsets` read, up to `co_code_adaptive`.
const DEBUG_OFFSETS_LEN: usize = 352;

/// The layout `_Py_DebugOffsets` (3.13) gives, from its first bytes.
fn debug_offsets(b: &[u8]) -> Option<Layout> {
    if b.get(..8)? != b"xdebugpy" {
        return None;
    }
    let at = |o: usize| -> Option<u16> {
        let v = u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?);
        u16::try_from(v).ok()
    };
    Some(Layout {
        interp_head: at(40)?,
        threads_head: at(72)?,
        ts_next: at(168)?,
        ts_frame: at(184)?,
        ts_thread_id: at(192)?,
        f_back: at(232)?,
        f_code: at(240)?,
        f_instr: at(248)?,
        f_entry: Some(at(264)?),
        co_filename: at(280)?,
        co_name: at(288)?,
        co_qualname: Some(at(296)?),
        co_linetable: at(304)?,
        co_firstlineno: at(312)?,
        co_code: at(344)?,
        ..LAYOUT_313
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_names_when_the_binary_does_not_say() {
        assert_eq!(version_in_name("/usr/lib/libpython3.9.so.1.0"), Some((3, 9)));
        assert_eq!(version_in_name("/usr/bin/python3.10"), Some((3, 10)));
        assert_eq!(version_in_name("/usr/bin/python"), None);
        assert!(may_be_interpreter("/opt/py/lib/libpython3.12.so.1.0"));
        assert!(!may_be_interpreter("/usr/lib/libc.so.6"));
    }

    #[test]
    fn debug_offsets_need_their_cookie() {
        assert_eq!(debug_offsets(&[0; DEBUG_OFFSETS_LEN]), None);
    }
}
