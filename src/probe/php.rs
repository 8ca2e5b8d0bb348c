//! PHP interpreters in the kernel: each process the probe sees is checked
//! for PHP ([`crate::procs::php`]); an interpreter's executor globals and
//! offsets go into `php_procs` for the BPF walker (src/bpf/php.bpf.h).
//! The functions its stacks name are read from the process when the walker
//! announces them, and the PHP frames of every stack are named at the end
//! of the capture, in the place Python's and Ruby's take (the same
//! contract: marker word, frames leaf first, entry flags).

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use libbpf_rs::{MapCore, MapFlags};

use super::skel::types;
use crate::procs::maps;
use crate::procs::php::{self, Interpreter, Reader, Unnamed, Unsupported};
use crate::profile::{PyFrame, RawStack};

/// FG_PHP_MARKER and FG_PY_ENTRY of src/bpf/fgbpf.h; the opline's bits.
pub(super) const MARKER: u64 = 0xffff_ffff_ffff_ff52;
const ENTRY: u64 = 1 << 63;
const OPLINE_BITS: u32 = 18;

/// PHP frames named for profiles.
#[derive(Default)]
pub(super) struct Php {
    readers: HashMap<u32, (Interpreter, Reader)>,
    /// Where each tracked process's interpreter was found (start, inode).
    found_at: HashMap<u32, (u64, u64)>,
    /// PHP processes fgbpf cannot read, with why.
    pub unsupported: HashMap<u32, Unsupported>,
    /// Frames named, per (pid, frame word): formatting each once.
    texts: HashMap<(u32, u64), Arc<str>>,
    /// Write `name (file)` instead of `name (file:line)`.
    pub no_lines: bool,
}

impl Php {
    pub fn new(no_lines: bool) -> Self {
        Php {
            no_lines,
            ..Default::default()
        }
    }

    /// Looks for PHP in `pid`'s executable mappings and gives the walker
    /// its executor globals and offsets. True when it added one.
    pub fn track<M: MapCore>(&mut self, pid: u32, text: &str, procs: &M) -> bool {
        for m in text.lines().filter_map(maps::parse_line) {
            if !m.exec || m.inode == 0 || !php::may_be_interpreter(m.path) {
                continue;
            }
            if self.found_at.get(&pid) == Some(&(m.start, m.inode)) {
                return false;
            }
            let path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let Ok(file) = File::open(&path) else { continue };
            match php::find(&file, m.path, m.start, m.offset) {
                Ok(Some(interp)) => {
                    self.found_at.insert(pid, (m.start, m.inode));
                    self.unsupported.remove(&pid);
                    let added = procs
                        .update(&pid.to_ne_bytes(), as_bytes(&value_of(&interp)), MapFlags::ANY)
                        .is_ok();
                    if added {
                        let reader = Reader::new(pid, interp.layout);
                        self.readers.insert(pid, (interp, reader));
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
        false
    }

    /// Reads the functions a stack of `pid` names, while it lives.
    pub fn read(&mut self, pid: u32, user: &[u64]) {
        let Some((_, reader)) = self.readers.get_mut(&pid) else { return };
        let Some(at) = user.iter().position(|&w| w == MARKER) else { return };
        for &w in &user[at + 1..] {
            reader.read(function_of(w));
        }
    }

    /// Reads one function of `pid`, announced by the walker.
    pub fn read_function(&mut self, pid: u32, addr: u64) {
        if let Some((_, reader)) = self.readers.get_mut(&pid) {
            reader.read(addr);
        }
    }

    /// Moves the PHP frames of each stack (and its waker's) out of its
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
        let text: Arc<str> = match self.readers.get(&pid).map(|(i, r)| (i, r.function(function_of(word)))) {
            Some((_, Ok(f))) if f.internal => format!("{} [c function]", f.name).into(),
            Some((interp, Ok(f))) => {
                let file = if f.file.is_empty() { "?" } else { &f.file };
                if self.no_lines {
                    format!("{} ({file})", f.name).into()
                } else {
                    let op = (word >> 44) & ((1 << OPLINE_BITS) - 1);
                    format!("{} ({file}:{})", f.name, f.line(op, OPLINE_BITS, interp.layout.zop_size)).into()
                }
            }
            Some((_, Err(Unnamed::NotFunction))) => "[php: not a function]".into(),
            _ => "[php: process gone before its function was read]".into(),
        };
        self.texts.insert(key, text.clone());
        text
    }

    /// The interpreters found, per process.
    pub fn interpreters(&self) -> impl Iterator<Item = (u32, &Interpreter)> {
        self.readers.iter().map(|(&pid, (i, _))| (pid, i))
    }
}

fn function_of(word: u64) -> u64 {
    (word & ((1 << 44) - 1)) << 3
}

fn value_of(i: &Interpreter) -> types::fg_php_proc {
    let l = &i.layout;
    types::fg_php_proc {
        current: i.current,
        ex_opline: l.ex_opline,
        ex_func: l.ex_func,
        ex_type_info: l.ex_type_info,
        ex_prev: l.ex_prev,
        ex_size: l.ex_prev + 8,
        ..Default::default()
    }
}

fn as_bytes(v: &types::fg_php_proc) -> &[u8] {
    // SAFETY: fg_php_proc is a plain struct of integers.
    unsafe { plain::as_bytes(v) }
}
