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

/// Re-reads the processes on the unwind tables' schedule and returns them
/// with their maps, for the symbolizer to take too: the young ones (a
/// program maps libpython or libjvm after the exec that announced it),
/// whose maps go to the runtimes before the unwind tables, as a new
/// process's do ([`track_read`]), and those whose code mappings changed.
pub(super) fn reread(
    skel: &mut FgbpfSkel<'_>,
    tables: Option<&mut unwind::Tables>,
    runtimes: &mut Runtimes,
) -> Vec<(u32, String)> {
    let Some(tables) = tables else { return Vec::new() };
    let mut reread = tables.due();
    for (pid, text) in &reread {
        runtimes.track(skel, *pid, text);
        tables.track(*pid, text, &skel.maps.proc_unwind);
    }
    let changed = tables.refresh(&skel.maps.proc_unwind);
    for (pid, text) in &changed {
        runtimes.track(skel, *pid, text);
    }
    reread.extend(changed);
    reread
}
