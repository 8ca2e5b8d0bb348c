//! Python interpreters in the kernel ([`crate::runtimes::interp`]'s contract): each
//! process the probe sees is checked for CPython
//! ([`crate::runtimes::python`]); an interpreter's runtime address and
//! offsets go into `py_procs` for the BPF walker (src/runtimes/python/python.bpf.h).
//! The code objects its stacks name are read from the process when the
//! walker announces them and as the counts are drained, while it lives,
//! and the Python frames of every stack are named at the end.

use std::fs::File;
use std::sync::Arc;

use crate::runtimes::interp::{address_of, Interp, Walker};
use crate::bpf::{types, FgbpfMaps};
use crate::profile::{Evaluator, Pattern};
use crate::runtimes::{Found, Runtime, Settings, BpfWalker};
use crate::procs::maps;
use crate::runtimes::python::code::{CodeReader, Unnamed};
use crate::runtimes::python::{self as py, Interpreter};

/// FG_PY_MARKER of src/runtimes/python/python.h.
pub(crate) const MARKER: u64 = 0xffff_ffff_ffff_ff50;

pub(crate) struct PythonWalker;

pub(crate) type Python = Interp<PythonWalker>;

/// How the summary speaks of it.
pub const LANG: super::super::walks::Lang = super::super::walks::Lang {
    name: "Python",
    whole: "with the Python stack read whole",
    cut: "cut at the 127-frame limit (its outermost Python frames are missing)",
    fault: "cut by interpreter memory that could not be read",
    not_read: "Python frames not read",
    early: "taken before fgbpf was reading the interpreter (native frames only)",
    runtime: "CPython",
    native: "the evaluator's native frames",
    outside: "in threads not running Python (native threads)",
};

/// What the CPython folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::PLUMBING,
    thread_roles: &[],
    marker: Some(MARKER),
    walker_maps: &["py_threads"],
    id_label: None,
};

/// Its walker, when the capture reads Python frames.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(BpfWalker::Python).then(|| Box::new(Python::new(s.no_lines)) as Box<dyn Runtime>)
}

impl Walker for PythonWalker {
    type Found = Interpreter;
    type Reader = CodeReader;
    const MARKER: u64 = MARKER;
    const LANG: &'static super::super::walks::Lang = &LANG;
    /// CPython's bytecode evaluator (`.cold` parts included).
    const EVALUATOR: Evaluator = Evaluator {
        frames: &[Pattern::Prefix("_PyEval_EvalFrameDefault")],
        ..Evaluator::NONE
    };
    const ANNOUNCED: u32 = 3;

    fn procs<'a, 'obj>(maps: &'a FgbpfMaps<'obj>) -> &'a libbpf_rs::MapMut<'obj> {
        &maps.py_procs
    }

    fn results(found: &mut Found) -> (&mut Vec<(u32, (u32, u32), String)>, &mut Vec<(u32, String)>) {
        (&mut found.interpreters, &mut found.py_unsupported)
    }

    fn described(i: &Interpreter) -> ((u32, u32), String) {
        (i.version, i.binary.clone())
    }

    fn may_be(path: &str) -> bool {
        py::may_be_interpreter(path)
    }

    fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Interpreter>, String> {
        py::find(file, path, start, offset)
    }

    /// A file named for a version but without the runtime state fgbpf
    /// reads (before 3.7): said, not silently left native.
    fn unfound(text: &str) -> Option<(String, String)> {
        let (path, (major, minor)) = text
            .lines()
            .filter_map(maps::parse_line)
            .filter(|m| m.exec && m.inode != 0 && py::may_be_interpreter(m.path))
            .find_map(|m| py::version_in_name(m.path).map(|v| (m.path.to_string(), v)))?;
        (major != 3 || py::layout(minor).is_none())
            .then(|| (path, format!("CPython {major}.{minor} (fgbpf reads {})", py::SUPPORTED)))
    }

    fn map_value(i: &Interpreter) -> Vec<u8> {
        let l = &i.layout;
        const NONE: u16 = 0xffff;
        let v = types::fg_py_proc {
            runtime: i.runtime,
            interp_head: l.interp_head,
            threads_head: l.threads_head,
            ts_next: l.ts_next,
            ts_thread_id: l.ts_thread_id,
            ts_frame: l.ts_frame,
            cframe_frame: l.cframe_frame.unwrap_or(NONE),
            f_code: l.f_code,
            f_back: l.f_back,
            f_instr: l.f_instr,
            f_entry: l.f_entry.unwrap_or(NONE),
            co_code: l.co_code,
            kind: l.kind as u8,
            ..Default::default()
        };
        // SAFETY: fg_py_proc is a plain struct of integers.
        unsafe { plain::as_bytes(&v) }.to_vec()
    }

    fn reader(pid: u32, i: &Interpreter) -> CodeReader {
        CodeReader::new(pid, i.clone())
    }

    fn read_word(reader: &mut CodeReader, word: u64) {
        reader.read(address_of(word));
    }

    fn read_announced(reader: &mut CodeReader, addr: u64, _: u64) {
        reader.read(addr);
    }

    fn text(_: &Interpreter, reader: &CodeReader, word: u64, no_lines: bool) -> Arc<str> {
        match reader.get(address_of(word)) {
            Ok(code) => {
                let file = code.file.rsplit('/').next().unwrap_or(&code.file);
                if no_lines {
                    format!("{} ({file})", code.name).into()
                } else {
                    format!("{} ({file}:{})", code.name, code.line(instr_of(word))).into()
                }
            }
            Err(Unnamed::NotCode) => "[python: not a code object]".into(),
            Err(Unnamed::Gone) => "[python: process gone before its code was read]".into(),
        }
    }
}

/// A Python word's instruction: bits 44-62.
fn instr_of(word: u64) -> u64 {
    (word >> 44) & 0x7ffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::interp::ENTRY;

    #[test]
    fn words_pack_code_instruction_and_entry() {
        let w = (0x7f12_3456_7890u64 >> 3) | (1234 << 44) | ENTRY;
        assert_eq!(address_of(w), 0x7f12_3456_7890);
        assert_eq!(instr_of(w), 1234);
    }
}
