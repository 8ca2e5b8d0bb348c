//! What the probe does with a process it reads: its maps read once, and
//! handed to the runtimes ([`crate::runtimes`]) and to the unwind tables
//! ([`super::unwind`]), each looking at the code mappings alone.

use super::unwind;
use crate::bpf::FgbpfSkel;
use crate::runtimes::Runtimes;

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
