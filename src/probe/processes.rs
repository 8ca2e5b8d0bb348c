//! The probe's side of the processes it follows: their announcements
//! (births, execs, exits) polled from the BPF side, a held `-- COMMAND`
//! prepared and placed at its entry point, and what the walkers need of
//! each process read.

use std::time::Duration;

use super::events::{self, ProcEvent};
use super::{track, CaptureError, Probe, Targets, FG_KNOWN, MAX_LONG_WAITS};

impl Probe {
    /// Process announcements since the last call, waiting up to `timeout`.
    /// A process's exit is kept to [`Self::exited`] (until the next poll).
    pub fn poll_processes(&mut self, timeout: Duration) -> Vec<ProcEvent> {
        let mut events = self.watcher.poll(timeout);
        // Python code objects are named here, at once, while the process
        // lives; the rest is for the caller.
        let runtimes = &mut self.runtimes;
        let counts = &mut self.counts;
        let long_waits = &mut self.long_waits;
        let exited = &mut self.exited;
        exited.clear();
        let mut tables = self.tables.as_mut();
        events.retain(|e| match &e.kind {
            events::ProcEventKind::Exit => {
                counts.exited(e.pid, e.start);
                exited.push((e.pid, e.start));
                runtimes.exited(e.pid);
                // Its maps are not read again: it has no memory left.
                if let Some(t) = tables.as_mut() {
                    t.exited(e.pid);
                }
                false
            }
            // Its Go runtime, if any, is gone with the old program (the
            // walker's entry too): the new one is looked at afresh.
            events::ProcEventKind::Exec => {
                runtimes.exited(e.pid);
                true
            }
            events::ProcEventKind::LongWait(w) => {
                // Bounded: a recorder that does not take them keeps the
                // first few.
                if long_waits.len() < MAX_LONG_WAITS {
                    long_waits.push((e.pid, w.clone()));
                }
                false
            }
            events::ProcEventKind::Announced(a) => {
                runtimes.announced(e.pid, a);
                false
            }
            _ => true,
        });
        self.runtimes.tick();
        events
    }

    /// Gives a process forked from `parent`, running its image still, what
    /// the walkers have of `parent`, without reading its maps. False when
    /// its maps must be read: the parent has no unwind tables, or runs a
    /// runtime (whose walkers read each process on their own).
    pub fn inherit(&mut self, child: u32, parent: u32) -> bool {
        if self.runtimes.knows(parent) {
            return false;
        }
        match self.tables.as_mut() {
            Some(t) => t.inherit(child, parent, &self.skel.maps.proc_unwind),
            None => true,
        }
    }

    /// The processes (PID, start) the last [`Self::poll_processes`] was
    /// told are gone, in the order told: a PID announced again after is a
    /// new process.
    pub fn exited(&self) -> &[(u32, u32)] {
        &self.exited
    }

    /// Processes that exited and whose stacks are all out of the kernel,
    /// each with the distinct user addresses of its stacks: what the
    /// symbolizer must keep of it (see [`crate::symbolize::Symbolizer::retire`]).
    pub fn retired(&mut self) -> Vec<((u32, u32), Vec<u64>)> {
        self.counts.take_retired()
    }

    /// Gives announced processes their unwind tables. Call it after the
    /// symbolizer has read them: a short-lived process must be read for
    /// its names first, before building tables delays the reading.
    /// Compiles the unwind tables of a command about to be started (its
    /// executable, and the loader and C library it most likely shares with
    /// fgbpf) before it runs, so its first samples are walked whole.
    pub fn prepare_command(&mut self, program: &std::path::Path) {
        let Some(t) = self.tables.as_mut() else { return };
        t.prebuild(program);
        let own = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let exe = std::fs::read_link("/proc/self/exe").ok();
        for m in own.lines().filter_map(crate::procs::maps::parse_line) {
            let path = std::path::Path::new(m.path);
            if m.exec && m.inode != 0 && Some(path) != exe.as_deref() {
                t.prebuild(path);
            }
        }
    }

    /// The held `-- COMMAND` will be stopped at its program's entry point
    /// (src/app/session/entry.rs): it is recorded from there, not from its
    /// exec.
    pub fn hold_until_entry(&mut self, pid: u32) -> Result<(), CaptureError> {
        Targets::hold_until_entry(&self.skel.maps.target_pids, pid)
    }

    /// The held `-- COMMAND`, stopped at its program's entry point with its
    /// libraries mapped: its unwind tables and runtimes are placed before
    /// its first instruction runs, and it is a target from here on.
    pub fn command_at_entry(&mut self, pid: u32) -> Result<(), CaptureError> {
        track::track(&mut self.skel, self.tables.as_mut(), &mut self.runtimes, pid);
        Targets::entered(&self.skel.maps.target_pids, pid)
    }

    /// Gives the walkers what they need of processes just announced, from
    /// their maps as the symbolizer read them (pid, /proc/PID/maps text):
    /// read once, not once for names and once for tables.
    pub fn track_processes(&mut self, read: &[(u32, String)]) {
        for (pid, text) in read {
            track::track_read(&mut self.skel, self.tables.as_mut(), &mut self.runtimes, *pid, text);
        }
        let pids: Vec<u32> = read.iter().map(|(pid, _)| *pid).collect();
        self.walk_seeds(Some(&pids));
    }

    /// Processes whose execve was announced without waking user space
    /// (targets.bpf.h: on_exec) and whose maps were read at the turn after:
    /// known again with their new image, so that their next stack does not
    /// announce them (and have them read) once more, and re-read on the
    /// young schedule from now, for the libraries the new image maps.
    pub fn read_after_exec(&mut self, pids: &[u32]) {
        let known = &self.skel.maps.known_procs;
        for pid in pids {
            if let Some(t) = self.tables.as_mut() {
                t.young_again(*pid);
            }
            // Only an entry still there: one the process's exit removed
            // stays removed.
            let _ = libbpf_rs::MapCore::update(known, &pid.to_ne_bytes(), &[FG_KNOWN], libbpf_rs::MapFlags::EXIST);
        }
    }
}
