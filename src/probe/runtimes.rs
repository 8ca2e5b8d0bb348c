//! The managed runtimes the walkers read besides native code, side by
//! side: CPython ([`super::python`]), Ruby ([`super::ruby`]), PHP
//! ([`super::php`]), HotSpot ([`super::java`]) and V8 ([`super::v8`]).
//! Finds
//! them in each process the probe reads, hands them the objects the BPF
//! side announces, and names their frames when the capture ends. Each
//! runtime keeps its own pair of files (BPF and user space) behind one
//! contract: tagged frame words in the stored stack (src/bpf/fgbpf.h).

use super::events::{ProcEvent, ProcEventKind};
use super::go::Go;
use super::java::Java;
use super::options::{Options, Recorded};
use super::python::Python;
use super::php::Php;
use super::ruby::Ruby;
use super::skel::FgbpfSkel;
use super::unwind;
use super::runtime_shared::name_words;
use super::v8::V8;
use crate::procs::frame_kind::FrameKind;
use crate::symbolize::Named;

/// FG_RT_NATIVE of src/bpf/fgbpf.h: frame words of no runtime's code.
const SIGNAL_RUNTIME: u64 = 2;

/// A signal frame's name: a handler's frames above it, the code the
/// signal interrupted below.
pub const SIGNAL_FRAME: &str = "[signal]";
/// FG_EXEC_WORD: the user stack of a thread in execve, whose registers are
/// those of the image the exec replaced (its memory gone).
pub const EXEC_FRAME: &str = "[image replaced by execve]";

pub(super) struct Runtimes {
    pub python: Option<Python>,
    pub ruby: Option<Ruby>,
    pub php: Option<Php>,
    pub java: Option<Java>,
    pub v8: Option<V8>,
    /// Goroutines read from user space ([`super::go`]), and the walker
    /// that tells the one a thread runs ([`super::go_labels`]).
    pub go: Option<Go>,
}

impl Runtimes {
    pub fn new(opts: &Options) -> Self {
        Runtimes {
            python: (opts.user_stacks && opts.python).then(|| Python::new(!opts.py_lines)),
            ruby: (opts.user_stacks && opts.ruby).then(|| Ruby::new(!opts.py_lines)),
            php: (opts.user_stacks && opts.php).then(|| Php::new(!opts.py_lines)),
            java: (opts.user_stacks && opts.java).then(Java::default),
            v8: (opts.user_stacks && opts.node).then(V8::default),
            go: {
                let read = opts.user_stacks && opts.goroutines && opts.offcpu.is_some();
                let labels = opts.user_stacks && opts.go_labels;
                (read || labels).then(|| Go::new(read, labels))
            },
        }
    }

    /// Reads an object an event announced, at once, while the process
    /// lives. False when the event was one (consumed here).
    pub fn take_event(&mut self, e: &ProcEvent) -> bool {
        match &e.kind {
            ProcEventKind::PyCode(addr) => {
                if let Some(py) = self.python.as_mut() {
                    py.read_announced(e.pid, *addr, 0);
                }
                false
            }
            ProcEventKind::RbObject { addr, with } => {
                if let Some(rb) = self.ruby.as_mut() {
                    rb.read_announced(e.pid, *addr, *with);
                }
                false
            }
            ProcEventKind::PhpFunction(addr) => {
                if let Some(php) = self.php.as_mut() {
                    php.read_announced(e.pid, *addr, 0);
                }
                false
            }
            ProcEventKind::GoLabels(addr) => {
                if let Some(labels) = self.go.as_mut().and_then(|g| g.labels.as_mut()) {
                    labels.read_announced(e.pid, *addr);
                }
                false
            }
            ProcEventKind::Java(object) => {
                if let Some(java) = self.java.as_mut() {
                    java.read(e.pid, *object);
                }
                false
            }
            ProcEventKind::V8Function(sfi, id) => {
                if let Some(v8) = self.v8.as_mut() {
                    v8.read(e.pid, *sfi, *id);
                }
                false
            }
            ProcEventKind::V8Code { pc, sfi, id } => {
                if let Some(v8) = self.v8.as_mut() {
                    v8.read_code(e.pid, *pc, *sfi, *id);
                }
                false
            }
            _ => true,
        }
    }

    /// Looks for runtimes in a process's executable mappings (`text`, its
    /// /proc/PID/maps) and tells the walkers of those found.
    pub fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        if let Some(py) = self.python.as_mut() {
            if py.track(pid, text, &skel.maps.py_procs) {
                python_added(skel);
            }
        }
        if let Some(rb) = self.ruby.as_mut() {
            if rb.track(pid, text, &skel.maps.rb_procs) {
                python_added(skel);
            }
        }
        if let Some(php) = self.php.as_mut() {
            if php.track(pid, text, &skel.maps.php_procs) {
                python_added(skel);
            }
        }
        if let Some(java) = self.java.as_mut() {
            java.track(pid, text, &skel.maps.java_procs);
        }
        if let Some(v8) = self.v8.as_mut() {
            if v8.track(pid, text, &skel.maps.v8_procs) {
                v8_added(skel);
            }
        }
        if let Some(go) = self.go.as_mut() {
            if go.track(pid, text, &skel.maps.go_procs) {
                python_added(skel);
            }
        }
    }

    /// At each drain: what the walkers could not have yet of the JVMs.
    pub fn refresh(&mut self, skel: &FgbpfSkel<'_>) {
        if let Some(java) = self.java.as_mut() {
            java.refresh(&skel.maps.java_procs);
        }
    }

    /// What a drain brought: the freshly stored stacks' Python code
    /// objects and Ruby iseqs, read while their processes live (in case
    /// their announcement was lost).
    pub fn fresh(&mut self, fresh: Vec<(u32, &[u64])>) {
        for (pid, user) in fresh {
            if let Some(py) = self.python.as_mut() {
                py.read(pid, user);
            }
            if let Some(rb) = self.ruby.as_mut() {
                rb.read(pid, user);
            }
            if let Some(php) = self.php.as_mut() {
                php.read(pid, user);
            }
            if let Some(labels) = self.go.as_mut().and_then(|g| g.labels.as_mut()) {
                labels.fresh(pid, user);
            }
        }
    }

    /// Names the runtimes' frames of the capture's stacks: Python frames
    /// moved out of each stack's native frames, Java frame words named for
    /// the symbolizer; and what the runtimes found, for the report.
    pub fn finish(&mut self, rec: &mut Recorded) {
        if let Some(py) = self.python.as_mut() {
            py.name(&mut rec.stacks);
            rec.interpreters = py.found().map(|(pid, i)| (pid, i.version, i.binary.clone())).collect();
            rec.interpreters.sort_unstable();
            rec.py_unsupported = py.unsupported_sorted();
        }
        if let Some(rb) = self.ruby.as_mut() {
            rb.name(&mut rec.stacks);
            rec.rubies = rb.found().map(|(pid, vm)| (pid, vm.version, vm.binary.clone())).collect();
            rec.rubies.sort_unstable();
            rec.rb_unsupported = rb.unsupported_sorted();
        }
        if let Some(php) = self.php.as_mut() {
            php.name(&mut rec.stacks);
            rec.phps = php.found().map(|(pid, i)| (pid, i.version, i.binary.clone())).collect();
            rec.phps.sort_unstable();
            rec.php_unsupported = php.unsupported_sorted();
        }
        if let Some(java) = self.java.as_ref() {
            let (names, unnamed) = java.name(&rec.stacks);
            rec.runtime_names = names;
            rec.java_unnamed = unnamed;
            rec.jvms = java.jvms().collect();
            rec.jvms.sort_unstable();
            rec.java_unsupported = java.unsupported.iter().map(|(&p, u)| (p, u.clone())).collect();
            rec.java_unsupported.sort_by_key(|(p, _)| *p);
        }
        if let Some(v8) = self.v8.as_ref() {
            let (names, unnamed) = v8.name(&rec.stacks);
            rec.runtime_names.extend(names);
            rec.v8_unnamed = unnamed;
            rec.v8s = v8.processes().collect();
            rec.v8s.sort_unstable();
            rec.v8_unsupported = v8.unsupported.iter().map(|(&p, u)| (p, u.clone())).collect();
            rec.v8_unsupported.sort_by_key(|(p, _)| *p);
        }
        // The kernel's signal frames the walker followed (FG_SIGNAL_WORD).
        let (signals, _) = name_words(&rec.stacks, SIGNAL_RUNTIME, |_, w| {
            let frame = if (w >> 58) & 3 == 1 { EXEC_FRAME } else { SIGNAL_FRAME };
            (Named::known(vec![(frame.to_string(), FrameKind::User)]), None)
        });
        rec.runtime_names.extend(signals);
        if let Some(labels) = self.go.as_mut().and_then(|g| g.labels.as_mut()) {
            labels.name(&mut rec.stacks);
            rec.gos = labels.found().map(|(pid, v)| (pid, v.to_string())).collect();
            rec.gos.sort_unstable();
            rec.go_labels_unsupported = labels.unsupported.iter().map(|(&p, why)| (p, why.clone())).collect();
            rec.go_labels_unsupported.sort_by_key(|(p, _)| *p);
            rec.go_labels_unread = labels.unread.clone();
        }
        if let Some(go) = self.go.as_ref() {
            (rec.goroutines, rec.go_snapshots) = go.finish();
            rec.go_unsupported = go.unsupported.iter().map(|(&p, why)| (p, why.clone())).collect();
            rec.go_unsupported.sort_by_key(|(p, _)| *p);
        }
    }

    /// Lets go of what the walkers read of processes `keep` refuses:
    /// `fgbpf flight` keeps a process's frame names only while it lives or
    /// its stacks are in the kept window.
    pub fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        if let Some(py) = self.python.as_mut() {
            py.forget(keep);
        }
        if let Some(rb) = self.ruby.as_mut() {
            rb.forget(keep);
        }
        if let Some(php) = self.php.as_mut() {
            php.forget(keep);
        }
        if let Some(java) = self.java.as_mut() {
            java.forget(keep);
        }
        if let Some(v8) = self.v8.as_mut() {
            v8.forget(keep);
        }
        if let Some(labels) = self.go.as_mut().and_then(|g| g.labels.as_mut()) {
            labels.forget(keep);
        }
    }

    /// Whether any runtime was found in `pid` (whether it can be read or
    /// not).
    pub fn knows(&self, pid: u32) -> bool {
        self.python.as_ref().is_some_and(|r| r.knows(pid))
            || self.ruby.as_ref().is_some_and(|r| r.knows(pid))
            || self.php.as_ref().is_some_and(|r| r.knows(pid))
            || self.java.as_ref().is_some_and(|r| r.knows(pid))
            || self.v8.as_ref().is_some_and(|r| r.knows(pid))
            || self.go.as_ref().is_some_and(|r| r.knows(pid))
    }

    pub fn any(&self) -> bool {
        self.python.is_some()
            || self.ruby.is_some()
            || self.php.is_some()
            || self.java.is_some()
            || self.v8.is_some()
            || self.go.is_some()
    }
}

/// Reads a process's maps once and gives the walkers what they need of
/// it: the unwind tables of its code, and its runtimes.
pub(super) fn track(
    skel: &mut FgbpfSkel<'_>,
    tables: Option<&mut unwind::Tables>,
    runtimes: &mut Runtimes,
    pid: u32,
) {
    if tables.is_none() && !runtimes.any() {
        return;
    }
    let Some(text) = crate::procs::maps::read(pid) else { return };
    track_read(skel, tables, runtimes, pid, &text);
}

/// [`track`] with the process's maps read already (`text`).
pub(super) fn track_read(
    skel: &mut FgbpfSkel<'_>,
    tables: Option<&mut unwind::Tables>,
    runtimes: &mut Runtimes,
    pid: u32,
    text: &str,
) {
    // Each reader below looks at the code mappings alone: kept apart
    // once, not parsed whole by each.
    let code = crate::procs::maps::exec_lines(text);
    let text = code.as_str();
    // The runtimes first: finding one takes milliseconds, the unwind tables
    // of a process's binaries up to a second, and the walkers read an
    // interpreter's frames without them.
    runtimes.track(skel, pid, text);
    if let Some(t) = tables {
        t.track(pid, text, &skel.maps.proc_unwind);
    }
}

/// Tells the walker an interpreter was added to `py_procs` (python.bpf.h:
/// `py_gen`), after the map holds it: processes it found to be none are
/// looked up again.
fn python_added(skel: &mut FgbpfSkel<'_>) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        let p: *mut u64 = &mut bss.py_gen;
        // SAFETY: `py_gen` lives in the .bss map that libbpf mapped into
        // this process, aligned; BPF programs read it concurrently, so it
        // is written with a volatile access the compiler cannot elide.
        unsafe { std::ptr::write_volatile(p, std::ptr::read_volatile(p).wrapping_add(1)) };
    }
}

/// Tells the walker a process was added to `v8_procs` (v8.bpf.h:
/// `v8_tracked`): until then no frame looks V8 up.
fn v8_added(skel: &mut FgbpfSkel<'_>) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        let p: *mut u32 = &mut bss.v8_tracked;
        // SAFETY: as in python_added: a field of the mapped .bss, written
        // once with a volatile store.
        unsafe { std::ptr::write_volatile(p, 1) };
    }
}
