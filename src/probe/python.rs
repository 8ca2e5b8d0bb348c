//! Python interpreters in the kernel: each process the probe sees is
//! checked for CPython ([`crate::procs::python`]); an interpreter's runtime
//! address and offsets go into `py_procs` for the BPF walker
//! (src/bpf/python.bpf.h). The code objects its stacks name are read from
//! the process as the counts are drained, while it lives, and the Python
//! frames of every stack are named at the end of the capture.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use libbpf_rs::{MapCore, MapFlags};

use super::skel::types;
use crate::procs::maps;
use crate::procs::python::code::{CodeReader, Unnamed};
use crate::procs::python::{self as py, Interpreter, Unsupported};
use crate::profile::{PyFrame, RawStack};

/// FG_PY_MARKER and FG_PY_ENTRY of src/bpf/fgbpf.h.
pub(super) const MARKER: u64 = 0xffff_ffff_ffff_ff50;
const ENTRY: u64 = 1 << 63;

/// Python frames named for profiles.
#[derive(Default)]
pub(super) struct Python {
    readers: HashMap<u32, CodeReader>,
    /// Where each tracked process's interpreter was found (start, inode),
    /// so that a re-read finds nothing new cheaply.
    found_at: HashMap<u32, (u64, u64)>,
    /// Interpreter processes fgbpf cannot read, with why.
    pub unsupported: HashMap<u32, Unsupported>,
    /// Frames named, per (pid, frame word): formatting each once.
    texts: HashMap<(u32, u64), Arc<str>>,
    /// Write `name (file)` instead of `name (file:line)`.
    pub no_lines: bool,
}

impl Python {
    pub fn new(no_lines: bool) -> Self {
        Python {
            no_lines,
            ..Default::default()
        }
    }

    /// Looks for an interpreter in `pid`'s executable mappings (`text`,
    /// its /proc/PID/maps) and gives the walker its offsets.
    /// True when it added an interpreter to `procs`.
    pub fn track<M: MapCore>(&mut self, pid: u32, text: &str, procs: &M) -> bool {
        let mut named = None;
        for m in text.lines().filter_map(maps::parse_line) {
            if !m.exec || m.inode == 0 || !py::may_be_interpreter(m.path) {
                continue;
            }
            named = named.or_else(|| py::version_in_name(m.path).map(|v| (v, m.path.to_string())));
            if self.found_at.get(&pid) == Some(&(m.start, m.inode)) {
                return false;
            }
            let path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let Ok(file) = File::open(&path) else { continue };
            match py::find(&file, m.path, m.start, m.offset) {
                Ok(Some(interp)) => {
                    self.found_at.insert(pid, (m.start, m.inode));
                    self.unsupported.remove(&pid);
                    let added = procs
                        .update(&pid.to_ne_bytes(), as_bytes(&value_of(&interp)), MapFlags::ANY)
                        .is_ok();
                    if added {
                        self.readers.insert(pid, CodeReader::new(pid, interp));
                    }
                    return added;
                }
                Ok(None) => {}
                Err(why) => {
                    self.found_at.insert(pid, (m.start, m.inode));
                    self.unsupported.insert(pid, why);
                    return false;
                }
            }
        }
        // A file named for a version but without the runtime state fgbpf
        // reads (before 3.7): said, not silently left native. Not yet
        // final: a libpython may still be mapped.
        if let Some(((major, minor), binary)) = named {
            if py::layout(minor).is_none() || major != 3 {
                let why = format!("CPython {major}.{minor} (fgbpf reads {})", py::SUPPORTED);
                self.unsupported.insert(pid, Unsupported { binary, why });
            }
        }
        false
    }

    /// Reads the code objects a stack of `pid` names, while it lives.
    pub fn read(&mut self, pid: u32, user: &[u64]) {
        let Some(reader) = self.readers.get_mut(&pid) else { return };
        for &w in python_words(user) {
            reader.read(code_of(w));
        }
    }

    /// Reads one code object of `pid`, announced by the walker.
    pub fn read_code(&mut self, pid: u32, addr: u64) {
        if let Some(reader) = self.readers.get_mut(&pid) {
            reader.read(addr);
        }
    }

    /// Moves the Python frames of each stack (and its waker's) out of its
    /// user frames, named.
    pub fn name(&mut self, stacks: &mut [RawStack]) {
        for r in stacks {
            self.split(r);
            if let Some(w) = r.waker.as_deref_mut() {
                self.split(w);
            }
        }
    }

    fn split(&mut self, r: &mut RawStack) {
        let Some(at) = r.user.iter().position(|&w| w == MARKER) else { return };
        let words = r.user.split_off(at);
        self.read(r.pid, &words);
        r.python = words[1..]
            .iter()
            .map(|&w| PyFrame {
                text: self.text(r.pid, w),
                entry: w & ENTRY != 0,
            })
            .collect();
    }

    fn text(&mut self, pid: u32, word: u64) -> Arc<str> {
        let key = (pid, word & !ENTRY);
        if let Some(t) = self.texts.get(&key) {
            return t.clone();
        }
        let text: Arc<str> = match self.readers.get(&pid).map(|r| r.get(code_of(word))) {
            Some(Ok(code)) => {
                let file = code.file.rsplit('/').next().unwrap_or(&code.file);
                if self.no_lines {
                    format!("{} ({file})", code.name).into()
                } else {
                    format!("{} ({file}:{})", code.name, code.line(instr_of(word))).into()
                }
            }
            Some(Err(Unnamed::NotCode)) => "[python: not a code object]".into(),
            _ => "[python: process gone before its code was read]".into(),
        };
        self.texts.insert(key, text.clone());
        text
    }

    /// The interpreters found, per process.
    pub fn interpreters(&self) -> impl Iterator<Item = (u32, &Interpreter)> {
        self.readers.iter().map(|(&pid, r)| (pid, r.interpreter()))
    }
}

/// The Python words of a stored user stack, after its marker.
fn python_words(user: &[u64]) -> &[u64] {
    match user.iter().position(|&w| w == MARKER) {
        Some(at) => &user[at + 1..],
        None => &[],
    }
}

fn code_of(word: u64) -> u64 {
    (word & ((1 << 44) - 1)) << 3
}

fn instr_of(word: u64) -> u64 {
    (word >> 44) & 0x7ffff
}

fn value_of(i: &Interpreter) -> types::fg_py_proc {
    let l = &i.layout;
    const NONE: u16 = 0xffff;
    types::fg_py_proc {
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
    }
}

fn as_bytes(v: &types::fg_py_proc) -> &[u8] {
    // SAFETY: fg_py_proc is a plain struct of integers.
    unsafe { plain::as_bytes(v) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_pack_code_instruction_and_entry() {
        let w = (0x7f12_3456_7890u64 >> 3) | (1234 << 44) | ENTRY;
        assert_eq!(code_of(w), 0x7f12_3456_7890);
        assert_eq!(instr_of(w), 1234);
        assert_eq!(python_words(&[1, 2, MARKER, w]), &[w]);
        assert!(python_words(&[1, 2]).is_empty());
    }
}
