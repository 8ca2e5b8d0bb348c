//! The managed runtimes the walkers read besides native code, side by
//! side: CPython ([`super::python`]) and HotSpot ([`super::java`]). Finds
//! them in each process the probe reads, hands them the objects the BPF
//! side announces, and names their frames when the capture ends. Each
//! runtime keeps its own pair of files (BPF and user space) behind one
//! contract: tagged frame words in the stored stack (src/bpf/fgbpf.h).

use super::events::{ProcEvent, ProcEventKind};
use super::java::Java;
use super::options::{Options, Recorded};
use super::python::Python;
use super::skel::FgbpfSkel;
use super::unwind;

pub(super) struct Runtimes {
    pub python: Option<Python>,
    pub java: Option<Java>,
}

impl Runtimes {
    pub fn new(opts: &Options) -> Self {
        Runtimes {
            python: (opts.user_stacks && opts.python).then(|| Python::new(!opts.py_lines)),
            java: (opts.user_stacks && opts.java).then(Java::default),
        }
    }

    /// Reads an object an event announced, at once, while the process
    /// lives. False when the event was one (consumed here).
    pub fn take_event(&mut self, e: &ProcEvent) -> bool {
        match &e.kind {
            ProcEventKind::PyCode(addr) => {
                if let Some(py) = self.python.as_mut() {
                    py.read_code(e.pid, *addr);
                }
                false
            }
            ProcEventKind::Java(object) => {
                if let Some(java) = self.java.as_mut() {
                    java.read(e.pid, *object);
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
        if let Some(java) = self.java.as_mut() {
            java.track(pid, text, &skel.maps.java_procs);
        }
    }

    /// At each drain: what the walkers could not have yet of the JVMs.
    pub fn refresh(&mut self, skel: &FgbpfSkel<'_>) {
        if let Some(java) = self.java.as_mut() {
            java.refresh(&skel.maps.java_procs);
        }
    }

    /// What a drain brought: the freshly stored stacks' Python code
    /// objects, read while their processes live.
    pub fn fresh(&mut self, fresh: Vec<(u32, &[u64])>) {
        if let Some(py) = self.python.as_mut() {
            for (pid, user) in fresh {
                py.read(pid, user);
            }
        }
    }

    /// Names the runtimes' frames of the capture's stacks: Python frames
    /// moved out of each stack's native frames, Java frame words named for
    /// the symbolizer; and what the runtimes found, for the report.
    pub fn finish(&mut self, rec: &mut Recorded) {
        if let Some(py) = self.python.as_mut() {
            py.name(&mut rec.stacks);
            rec.interpreters = py
                .interpreters()
                .map(|(pid, i)| (pid, i.version, i.binary.clone()))
                .collect();
            rec.py_unsupported = py.unsupported.iter().map(|(&p, u)| (p, u.clone())).collect();
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
    }

    pub fn any(&self) -> bool {
        self.python.is_some() || self.java.is_some()
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
    if let Some(t) = tables {
        t.track(pid, &text, &skel.maps.proc_unwind);
    }
    runtimes.track(skel, pid, &text);
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
