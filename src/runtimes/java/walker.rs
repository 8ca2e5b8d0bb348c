//! HotSpot JVMs in the kernel: each process the probe sees is checked for
//! a `libjvm.so` ([`crate::runtimes::java`]), whose own exported layout gives
//! the walker (src/runtimes/java/java.bpf.h) where the JVM's code is and the offsets
//! of its version (`java_procs`). The objects the walker's frame words
//! name (compiled methods, `Method*`s, stubs) are announced once and read
//! here at once, while they live; the words are named at the end of the
//! capture for the symbolizer ([`RuntimeNames`]), each once.

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::{types, FgbpfSkel};
use crate::runtimes::{Announcement, Found, Runtime, Settings, BpfWalker};
use crate::procs::frame_kind::FrameKind;
use crate::runtimes::java::{self, Jvm, Unsupported};
use crate::profile::RawStack;
use crate::symbolize::{Named, RuntimeNames, UnresolvedReason, UNKNOWN};

/// A Java object the walker announced (enum fg_proc_event_kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JavaObject {
    /// A compiled method: its CodeBlob and compile id.
    Nmethod(u64, u32),
    Method(u64),
    Stub(u64),
}

/// Java frames named for profiles.
#[derive(Default)]
pub(crate) struct Java {
    jvms: HashMap<u32, Jvm>,
    /// Where each tracked process's libjvm was found (start, inode), so
    /// that a re-read finds nothing new cheaply.
    found_at: HashMap<u32, (u64, u64)>,
    /// The layout each JVM's walker has (`java_procs`).
    put: HashMap<u32, java::Layout>,
    /// JVM processes fgbpf cannot read, with why.
    pub unsupported: HashMap<u32, Unsupported>,
}

/// Whether the walker has all it needs of a JVM: the name that tells
/// compiled methods apart, unless the JVM tells them by their kind.
fn complete(l: &java::Layout) -> bool {
    l.name_nmethod != 0 || l.flags & java::layout::FLAG_HAS_KIND != 0
}

use crate::runtimes::shared::{by_pid, runtime_binary};
pub use crate::runtimes::shared::Unnamed;

/// Java's words (fgbpf.h: FG_RT_HOTSPOT).
const RUNTIME: u64 = 0;

impl Java {
    /// See [`crate::runtimes::interp::Interp::knows`].
    pub fn knows(&self, pid: u32) -> bool {
        self.found_at.contains_key(&pid) || self.unsupported.contains_key(&pid)
    }

    /// See [`crate::runtimes::interp::Interp::forget`].
    pub fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        self.jvms.retain(|&pid, _| keep(pid));
        self.found_at.retain(|&pid, _| keep(pid));
        self.put.retain(|&pid, _| keep(pid));
        self.unsupported.retain(|&pid, _| keep(pid));
    }

    /// Looks for a HotSpot JVM in `pid`'s executable mappings (`text`, its
    /// /proc/PID/maps) and gives the walker its layout once the JVM has
    /// set up its code cache ([`Java::refresh`] retries). True when it
    /// found a JVM.
    pub fn track<M: MapCore>(&mut self, pid: u32, text: &str, procs: &M) -> bool {
        let Some((m, file)) = runtime_binary(pid, text, java::may_be_jvm, None, &mut self.found_at) else {
            return false;
        };
        match java::find(pid, &file, m.path, m.start, m.offset) {
            Ok(Some(jvm)) => {
                self.unsupported.remove(&pid);
                self.jvms.insert(pid, jvm);
                self.put.remove(&pid);
                self.update(pid, procs);
                true
            }
            Ok(None) => false,
            Err(why) => {
                self.unsupported.insert(pid, why);
                false
            }
        }
    }

    /// Gives the walker what it could not have yet of the JVMs found
    /// early in their start-up: where the code cache is, and the name that
    /// tells compiled methods from other code (known once the JVM has
    /// compiled its first method). Call it at each drain.
    pub fn refresh<M: MapCore>(&mut self, procs: &M) {
        let waiting: Vec<u32> = self
            .jvms
            .keys()
            .copied()
            .filter(|pid| self.put.get(pid).is_none_or(|l| !complete(l)))
            .collect();
        for pid in waiting {
            self.update(pid, procs);
        }
    }

    /// Reads `pid`'s layout and writes it for the walker when it holds a
    /// code cache and differs from what the walker has.
    fn update<M: MapCore>(&mut self, pid: u32, procs: &M) {
        let Some(jvm) = self.jvms.get(&pid) else { return };
        let layout = jvm.layout();
        if layout.nheaps == 0 || layout.code_lo == 0 || self.put.get(&pid) == Some(&layout) {
            return;
        }
        if put(procs, pid, &layout) {
            self.put.insert(pid, layout);
        }
    }

    /// Reads an object the walker announced, at once: a compiled method may
    /// be freed moments later.
    pub fn read(&mut self, pid: u32, object: JavaObject) {
        let Some(jvm) = self.jvms.get_mut(&pid) else { return };
        match object {
            JavaObject::Nmethod(blob, id) => jvm.read_nmethod(blob, id),
            JavaObject::Method(m) => jvm.read_method(m),
            JavaObject::Stub(blob) => jvm.read_stub(blob),
        }
    }

    /// The JVMs found: (pid, the JDK's feature version, whether inlined
    /// methods are read).
    pub fn jvms(&self) -> impl Iterator<Item = (u32, u32, bool)> + '_ {
        self.jvms.iter().map(|(&pid, j)| (pid, j.major(), j.reads_inlining()))
    }

    /// Names every Java frame word of `stacks` (and their wakers'), each
    /// (process, word) once, and the weight of those left unnamed.
    pub fn name(&self, stacks: &[RawStack]) -> (RuntimeNames, Unnamed) {
        crate::runtimes::shared::name_words(stacks, RUNTIME, |pid, w| (self.name_word(pid, w), None))
    }

    fn name_word(&self, pid: u32, word: u64) -> Named {
        let Some(jvm) = self.jvms.get(&pid) else {
            return unnamed("a Java frame of a JVM fgbpf lost track of", REMEDY_BUG);
        };
        match jvm.name(word) {
            Ok(frames) if !frames.is_empty() => {
                Named::known(frames.into_iter().map(|f| (f.name, f.kind)).collect())
            }
            Ok(_) => unnamed("a Java frame of an unknown kind", REMEDY_BUG),
            Err(why) => unnamed(why.reason(), why.remedy()),
        }
    }
}

/// Writes a JVM's layout into `java_procs`; false when the map refused it.
fn put<M: MapCore>(procs: &M, pid: u32, layout: &java::Layout) -> bool {
    let value = value_of(layout);
    // SAFETY: fg_java_proc is a plain struct of integers.
    let bytes = unsafe { plain::as_bytes(&value) };
    procs.update(&pid.to_ne_bytes(), bytes, MapFlags::ANY).is_ok()
}

const REMEDY_BUG: &str = "none: please report it, with the JDK's version";

fn unnamed(why: &'static str, remedy: &'static str) -> Named {
    Named::unknown(UNKNOWN.into(), FrameKind::Jit, UnresolvedReason::Runtime { why, remedy })
}

fn value_of(l: &java::Layout) -> types::fg_java_proc {
    types::fg_java_proc {
        code_lo: l.code_lo,
        code_hi: l.code_hi,
        heap_lo: l.heap_lo,
        heap_hi: l.heap_hi,
        segmap: l.segmap,
        interp_lo: l.interp_lo,
        interp_hi: l.interp_hi,
        call_stub_ra: l.call_stub_ra,
        name_nmethod: l.name_nmethod,
        nheaps: l.nheaps,
        log2_seg: l.log2_seg,
        heap_block_size: l.heap_block_size,
        major: l.major,
        flags: l.flags,
        cb_name: l.cb_name,
        cb_kind: l.cb_kind,
        cb_frame_size: l.cb_frame_size,
        cb_frame_complete: l.cb_frame_complete,
        cb_code_begin: l.cb_code_begin,
        cb_code_end: l.cb_code_end,
        nm_compile_id: l.nm_compile_id,
        nm_entry: l.nm_entry,
        nm_verified_entry: l.nm_verified_entry,
        nm_osr_entry: l.nm_osr_entry,
        nm_deopt_handler: l.nm_deopt_handler,
        nm_orig_pc_offset: l.nm_orig_pc_offset,
        m_const_method: l.m_const_method,
        cm_size: l.cm_size,
        cm_code_size: l.cm_code_size,
        ..Default::default()
    }
}

/// What the HotSpot folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::PLUMBING,
    thread_roles: &[],
    marker: None,
    walker_maps: &["java_seen"],
    id_label: None,
};

/// Its walker, when the capture reads Java frames.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(BpfWalker::Java).then(|| Box::new(Java::default()) as Box<dyn Runtime>)
}

impl Runtime for Java {
    fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        Java::track(self, pid, text, &skel.maps.java_procs);
    }

    /// FG_PROC_JAVA_NMETHOD, _METHOD and _STUB.
    fn announced(&mut self, pid: u32, a: &Announcement) -> bool {
        let object = match a.kind {
            5 => JavaObject::Nmethod(a.addr, a.addr2 as u32),
            6 => JavaObject::Method(a.addr),
            7 => JavaObject::Stub(a.addr),
            _ => return false,
        };
        self.read(pid, object);
        true
    }

    fn refresh(&mut self, skel: &mut FgbpfSkel<'_>) {
        Java::refresh(self, &skel.maps.java_procs);
    }

    fn finish(&mut self, stacks: &mut [RawStack], found: &mut Found) {
        let (names, unnamed) = self.name(stacks);
        found.runtime_names.extend(names);
        found.java_unnamed = unnamed;
        found.jvms = self.jvms().collect();
        found.jvms.sort_unstable();
        found.java_unsupported = by_pid(&self.unsupported);
    }

    fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        Java::forget(self, keep);
    }

    fn knows(&self, pid: u32) -> bool {
        Java::knows(self, pid)
    }
}
