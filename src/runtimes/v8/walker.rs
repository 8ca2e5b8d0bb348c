//! V8 (Node.js) in the kernel: each process the probe sees is checked for
//! a binary carrying V8's post-mortem metadata ([`crate::runtimes::v8`]),
//! whose frame and object offsets the walker (src/runtimes/v8/v8.bpf.h) gets in
//! `v8_procs`. The functions its frame words name are announced once and
//! read here at once, while they are where the walker saw them; the words
//! are named at the end of the capture for the symbolizer, each once.

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};

use crate::runtimes::shared::{by_pid, runtime_binary, Partly, Renamed, Unnamed};
use crate::bpf::{types, FgbpfSkel};
use crate::runtimes::{Announcement, Found, Runtime, Settings, BpfWalker};
use crate::procs::frame_kind::FrameKind;
use crate::runtimes::v8::{self, Isolate, Tier};
use crate::profile::RawStack;
use crate::symbolize::{Named, RuntimeNames, UnresolvedReason, UNKNOWN};

/// V8's words (fgbpf.h: FG_RT_V8).
const RUNTIME: u64 = 1;

#[derive(Default)]
pub(crate) struct V8 {
    isolates: HashMap<u32, Isolate>,
    /// Where each tracked process's V8 binary was found (start, inode), so
    /// that a re-read finds nothing new cheaply.
    found_at: HashMap<u32, (u64, u64)>,
    /// V8 processes fgbpf cannot read, with why.
    pub unsupported: HashMap<u32, String>,
    /// Whether any process was given to the walker (v8.bpf.h: v8_tracked).
    pub tracked: bool,
    /// Executables looked into despite their names, and not V8.
    renamed: Renamed,
}

impl V8 {
    /// See [`crate::runtimes::interp::Interp::knows`].
    pub fn knows(&self, pid: u32) -> bool {
        self.found_at.contains_key(&pid) || self.unsupported.contains_key(&pid)
    }

    /// See [`crate::runtimes::interp::Interp::forget`].
    pub fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        self.isolates.retain(|&pid, _| keep(pid));
        self.found_at.retain(|&pid, _| keep(pid));
        self.unsupported.retain(|&pid, _| keep(pid));
    }

    /// Looks for V8 in `pid`'s executable mappings (`text`, its
    /// /proc/PID/maps) and gives the walker its layout. True when the
    /// walker has a new process.
    pub fn track<M: MapCore>(&mut self, pid: u32, text: &str, procs: &M) -> bool {
        let Some((m, file)) = runtime_binary(pid, text, v8::may_be_v8, Some(&self.renamed), &mut self.found_at) else {
            return false;
        };
        let Some(data) = crate::procs::elf::map(&file) else { return false };
        let layout = match v8::layout::read(&data) {
            Ok(Some(l)) => l,
            Ok(None) => {
                // An executable looked into for itself: not V8, and no
                // process of V8's.
                if !v8::may_be_v8(m.path) {
                    self.found_at.remove(&pid);
                    self.renamed.not_it(&m, v8::may_be_v8);
                }
                return false;
            }
            Err(why) => {
                self.unsupported.insert(pid, format!("{}: {why}", m.path));
                return false;
            }
        };
        let isolate = match Isolate::new(pid, layout) {
            Ok(i) => i,
            Err(e) => {
                self.unsupported.insert(pid, format!("/proc/{pid}/mem: {e}"));
                return false;
            }
        };
        if !put(procs, pid, &layout) {
            self.unsupported.insert(pid, "the walker's process map is full".into());
            return false;
        }
        self.unsupported.remove(&pid);
        self.isolates.insert(pid, isolate);
        self.tracked = true;
        true
    }

    /// Reads a function the walker announced, at once.
    pub fn read(&mut self, pid: u32, sfi: u64, id: u32) {
        if let Some(i) = self.isolates.get_mut(&pid) {
            i.read_function(sfi, id);
        }
    }

    /// Reads the compiled code at a pc the walker announced, at once.
    pub fn read_code(&mut self, pid: u32, pc: u64, sfi: u64, id: u32) {
        if let Some(i) = self.isolates.get_mut(&pid) {
            i.read_code(pc, sfi, id);
        }
    }

    /// The V8 processes found, each with whether fgbpf reads what its
    /// optimised code inlined (V8 11 says where; V8 12's metadata does not).
    pub fn processes(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        self.isolates.iter().map(|(&pid, i)| (pid, i.layout().reads_inlining()))
    }

    /// Names every V8 frame word of `stacks` (and their wakers'), each
    /// (process, word) once, and the weight of those left unnamed.
    pub fn name(&self, stacks: &[RawStack]) -> (RuntimeNames, Unnamed) {
        crate::runtimes::shared::name_words(stacks, RUNTIME, |pid, w| self.name_word(pid, w))
    }

    fn name_word(&self, pid: u32, word: u64) -> (Named, Partly) {
        let Some(isolate) = self.isolates.get(&pid) else {
            return (unnamed("a JavaScript frame of a process fgbpf lost track of", REMEDY_BUG), None);
        };
        match isolate.name(word) {
            Ok((functions, partly)) => {
                let frames = functions
                    .iter()
                    .map(|(f, tier)| {
                        let text = match (&f.script, f.line) {
                            (Some(s), Some(line)) => format!("{} ({}:{line})", f.name, base(s)),
                            (Some(s), None) => format!("{} ({})", f.name, base(s)),
                            (None, _) => f.name.clone(),
                        };
                        let kind = match tier {
                            Tier::Interpreted => FrameKind::Interpreted,
                            Tier::Compiled => FrameKind::Jit,
                            Tier::Inlined => FrameKind::Inlined,
                        };
                        (text, kind)
                    })
                    .collect();
                let why = if isolate.layout().reads_inlining() { PARTLY } else { PARTLY_LAYOUT };
                (Named::known(frames), partly.then_some((why, REMEDY_PARTLY)))
            }
            Err(why) => (unnamed(why.reason(), why.remedy()), None),
        }
    }
}

/// Said of compiled frames named without the functions V8 inlined there.
const PARTLY: &str = "named without the functions V8 inlined into it: its code could not be read";
/// Said of compiled frames of a V8 whose metadata does not say where its
/// optimised code inlined (V8 10: Node.js 18).
const PARTLY_LAYOUT: &str =
    "named without the functions V8 inlined into it: fgbpf reads where V8 11 to 13 (Node.js 20 to 24) record inlining, not V8 10 (Node.js 18)";
const REMEDY_PARTLY: &str = "none: their time is their caller's";

/// A script's file name: the last part of a path or URL; Node.js's own
/// modules (`node:internal/...`) whole.
fn base(script: &str) -> &str {
    if script.starts_with("node:") {
        return script;
    }
    script.rsplit('/').next().filter(|b| !b.is_empty()).unwrap_or(script)
}

const REMEDY_BUG: &str = "none: please report it, with the Node.js version";

fn unnamed(why: &'static str, remedy: &'static str) -> Named {
    Named::unknown(UNKNOWN.into(), FrameKind::Jit, UnresolvedReason::Runtime { why, remedy })
}

/// Writes a process's layout into `v8_procs`; false when the map refused
/// it.
fn put<M: MapCore>(procs: &M, pid: u32, l: &v8::Layout) -> bool {
    let value = types::fg_v8_proc {
        fp_marker: l.fp_marker,
        fp_function: l.fp_function,
        fn_shared: l.fn_shared,
        sfi_name: l.sfi_name,
        sfi_script: l.sfi_script,
        ..Default::default()
    };
    // SAFETY: fg_v8_proc is a plain struct of integers.
    let bytes = unsafe { plain::as_bytes(&value) };
    procs.update(&pid.to_ne_bytes(), bytes, MapFlags::ANY).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_named_by_their_last_part() {
        assert_eq!(base("/srv/app/server.js"), "server.js");
        assert_eq!(base("node:internal/main/run_main_module"), "node:internal/main/run_main_module");
        assert_eq!(base("file:///srv/a.mjs"), "a.mjs");
    }
}

/// What the V8 folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::super::Plumbing::NONE,
    thread_roles: super::threads::ROLES,
    marker: None,
    walker_maps: &["v8_seen", "v8_seen_cache"],
    id_label: None,
};

/// Its walker, when the capture names JavaScript frames.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    s.walks(BpfWalker::V8).then(|| Box::new(V8::default()) as Box<dyn Runtime>)
}

impl Runtime for V8 {
    fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        if V8::track(self, pid, text, &skel.maps.v8_procs) {
            v8_added(skel);
        }
    }

    /// FG_PROC_V8_FUNCTION and FG_PROC_V8_CODE.
    fn announced(&mut self, pid: u32, a: &Announcement) -> bool {
        match a.kind {
            8 => self.read(pid, a.addr, a.addr2 as u32),
            9 => self.read_code(pid, a.addr, a.addr2 & ((1 << 48) - 1), (a.addr2 >> 48) as u32),
            _ => return false,
        }
        true
    }

    fn finish(&mut self, stacks: &mut [RawStack], found: &mut Found) {
        let (names, unnamed) = self.name(stacks);
        found.runtime_names.extend(names);
        found.v8_unnamed = unnamed;
        found.v8s = self.processes().collect();
        found.v8s.sort_unstable();
        found.v8_unsupported = by_pid(&self.unsupported);
    }

    fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        V8::forget(self, keep);
    }

    fn knows(&self, pid: u32) -> bool {
        V8::knows(self, pid)
    }
}

/// Tells the walker a process was added to `v8_procs` (v8.bpf.h:
/// `v8_tracked`): until then no frame looks V8 up.
fn v8_added(skel: &mut FgbpfSkel<'_>) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        let p: *mut u32 = &mut bss.v8_tracked;
        // SAFETY: as in crate::runtimes::interp_added: a field of the
        // mapped .bss, written once with a volatile store.
        unsafe { std::ptr::write_volatile(p, 1) };
    }
}
