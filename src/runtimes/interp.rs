//! What the interpreter walkers' user-space halves share (CPython's
//! [`super::python`], Ruby's [`super::ruby`], PHP's [`super::php`]):
//! finding the interpreter in a process's
//! mappings and handing its offsets to the BPF walker, reading the objects
//! the walker announces while the process lives, and, when the capture
//! ends, moving each stack's words after the walker's marker out of its
//! native frames, named, into the frames that take the place of the
//! evaluator's (the contract of src/bpf/fgbpf.h: frames leaf first, bit
//! 63 on the outermost frame of one evaluator call).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};

use super::shared::{Executable, Renamed};
use super::{interp_added, Announcement, Found, Runtime};
use crate::bpf::{FgbpfMaps, FgbpfSkel};
use crate::procs::maps;
use crate::procs::mem::Mem;
use crate::procs::frame_kind::FrameKind;
use crate::profile::{Evaluator, InterpFrame, Pattern, RawStack};
use crate::symbolize::Named;

/// FG_INTERP_ENTRY of src/bpf/fgbpf.h.
pub(crate) const ENTRY: u64 = 1 << 63;

/// The object's address in bits 0-43 of a word (>> 3).
pub(crate) fn address_of(word: u64) -> u64 {
    (word & ((1 << 44) - 1)) << 3
}

/// The bits 44-61 of a word: bits 3-20 of the frame's instruction pointer.
pub(crate) fn pc_bits_of(word: u64) -> u64 {
    (word >> 44) & ((1 << PC_BITS) - 1)
}

pub(crate) const PC_BITS: u32 = 18;

/// How long after its first failure an interpreter's check
/// ([`Walker::check`]) is made again at each tick, before the failure is
/// taken as final: a VM still booting (its symbols being interned, its
/// library's data being mapped) under heavy load.
const RECHECK_FOR: Duration = Duration::from_secs(2);

/// An interpreter found and not yet given to its walker: its check failed.
pub(crate) struct Pending<F> {
    found: F,
    binary: String,
    /// Where it was found (start, inode).
    at: (u64, u64),
    /// Its first check's failure.
    since: Instant,
}

impl<F> Pending<F> {
    fn new(found: F, binary: &str, at: (u64, u64)) -> Self {
        Pending { found, binary: binary.to_string(), at, since: Instant::now() }
    }
}

/// The maps of interp.bpf.h only the walkers use: which processes run an
/// interpreter, cached per CPU.
pub(crate) const WALKER_MAPS: [&str; 2] = ["interp_seen", "interp_seen_cache"];

/// One interpreter's side of the contract.
pub(crate) trait Walker {
    /// An interpreter found in a process, and what names its objects.
    type Found;
    type Reader;
    /// The marker word the BPF walker writes before the frames.
    const MARKER: u64;
    /// Its evaluator's native frames, whose places its frames take.
    const EVALUATOR: Evaluator;
    /// How the summary speaks of it.
    const LANG: &'static super::walks::Lang;
    /// The kind of its walker's announcements (enum fg_proc_event_kind of
    /// src/bpf/fgbpf.h).
    const ANNOUNCED: u32;
    /// Its walker's map of processes.
    fn procs<'a, 'obj>(maps: &'a FgbpfMaps<'obj>) -> &'a libbpf_rs::MapMut<'obj>;
    /// Where what it found goes: (pid, version, binary) of each
    /// interpreter read, and (pid, why) of those fgbpf cannot read.
    #[allow(clippy::type_complexity)]
    fn results(found: &mut Found) -> (&mut Vec<(u32, (u32, u32), String)>, &mut Vec<(u32, String)>);
    /// An interpreter's version and binary.
    fn described(found: &Self::Found) -> ((u32, u32), String);
    /// Whether a mapped file may hold the interpreter, by name.
    fn may_be(path: &str) -> bool;
    /// The interpreter in a file mapped executable at `start` from file
    /// offset `offset`; `Err(why)` for one fgbpf cannot read.
    fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Self::Found>, String>;
    /// Before the walker is given the interpreter found in `pid`: reads
    /// something of the live process whose answer the layout knows, and
    /// says why the layout does not fit it if it does not. One that fails
    /// is made again at each tick for [`RECHECK_FOR`].
    fn check(_mem: &Mem, _found: &Self::Found) -> Result<(), String> {
        Ok(())
    }
    /// When no mapping held an interpreter: one that is there but that
    /// fgbpf cannot read, found by other means (binary, why).
    fn unfound(_maps: &str) -> Option<(String, String)> {
        None
    }
    /// What the summary says of a process besides how its stacks were
    /// read (Ruby: that a JIT runs, whose frames' lines are not read).
    fn note(_found: &Self::Found, _reader: &Self::Reader) -> Option<String> {
        None
    }
    /// Whether the native frame at `addr` (the leaf's pc when `leaf`, else
    /// a return address) is the evaluator's, where its binary does not
    /// name it (Ruby 3.3's hidden rb_vm_exec): it is then written as
    /// [`crate::runtimes::EVALUATOR_WORD`], named as the first of
    /// [`Self::EVALUATOR`]'s frames given by its whole name.
    fn evaluator_at(_found: &Self::Found, _addr: u64, _leaf: bool) -> bool {
        false
    }
    /// Its entry in the walker's map of processes.
    fn map_value(found: &Self::Found) -> Vec<u8>;
    fn reader(pid: u32, found: &Self::Found) -> Self::Reader;
    /// Reads the object a word, or an announcement (`addr`, `addr2`),
    /// names; once.
    fn read_word(reader: &mut Self::Reader, word: u64);
    fn read_announced(reader: &mut Self::Reader, addr: u64, addr2: u64);
    /// A frame's text.
    fn text(found: &Self::Found, reader: &Self::Reader, word: u64, no_lines: bool) -> Arc<str>;
    /// Whether a frame's text depends on its caller's word too (LuaJIT:
    /// a function's name is in its caller's bytecode): then it is given
    /// by [`Self::text_called`].
    const NAMED_BY_CALLER: bool = false;
    /// A frame's text, given its caller's word when the caller is a frame
    /// of the same run of the evaluator (the frame is no entry).
    fn text_called(found: &Self::Found, reader: &Self::Reader, word: u64, _caller: Option<u64>, no_lines: bool) -> Arc<str> {
        Self::text(found, reader, word, no_lines)
    }
    /// Frames the walker recorded that are no code the thread runs, at the
    /// outermost end (Ruby's VM bottom frame): how many to drop.
    fn not_running(_reader: &Self::Reader, _words: &[u64]) -> usize {
        0
    }
}

/// One interpreter's processes, as the capture finds them.
pub(crate) struct Interp<W: Walker> {
    readers: HashMap<u32, (W::Found, W::Reader)>,
    /// Where each tracked process's interpreter was found (start, inode),
    /// so that a re-read finds nothing new cheaply.
    found_at: HashMap<u32, (u64, u64)>,
    /// Processes fgbpf cannot read: pid → (binary, why).
    pub unsupported: HashMap<u32, (String, String)>,
    /// Interpreters found whose check failed, checked again at each tick
    /// for a while ([`Self::checked`]).
    pending: HashMap<u32, Pending<W::Found>>,
    /// Frames named, per (pid, frame word): formatting each once.
    texts: HashMap<(u32, u64, u64), Arc<str>>,
    /// Write `name (file)` instead of `name (file:line)`.
    no_lines: bool,
    /// The processes with stacks through an evaluator their binary does
    /// not name ([`Walker::evaluator_at`]).
    hidden_evaluator: HashSet<u32>,
    /// Executables looked into despite their names, and not the
    /// interpreter.
    renamed: Renamed,
}

impl<W: Walker> Interp<W> {
    pub fn new(no_lines: bool) -> Self {
        Interp {
            readers: HashMap::new(),
            found_at: HashMap::new(),
            unsupported: HashMap::new(),
            pending: HashMap::new(),
            texts: HashMap::new(),
            no_lines,
            hidden_evaluator: HashSet::new(),
            renamed: Renamed::default(),
        }
    }

    /// Looks for the interpreter in `pid`'s executable mappings (`text`,
    /// its /proc/PID/maps), those named as its and the process's own
    /// executable whatever its name ([`Renamed`]), and gives the walker
    /// its entry in `procs`. True when it added one.
    pub fn track<M: MapCore>(&mut self, pid: u32, text: &str, procs: &M) -> bool {
        let mut exe = Executable::default();
        for m in text.lines().filter_map(maps::parse_line) {
            let is_exe = exe.is(&m);
            if !m.exec || m.inode == 0 || !self.renamed.worth(&m, is_exe, W::may_be) {
                continue;
            }
            if self.found_at.get(&pid) == Some(&(m.start, m.inode)) {
                return false;
            }
            let path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let Ok(file) = File::open(&path) else { continue };
            match W::find(&file, m.path, m.start, m.offset) {
                Ok(Some(found)) => return self.checked(pid, procs, Pending::new(found, m.path, (m.start, m.inode))),
                Ok(None) => self.renamed.not_it(&m, W::may_be),
                Err(why) => {
                    self.found_at.insert(pid, (m.start, m.inode));
                    self.unsupported.insert(pid, (m.path.to_string(), why));
                    return false;
                }
            }
        }
        // Not yet final: the interpreter may still be mapped later.
        if let Some(u) = W::unfound(text) {
            self.unsupported.insert(pid, u);
        }
        false
    }

    /// Checks the interpreter found in `pid` ([`Walker::check`]) and, when
    /// it passes, gives the walker its entry in `procs`: true when added.
    /// One that fails is checked again at each tick ([`Self::recheck`])
    /// for [`RECHECK_FOR`] after its first failure, a VM caught booting
    /// changing under the read; until one passes its walker is given
    /// nothing (its samples are counted as taken before fgbpf was reading
    /// it), and the summary says why.
    fn checked<M: MapCore>(&mut self, pid: u32, procs: &M, mut p: Pending<W::Found>) -> bool {
        let why = match Mem::open(pid) {
            Ok(mem) => W::check(&mem, &p.found).err(),
            // Gone already: nothing to read, and nothing walked.
            Err(_) => None,
        };
        if let Some(why) = why {
            self.unsupported.insert(pid, (p.binary.clone(), why));
            p.since = self.pending.remove(&pid).map_or(p.since, |q| q.since);
            if p.since.elapsed() < RECHECK_FOR {
                self.pending.insert(pid, p);
            } else {
                self.found_at.insert(pid, p.at);
            }
            return false;
        }
        self.pending.remove(&pid);
        self.found_at.insert(pid, p.at);
        self.unsupported.remove(&pid);
        let added = procs.update(&pid.to_ne_bytes(), &W::map_value(&p.found), MapFlags::ANY).is_ok();
        if added {
            let reader = W::reader(pid, &p.found);
            self.readers.insert(pid, (p.found, reader));
        }
        added
    }

    /// Checks again the interpreters whose check failed lately: true when
    /// one was given to its walker.
    pub fn recheck<M: MapCore>(&mut self, procs: &M) -> bool {
        let pids: Vec<u32> = self.pending.keys().copied().collect();
        let mut added = false;
        for pid in pids {
            if let Some(p) = self.pending.remove(&pid) {
                added |= self.checked(pid, procs, p);
            }
        }
        added
    }

    /// Whether `pid` was found to run this interpreter (read or not).
    pub fn knows(&self, pid: u32) -> bool {
        self.found_at.contains_key(&pid) || self.unsupported.contains_key(&pid)
    }

    /// Lets go of what was read of the processes `keep` refuses (exited,
    /// their stacks forgotten: `fgbpf flight`).
    pub fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        self.readers.retain(|&pid, _| keep(pid));
        self.found_at.retain(|&pid, _| keep(pid));
        self.unsupported.retain(|&pid, _| keep(pid));
        self.pending.retain(|&pid, _| keep(pid));
        self.texts.retain(|&(pid, _, _), _| keep(pid));
        self.hidden_evaluator.retain(|&pid| keep(pid));
    }

    /// Reads the objects a freshly stored stack of `pid` names, while it
    /// lives (in case their announcement was lost).
    pub fn read(&mut self, pid: u32, user: &[u64]) {
        let Some((_, reader)) = self.readers.get_mut(&pid) else { return };
        let Some(at) = user.iter().position(|&w| w == W::MARKER) else { return };
        for &w in &user[at + 1..] {
            W::read_word(reader, w);
        }
    }

    /// Reads one object of `pid`, announced by the walker.
    pub fn read_announced(&mut self, pid: u32, addr: u64, addr2: u64) {
        if let Some((_, reader)) = self.readers.get_mut(&pid) {
            W::read_announced(reader, addr, addr2);
        }
    }

    /// Moves the interpreter frames of each stack (and its waker's) out of
    /// its user frames, named.
    pub fn name(&mut self, stacks: &mut [RawStack]) {
        for r in stacks {
            self.split(r);
            if let Some(w) = r.waker.as_deref_mut() {
                self.split(w);
            }
        }
    }

    fn split(&mut self, r: &mut RawStack) {
        let Some(at) = r.user.iter().position(|&w| w == W::MARKER) else { return };
        let mut words = r.user[at..].to_vec();
        r.user = r.user[..at].into();
        if let Some((found, reader)) = self.readers.get(&r.pid) {
            let drop = W::not_running(reader, &words[1..]).min(words.len() - 1);
            words.truncate(words.len() - drop);
            let hidden: Vec<usize> = (0..r.user.len()).filter(|&i| W::evaluator_at(found, r.user[i], i == 0)).collect();
            if !hidden.is_empty() {
                let mut user = r.user.to_vec();
                for i in hidden {
                    user[i] = super::EVALUATOR_WORD;
                }
                r.user = user.into();
                self.hidden_evaluator.insert(r.pid);
            }
        }
        r.more_mut().evaluator = Some(W::EVALUATOR);
        let frames = &words[1..];
        r.more_mut().interp = frames
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let caller = frames.get(i + 1).filter(|_| W::NAMED_BY_CALLER && w & ENTRY == 0).map(|&c| c & !ENTRY);
                InterpFrame {
                    text: self.text(r.pid, w, caller),
                    entry: w & ENTRY != 0,
                }
            })
            .collect();
    }

    fn text(&mut self, pid: u32, word: u64, caller: Option<u64>) -> Arc<str> {
        let key = (pid, word & !ENTRY, caller.unwrap_or(0));
        if let Some(t) = self.texts.get(&key) {
            return t.clone();
        }
        let text = match self.readers.get(&pid) {
            Some((found, reader)) => W::text_called(found, reader, word & !ENTRY, caller, self.no_lines),
            None => "[interpreter: process not read]".into(),
        };
        self.texts.insert(key, text.clone());
        text
    }

    /// The interpreters found, per process.
    pub fn found(&self) -> impl Iterator<Item = (u32, &W::Found)> {
        self.readers.iter().map(|(&pid, (f, _))| (pid, f))
    }

    /// The processes fgbpf could not read, with why, by pid.
    pub fn unsupported_sorted(&self) -> Vec<(u32, String)> {
        let mut v: Vec<(u32, String)> = self.unsupported.iter().map(|(&p, (_, why))| (p, why.clone())).collect();
        v.sort_by_key(|(p, _)| *p);
        v
    }
}

impl<W: Walker> Runtime for Interp<W> {
    fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        if Interp::track(self, pid, text, W::procs(&skel.maps)) {
            interp_added(skel);
        }
    }

    fn refresh(&mut self, skel: &mut FgbpfSkel<'_>) {
        if !self.pending.is_empty() && self.recheck(W::procs(&skel.maps)) {
            interp_added(skel);
        }
    }

    /// A process whose check failed and that exits or execs is not
    /// checked again: its PID may be another program's.
    fn exited(&mut self, pid: u32) {
        self.pending.remove(&pid);
    }

    fn announced(&mut self, pid: u32, a: &Announcement) -> bool {
        if a.kind != W::ANNOUNCED {
            return false;
        }
        self.read_announced(pid, a.addr, a.addr2);
        true
    }

    fn reads_fresh(&self) -> bool {
        true
    }

    fn fresh(&mut self, pid: u32, user: &[u64]) {
        self.read(pid, user);
    }

    fn finish(&mut self, stacks: &mut [RawStack], found: &mut Found) {
        self.name(stacks);
        let evaluator = W::EVALUATOR.frames.iter().find_map(|p| match p {
            Pattern::Is(name) => Some(*name),
            _ => None,
        });
        if let Some(name) = evaluator {
            for &pid in &self.hidden_evaluator {
                let named = Named::known(vec![(name.to_string(), FrameKind::User)]);
                found.runtime_names.insert((pid, super::EVALUATOR_WORD), named);
            }
        }
        let mut read: Vec<_> = self
            .found()
            .map(|(pid, f)| {
                let (version, binary) = W::described(f);
                (pid, version, binary)
            })
            .collect();
        read.sort_unstable();
        let unsupported = self.unsupported_sorted();
        let mut notes: Vec<(u32, String)> =
            self.readers.iter().filter_map(|(&pid, (f, r))| W::note(f, r).map(|n| (pid, n))).collect();
        notes.sort_unstable();
        found.notes.extend(notes.into_iter().map(|(pid, n)| (pid, W::LANG.name, n)));
        let (to, unreadable) = W::results(found);
        *to = read;
        *unreadable = unsupported;
    }

    fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        Interp::forget(self, keep);
    }

    fn knows(&self, pid: u32) -> bool {
        Interp::knows(self, pid)
    }
}
