//! The managed runtimes the walkers read besides native code, one folder
//! each: CPython ([`python`]), Ruby ([`ruby`]), PHP ([`php`]), Perl
//! ([`perl`]), LuaJIT ([`luajit`]), HotSpot
//! ([`java`]), V8 ([`v8`]), Go ([`go`]) and the BEAM ([`beam`]). A folder holds the runtime's
//! BPF half (`<name>.bpf.h`, included by the one BPF object), its layouts
//! per version, its reader of the objects the walker announces, and the
//! namer of its frame words. [`Runtimes`] finds them in each process the
//! probe reads, hands them the objects the BPF side announces, and names
//! their frames when the capture ends. The contract they share: tagged
//! frame words in the stored stack (src/bpf/fgbpf.h); CPython's, Ruby's,
//! PHP's, Perl's and LuaJIT's walkers also share [`interp`]'s.

pub mod beam;
pub mod go;
pub mod interp;
pub mod java;
pub mod luajit;
pub mod perl;
pub mod php;
pub mod python;
pub mod report;
pub mod ruby;
pub mod shared;
pub mod v8;
pub mod walkers;
pub mod walks;

use std::collections::BTreeMap;

use crate::bpf::FgbpfSkel;
use crate::procs::frame_kind::FrameKind;
use crate::profile::RawStack;
use crate::symbolize::{Named, RuntimeNames};
use shared::{name_words, Unnamed};
pub use walkers::{BpfWalker, Refused, Walkers};

/// FG_RT_NATIVE of src/bpf/fgbpf.h: frame words of no runtime's code.
const SIGNAL_RUNTIME: u64 = 2;

/// A signal frame's name: a handler's frames above it, the code the
/// signal interrupted below.
pub const SIGNAL_FRAME: &str = "[signal]";
/// FG_EXEC_WORD: the user stack of a thread in execve, whose registers are
/// those of the image the exec replaced (its memory gone).
pub const EXEC_FRAME: &str = "[image replaced by execve]";
/// A frame of an interpreter's evaluator that its binary does not name
/// (Ruby 3.3's hidden rb_vm_exec, told by its address: [`interp`]'s
/// `evaluator_at`): FG_RT_NATIVE's kind 2, named by its interpreter as
/// its evaluator (which the profile puts the interpreter's frames in
/// place of), else [`EVALUATOR_FRAME`].
pub const EVALUATOR_WORD: u64 = (2 << 62) | (SIGNAL_RUNTIME << 60) | (2 << 58);
pub const EVALUATOR_FRAME: &str = "[evaluator]";

/// The runtimes fgbpf reads, in the order their frames are named: the
/// one list a runtime is added to.
const ALL: &[&Registered] = &[
    &python::walker::REGISTERED,
    &ruby::walker::REGISTERED,
    &php::walker::REGISTERED,
    &perl::walker::REGISTERED,
    &luajit::walker::REGISTERED,
    &java::walker::REGISTERED,
    &v8::walker::REGISTERED,
    &go::walker::REGISTERED,
    &beam::walker::REGISTERED,
];

/// What a runtime's folder gives the rest of fgbpf, besides its BPF half.
pub struct Registered {
    /// Its walker, for a capture that asks for it, or `None`.
    pub start: fn(&Settings) -> Option<Box<dyn Runtime>>,
    /// Its plumbing, for the reports.
    pub plumbing: Plumbing,
    /// How it names the threads it leaves named as their process
    /// (symbolize::Options::thread_roles).
    pub thread_roles: &'static [crate::symbolize::ThreadRole],
    /// The marker its walker writes before its frames on the interpreters'
    /// contract ([`interp`]): a stack's native frames end at the first.
    pub marker: Option<u64>,
    /// The BPF maps only its walker uses (caches of what it announced,
    /// scratch), which user space never touches: a staged start's first
    /// load does not create them (src/probe/staged.rs).
    pub walker_maps: &'static [&'static str],
    /// The key of the label its walker gives the task a stack ran under,
    /// the task's id (crate::profile::Meta::id_labels).
    pub id_label: Option<&'static str>,
}

/// A runtime's frames that sit under everything and explain nothing (its
/// start-up, thread entry and call dispatch), and the name prefixes of its
/// own libraries, which a report looks past for the user's code above a
/// wait ([`crate::analysis`]'s functions). Names only: a folded file
/// carries no binary identity.
#[derive(Debug)]
pub struct Plumbing {
    /// Whole names.
    pub exact: &'static [&'static str],
    /// Prefixes, for families with generated names.
    pub prefixes: &'static [&'static str],
    /// Prefixes of the runtime's libraries (its standard library, its C
    /// API, its own C++ between them and the kernel).
    pub libraries: &'static [&'static str],
}

impl Plumbing {
    /// None.
    pub const NONE: Plumbing = Plumbing { exact: &[], prefixes: &[], libraries: &[] };
}

/// Each runtime's thread roles, for the symbolizer.
pub const THREAD_ROLES: [&[crate::symbolize::ThreadRole]; ALL.len()] = {
    let mut out: [&[crate::symbolize::ThreadRole]; ALL.len()] = [&[]; ALL.len()];
    let mut i = 0;
    while i < ALL.len() {
        out[i] = ALL[i].thread_roles;
        i += 1;
    }
    out
};

/// The runtimes' task-id label keys, for the profile.
pub fn id_labels() -> impl Iterator<Item = &'static str> {
    ALL.iter().filter_map(|r| r.id_label)
}

/// Each runtime's plumbing, for the reports.
pub fn plumbing() -> impl Iterator<Item = &'static Plumbing> {
    ALL.iter().map(|r| &r.plumbing)
}

/// Whether `word` is the marker an interpreter's walker writes before its
/// frames.
pub fn is_interp_marker(word: u64) -> bool {
    ALL.iter().any(|r| r.marker == Some(word))
}

/// Whether the BPF map `name` is one only the runtimes' walkers use.
pub fn walker_only_map(name: &str) -> bool {
    interp::WALKER_MAPS.contains(&name) || ALL.iter().any(|r| r.walker_maps.contains(&name))
}

/// What a capture asks of the runtimes (the part of the probe's options
/// they read). All off when user stacks are not walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The walkers asked for (`--no-python`, `--no-java`… not given).
    pub walkers: Walkers,
    /// Goroutines read from user space (off-CPU time recorded, `--no-go`
    /// not given).
    pub goroutines: bool,
    /// `fgbpf alloc`: Go programs' own heap profiles read from user space.
    pub heap: bool,
    /// `name (file)` instead of `name (file:line)` (`--no-lines`).
    pub no_lines: bool,
}

impl Default for Settings {
    /// Everything read.
    fn default() -> Self {
        Settings {
            walkers: Walkers::all(),
            goroutines: true,
            heap: false,
            no_lines: false,
        }
    }
}

impl Settings {
    pub fn walks(&self, w: BpfWalker) -> bool {
        self.walkers.has(w)
    }
}

/// An object a runtime's walker announced (struct fg_proc_event of
/// src/bpf/fgbpf.h: its kind, `addr` and `addr2`), read at once in user
/// space while its process lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announcement {
    pub kind: u32,
    pub addr: u64,
    pub addr2: u64,
}

/// One runtime's user-space half, as a capture drives it: found in the
/// processes it reads, given the objects its walker announces, and asked
/// at the end to name its frames and say what it could not read.
pub trait Runtime {
    /// Looks for the runtime in a process's executable mappings (`text`,
    /// its /proc/PID/maps) and gives its walker the process's entry.
    fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str);
    /// Reads an object its walker announced. False when `a` is no
    /// announcement of this runtime's.
    fn announced(&mut self, _pid: u32, _a: &Announcement) -> bool {
        false
    }
    /// At each tick of the capture loop (about every 50 ms): what the
    /// walker could not have yet (interpreters whose check failed are
    /// checked again here).
    fn refresh(&mut self, _skel: &mut FgbpfSkel<'_>) {}
    /// Whether it reads the frame words of freshly stored stacks
    /// ([`Self::fresh`]).
    fn reads_fresh(&self) -> bool {
        false
    }
    /// A freshly stored stack's user words, read while its process lives
    /// (in case an announcement was lost).
    fn fresh(&mut self, _pid: u32, _user: &[u64]) {}
    /// At each poll of the process events, after them.
    fn tick(&mut self) {}
    /// `pid` exited or exec'd: its runtime, if any, went with its image.
    fn exited(&mut self, _pid: u32) {}
    /// Recording stopped: a last read of what is read from user space.
    fn stopped(&mut self) {}
    /// Names its frames in the capture's `stacks` (moved, or named for the
    /// symbolizer in `found.runtime_names`) and says what it found and
    /// could not read, in `found`.
    fn finish(&mut self, stacks: &mut [RawStack], found: &mut Found);
    /// Lets go of what it read of the processes `keep` refuses.
    fn forget(&mut self, keep: &dyn Fn(u32) -> bool);
    /// Whether it was found in `pid` (whether it can be read or not).
    fn knows(&self, pid: u32) -> bool;
}

/// What the runtimes found in a capture, for the summary and the report.
#[derive(Debug, Default)]
pub struct Found {
    /// Python interpreters found: (pid, version, binary), and those fgbpf
    /// cannot read, with why.
    pub interpreters: Vec<(u32, (u32, u32), String)>,
    pub py_unsupported: Vec<(u32, String)>,
    /// Ruby VMs found: (pid, version, binary), and those fgbpf cannot
    /// read, with why.
    pub rubies: Vec<(u32, (u32, u32), String)>,
    pub rb_unsupported: Vec<(u32, String)>,
    /// PHP interpreters found: (pid, version, binary), and those fgbpf
    /// cannot read, with why.
    pub phps: Vec<(u32, (u32, u32), String)>,
    pub php_unsupported: Vec<(u32, String)>,
    /// Perl interpreters found: (pid, version, binary), and those fgbpf
    /// cannot read, with why.
    pub perls: Vec<(u32, (u32, u32), String)>,
    pub perl_unsupported: Vec<(u32, String)>,
    /// LuaJIT VMs found: (pid, version, binary), and those fgbpf cannot
    /// read, with why.
    pub luajits: Vec<(u32, (u32, u32), String)>,
    pub luajit_unsupported: Vec<(u32, String)>,
    /// HotSpot JVMs whose frames were walked: (pid, JDK feature version,
    /// whether inlined methods are read), and those fgbpf cannot read,
    /// with why.
    pub jvms: Vec<(u32, u32, bool)>,
    pub java_unsupported: Vec<(u32, java::Unsupported)>,
    /// Java frames that could not be named: weight per (pid, reason).
    pub java_unnamed: Unnamed,
    /// V8 (Node.js) processes whose JavaScript frames were named (pid,
    /// whether what V8 inlined is read), those fgbpf cannot read (with
    /// why), and the weight of frames left unnamed per (pid, reason).
    pub v8s: Vec<(u32, bool)>,
    pub v8_unsupported: Vec<(u32, String)>,
    pub v8_unnamed: Unnamed,
    /// Go programs: their goroutines' time by stack and state
    /// (microseconds, thread 0 of the process), each one's last read, and
    /// those whose goroutines could not be read, with why.
    pub goroutines: Vec<RawStack>,
    pub go_snapshots: Vec<go::walker::Snapshot>,
    /// `fgbpf alloc`: Go programs' heap profiles over the window, as
    /// counts of `fgbpf alloc` (see [`crate::profile::heap::Counted`]).
    pub go_heap: Vec<RawStack>,
    pub go_unsupported: Vec<(u32, String)>,
    /// Go programs whose stacks carry their goroutine: (pid, Go version);
    /// those whose do not, or whose pprof labels are not read, with why;
    /// and per pid the weight of stacks whose labels could not be read
    /// (on-CPU samples, off-CPU microseconds).
    pub gos: Vec<(u32, String)>,
    pub go_labels_unsupported: Vec<(u32, String)>,
    pub go_labels_unread: BTreeMap<u32, (u64, u64)>,
    /// BEAMs whose JIT code map was read, and those fgbpf cannot read,
    /// with why.
    pub beams: Vec<beam::walker::Found1>,
    pub beam_unsupported: Vec<(u32, String)>,
    /// Code maps of JIT code read from the runtimes (the BEAM's), per
    /// process, for the symbolizer: named before any perf map.
    pub code_maps: Vec<(u32, crate::procs::perf_map::PerfMap)>,
    /// Runtime (Java, JavaScript) frame words named, for the symbolizer.
    pub runtime_names: RuntimeNames,
    /// What the summary says of a process besides how its stacks were
    /// read: (pid, runtime, note).
    pub notes: Vec<(u32, &'static str, String)>,
}

/// The runtimes a capture reads.
pub struct Runtimes(Vec<Box<dyn Runtime>>);

impl Runtimes {
    pub fn new(settings: &Settings) -> Self {
        Runtimes(ALL.iter().filter_map(|r| (r.start)(settings)).collect())
    }

    /// Reads an object an event announced, at once, while the process
    /// lives.
    pub fn announced(&mut self, pid: u32, a: &Announcement) {
        for r in &mut self.0 {
            if r.announced(pid, a) {
                return;
            }
        }
    }

    /// Looks for runtimes in a process's executable mappings (`text`, its
    /// /proc/PID/maps) and tells the walkers of those found.
    pub fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        for r in &mut self.0 {
            r.track(skel, pid, text);
        }
    }

    /// At each drain: what the walkers could not have yet.
    pub fn refresh(&mut self, skel: &mut FgbpfSkel<'_>) {
        for r in &mut self.0 {
            r.refresh(skel);
        }
    }

    /// Whether any reads the words of freshly stored stacks.
    pub fn reads_fresh(&self) -> bool {
        self.0.iter().any(|r| r.reads_fresh())
    }

    /// What a drain brought: the freshly stored stacks' runtime objects,
    /// read while their processes live (in case their announcement was
    /// lost).
    pub fn fresh(&mut self, fresh: Vec<(u32, &[u64])>) {
        for (pid, user) in fresh {
            for r in &mut self.0 {
                r.fresh(pid, user);
            }
        }
    }

    pub fn tick(&mut self) {
        for r in &mut self.0 {
            r.tick();
        }
    }

    pub fn exited(&mut self, pid: u32) {
        for r in &mut self.0 {
            r.exited(pid);
        }
    }

    pub fn stopped(&mut self) {
        for r in &mut self.0 {
            r.stopped();
        }
    }

    /// Names the runtimes' frames of the capture's stacks (interpreter
    /// frames moved out of each stack's native frames, JIT frame words
    /// named for the symbolizer) and says what the runtimes found.
    pub fn finish(&mut self, stacks: &mut [RawStack]) -> Found {
        let mut found = Found::default();
        for r in &mut self.0 {
            r.finish(stacks, &mut found);
        }
        // The kernel's signal frames the walker followed (FG_SIGNAL_WORD).
        let (signals, _) = name_words(stacks, SIGNAL_RUNTIME, |_, w| {
            let frame = match (w >> 58) & 3 {
                1 => EXEC_FRAME,
                2 => EVALUATOR_FRAME,
                _ => SIGNAL_FRAME,
            };
            (Named::known(vec![(frame.to_string(), FrameKind::User)]), None)
        });
        for (at, named) in signals {
            found.runtime_names.entry(at).or_insert(named);
        }
        found
    }

    /// Lets go of what the walkers read of processes `keep` refuses:
    /// `fgbpf flight` keeps a process's frame names only while it lives or
    /// its stacks are in the kept window.
    pub fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        for r in &mut self.0 {
            r.forget(keep);
        }
    }

    /// Whether any runtime was found in `pid` (whether it can be read or
    /// not).
    pub fn knows(&self, pid: u32) -> bool {
        self.0.iter().any(|r| r.knows(pid))
    }

    pub fn any(&self) -> bool {
        !self.0.is_empty()
    }
}

/// Tells the interpreter walkers an entry was added to one of their maps
/// (interp.bpf.h: `interp_gen`), after the map holds it: processes found to
/// run none are looked up again.
pub(crate) fn interp_added(skel: &mut FgbpfSkel<'_>) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        let p: *mut u64 = &mut bss.interp_gen;
        // SAFETY: `interp_gen` lives in the .bss map that libbpf mapped into
        // this process, aligned; BPF programs read it concurrently, so it
        // is written with a volatile access the compiler cannot elide.
        unsafe { std::ptr::write_volatile(p, std::ptr::read_volatile(p).wrapping_add(1)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};

    /// A map a runtime calls its walker's own, left out of a staged
    /// start's first load, must be a map of the object: a renamed one
    /// would be created twice, and shared by neither load.
    #[test]
    fn every_walker_only_map_is_a_map_of_the_object() {
        let storage = Box::leak(Box::new(std::mem::MaybeUninit::uninit()));
        let skel = crate::bpf::FgbpfSkelBuilder::default().open(storage).expect("the object opens");
        let names: Vec<String> = skel.open_object().maps().map(|m| m.name().to_string_lossy().into_owned()).collect();
        let listed = interp::WALKER_MAPS.iter().chain(ALL.iter().flat_map(|r| r.walker_maps));
        for name in listed {
            assert!(names.iter().any(|n| n == name), "{name} is no map of the object: {names:?}");
        }
        assert!(walker_only_map("php_reads") && !walker_only_map("unwind_rows") && !walker_only_map("py_procs"));
    }
}
