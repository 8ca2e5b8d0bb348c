//! Ruby VMs in the kernel: each process the probe sees is checked for
//! libruby ([`crate::procs::ruby`]); a VM's TLS slot and offsets go into
//! `rb_procs` for the BPF walker (src/bpf/ruby.bpf.h). The iseqs and
//! method entries its stacks name are read from the process when the
//! walker announces them, while it lives, and the Ruby frames of every
//! stack are named at the end of the capture, in the place Python's take
//! (the same contract: marker word, frames leaf first, entry flags).

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use libbpf_rs::{MapCore, MapFlags};

use super::skel::types;
use crate::procs::maps;
use crate::procs::ruby::iseq::{Reader, Unnamed};
use crate::procs::ruby::{self as rb, Interpreter, Unsupported};
use crate::profile::{PyFrame, RawStack};

/// FG_RB_MARKER, FG_RB_CFUNC, FG_RB_PC_BITS and FG_PY_ENTRY of
/// src/bpf/fgbpf.h.
pub(super) const MARKER: u64 = 0xffff_ffff_ffff_ff51;
const CFUNC: u64 = 1 << 62;
const PC_BITS: u32 = 18;
const ENTRY: u64 = 1 << 63;

/// The frame text of a C method whose name was not found.
pub const C_METHOD: &str = "[ruby: C method, name not found]";

/// Ruby frames named for profiles.
#[derive(Default)]
pub(super) struct Ruby {
    readers: HashMap<u32, (Interpreter, Reader)>,
    /// Where each tracked process's VM was found (start, inode).
    found_at: HashMap<u32, (u64, u64)>,
    /// Ruby processes fgbpf cannot read, with why.
    pub unsupported: HashMap<u32, Unsupported>,
    /// Frames named, per (pid, frame word): formatting each once.
    texts: HashMap<(u32, u64), Arc<str>>,
    /// Write `label (file)` instead of `label (file:line)`.
    pub no_lines: bool,
}

impl Ruby {
    pub fn new(no_lines: bool) -> Self {
        Ruby {
            no_lines,
            ..Default::default()
        }
    }

    /// Looks for libruby in `pid`'s executable mappings and gives the
    /// walker its TLS slot and offsets. True when it added a VM to `procs`.
    pub fn track<M: MapCore>(&mut self, pid: u32, text: &str, procs: &M) -> bool {
        for m in text.lines().filter_map(maps::parse_line) {
            if !m.exec || m.inode == 0 || !rb::may_be_vm(m.path) {
                continue;
            }
            if self.found_at.get(&pid) == Some(&(m.start, m.inode)) {
                return false;
            }
            let path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let Ok(file) = File::open(&path) else { continue };
            match rb::find(&file, m.path, m.start, m.offset) {
                Ok(Some(vm)) => {
                    self.found_at.insert(pid, (m.start, m.inode));
                    self.unsupported.remove(&pid);
                    let added = procs
                        .update(&pid.to_ne_bytes(), as_bytes(&value_of(&vm)), MapFlags::ANY)
                        .is_ok();
                    if added {
                        let reader = Reader::new(pid, vm.layout, vm.data);
                        self.readers.insert(pid, (vm, reader));
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

    /// Reads the iseqs and method entries a stack of `pid` names, while
    /// it lives.
    pub fn read(&mut self, pid: u32, user: &[u64]) {
        let Some((_, reader)) = self.readers.get_mut(&pid) else { return };
        let Some(at) = user.iter().position(|&w| w == MARKER) else { return };
        for &w in &user[at + 1..] {
            reader.read((w & ((1 << 44) - 1)) << 3, w & CFUNC != 0);
        }
    }

    /// Reads one object of `pid`, announced by the walker.
    pub fn read_object(&mut self, pid: u32, addr: u64, cfunc: bool) {
        if let Some((_, reader)) = self.readers.get_mut(&pid) {
            reader.read(addr, cfunc);
        }
    }

    /// Moves the Ruby frames of each stack (and its waker's) out of its
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
        let mut words = r.user.split_off(at);
        // The VM's own bottom frame (a top-level iseq that never ran an
        // instruction, below the main script's) is no code the thread runs.
        if let Some(&last) = words.last().filter(|_| words.len() > 2) {
            if self.never_ran_top(r.pid, last) {
                words.pop();
            }
        }
        r.python = words[1..]
            .iter()
            .map(|&w| PyFrame {
                text: self.text(r.pid, w),
                entry: w & ENTRY != 0,
            })
            .collect();
    }

    fn never_ran_top(&self, pid: u32, word: u64) -> bool {
        let Some((_, reader)) = self.readers.get(&pid) else { return false };
        if word & CFUNC != 0 {
            return false;
        }
        let pc = (word >> 44) & ((1 << PC_BITS) - 1);
        reader.iseq((word & ((1 << 44) - 1)) << 3).is_ok_and(|i| i.top && i.index(pc, PC_BITS) == 0)
    }

    fn text(&mut self, pid: u32, word: u64) -> Arc<str> {
        let key = (pid, word & !ENTRY);
        if let Some(t) = self.texts.get(&key) {
            return t.clone();
        }
        let addr = (word & ((1 << 44) - 1)) << 3;
        let reader = self.readers.get(&pid).map(|(_, r)| r);
        let text: Arc<str> = if word & CFUNC != 0 {
            match reader.map(|r| r.method(addr)) {
                Some(Ok(name)) => format!("{name} [c function]").into(),
                Some(Err(Unnamed::NotIseq)) => "[ruby: not a method entry]".into(),
                Some(Err(Unnamed::CMethod)) => C_METHOD.into(),
                _ => "[ruby: process gone before its method was read]".into(),
            }
        } else {
            match reader.map(|r| r.iseq(addr)) {
                Some(Ok(iseq)) => {
                    let file = if iseq.file.is_empty() { "?" } else { &iseq.file };
                    if self.no_lines {
                        format!("{} ({file})", iseq.label).into()
                    } else {
                        let pc = (word >> 44) & ((1 << PC_BITS) - 1);
                        format!("{} ({file}:{})", iseq.label, iseq.line(pc, PC_BITS)).into()
                    }
                }
                Some(Err(Unnamed::NotIseq | Unnamed::CMethod)) => "[ruby: not an iseq]".into(),
                _ => "[ruby: process gone before its iseq was read]".into(),
            }
        };
        self.texts.insert(key, text.clone());
        text
    }

    /// The VMs found, per process.
    pub fn vms(&self) -> impl Iterator<Item = (u32, &Interpreter)> {
        self.readers.iter().map(|(&pid, (vm, _))| (pid, vm))
    }
}

fn value_of(vm: &Interpreter) -> types::fg_rb_proc {
    let l = &vm.layout;
    types::fg_rb_proc {
        modid_at: vm.modid_at,
        tls_off: vm.tls_off,
        ec_vm_stack: l.ec_vm_stack,
        ec_stack_size: l.ec_stack_size,
        ec_cfp: l.ec_cfp,
        cfp_size: l.cfp_size,
        cfp_pc: l.cfp_pc,
        cfp_iseq: l.cfp_iseq,
        cfp_ep: l.cfp_ep,
        ..Default::default()
    }
}

fn as_bytes(v: &types::fg_rb_proc) -> &[u8] {
    // SAFETY: fg_rb_proc is a plain struct of integers.
    unsafe { plain::as_bytes(v) }
}
