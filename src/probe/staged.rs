//! A start in two stages (src/bpf/staged.bpf.h): which captures take it,
//! what the first load leaves out, and the second load, which joins the
//! `.eh_frame` walker and the runtimes' walkers to programs already
//! sampling. Verifying the walkers of HotSpot, PHP, CPython, Ruby and V8
//! is most of a load's time (about 12,000 of the sampler's 19,000
//! instructions processed), and creating the maps only they use (36 MB of
//! unwind tables, caches of what the runtimes announced) more of it;
//! loaded second, they no longer delay the first sample. The first load
//! walks frame pointers, as bpftrace and perf do by default; its samples are
//! counted as such ("tables not built yet"), and those of runtimes in the
//! summary.

use std::os::fd::AsFd;

use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::MapCore;

use super::features::Paths;
use super::programs::Programs;
use super::targets::Targets;
use crate::bpf::{self as skel, FgbpfSkel};
use crate::runtimes::Walkers;
use super::{bpf_error, CaptureError};

/// The maps only the second load's walkers use: the first load, which
/// never reads them, does not create them (libbpf poisons its programs'
/// references, all in code the verifier prunes), and the second creates
/// its own. The unwind tables' rows and page index (filled by
/// [`super::unwind::Tables`] through the second load's maps), the table
/// walker's per-CPU caches, and the runtimes' walkers' own
/// ([`crate::runtimes::walker_only_map`]), which user space never touches.
fn twin_only(name: &str) -> bool {
    ["unwind_rows", "unwind_pages", "row_cache", "search_pads"].contains(&name)
        || crate::runtimes::walker_only_map(name)
}

/// A staged start still to be completed by [`join`]: the walkers and
/// tables (`rows`, the unwind-table array's size; 0: none) it brings.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    pub programs: Programs,
    pub walkers: Walkers,
    pub rows: u32,
}

/// Whether a capture starts in two stages: a system-wide one (or of a
/// cgroup) that walks tables or a runtime, on a kernel with `bpf_loop`
/// (the compat programs walk tables by tail calls, and no runtime). Not
/// one of named processes or of a command: their tables and runtimes are
/// read before their first sample, which the walkers must find loaded
/// (a thread blocked before they join keeps its first stack to the end).
pub(super) fn pending(programs: &Programs, walkers: Walkers, rows: u32, targets: &Targets) -> Option<Pending> {
    let wanted = targets.whole_system() && !programs.compat && (walkers.any() || rows > 0);
    wanted.then_some(Pending { programs: *programs, walkers, rows })
}

/// The first load of a staged start: the maps it does not use are not
/// created.
pub(super) fn leave_out(open: &mut libbpf_rs::OpenObject) -> Result<(), CaptureError> {
    for mut map in open.maps_mut() {
        if map.name().to_str().is_some_and(twin_only) {
            map.set_autocreate(false)
                .map_err(|e| bpf_error(&format!("leaving out the map {}", map.name().to_string_lossy()), e))?;
        }
    }
    Ok(())
}

/// What the second load brought.
pub(super) struct Joined {
    /// Its programs, which the first load's now run (tail calls).
    pub twin: Option<FgbpfSkel<'static>>,
    /// The walkers it holds, whether it walks tables, and why the kernel
    /// refused what it left out.
    pub walkers: Walkers,
    pub tables: bool,
    pub refused: Option<String>,
}

/// Loads the object a second time with `pending`'s walkers and tables,
/// sharing every map of `first` but its read-only configuration (copied)
/// and [`twin_only`]'s, and puts each program in its twin's place. When the
/// kernel refuses it, tries again without the interpreters' walkers
/// (CPython, Ruby, PHP, Go: src/probe/fallback.rs), then with tables only;
/// when it refuses those too, the capture goes on as the first load
/// records, by frame pointers.
pub(super) fn join(first: &FgbpfSkel<'static>, paths: &Paths, pending: &Pending) -> Joined {
    let all = pending.walkers;
    let fewer = all.without(all.interpreters());
    let tries = [
        (all, pending.rows),
        (fewer, pending.rows),
        (Walkers::NONE, pending.rows),
    ];
    let mut refused: Option<String> = None;
    let mut tried = Vec::new();
    for (walkers, rows) in tries {
        if !(walkers.any() || rows > 0) || tried.contains(&walkers) {
            continue;
        }
        tried.push(walkers);
        match load_twin(first, paths, &pending.programs, walkers, rows) {
            Ok(twin) => {
                return Joined {
                    twin: Some(twin),
                    walkers,
                    tables: rows > 0,
                    refused,
                }
            }
            Err(e) => {
                refused.get_or_insert(e.message);
            }
        }
    }
    Joined {
        twin: None,
        walkers: Walkers::NONE,
        tables: false,
        refused,
    }
}

fn load_twin(
    first: &FgbpfSkel<'static>,
    paths: &Paths,
    programs: &Programs,
    walkers: Walkers,
    rows: u32,
) -> Result<FgbpfSkel<'static>, CaptureError> {
    let mut open = paths
        .open(super::object_storage())
        .map_err(|e| bpf_error("opening the BPF object for the runtimes' walkers", e))?;
    paths.configure(&mut open)?;
    let ro = skel::rodata(&mut open);
    *ro = *first
        .maps
        .rodata_data
        .ok_or_else(|| CaptureError::new("the first load has no read-only configuration"))?;
    ro.staged = false;
    ro.use_tables = rows > 0;
    walkers.set(ro);
    programs.autoload_twins(&mut open.progs);
    let size = |map: &mut libbpf_rs::OpenMapMut, n: u32| {
        map.set_max_entries(n.max(1)).map_err(|e| bpf_error("sizing the unwind tables", e))
    };
    size(&mut open.maps.unwind_rows, rows)?;
    // A table's page index has a fifth to a third as many entries as it
    // has rows (src/procs/unwind/tests.rs prints them).
    size(&mut open.maps.unwind_pages, rows / 2)?;
    // Every other map is the first load's: the twins count, store and
    // look up in the same maps as the programs they stand in for.
    let mut theirs: Vec<_> = first.object().maps().map(|m| (m.name().to_owned(), m)).collect();
    for mut map in open.open_object_mut().maps_mut() {
        let name = map.name().to_owned();
        if name.to_string_lossy().ends_with(".rodata") || name.to_str().is_some_and(twin_only) {
            continue;
        }
        let Some(i) = theirs.iter().position(|(n, _)| *n == name) else {
            return Err(CaptureError::new(format!(
                "the BPF object's map {} is missing from its first load",
                name.to_string_lossy()
            )));
        };
        let (_, m) = theirs.swap_remove(i);
        map.reuse_fd(m.as_fd())
            .map_err(|e| bpf_error(&format!("sharing the map {}", name.to_string_lossy()), e))?;
    }
    let twin = open.load().map_err(|e| bpf_error("loading the runtimes' walkers", e))?;
    programs.fill_twins(first, &twin)?;
    Ok(twin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::BpfWalker;

    fn programs(compat: bool) -> Programs {
        Programs {
            btf: true,
            compat,
            walkers: false,
            oncpu: true,
            offcpu: false,
            wakers: false,
            staged: false,
            seeds: false,
            files: false,
            events: Default::default(),
            alloc: false,
        }
    }

    #[test]
    fn only_system_wide_captures_with_something_to_join_are_staged() {
        let one_walker: Walkers = [BpfWalker::Java].into_iter().collect();
        let all = Targets::default();
        let named = Targets {
            pids: vec![42],
            ..Default::default()
        };
        let command = Targets {
            held: Some(7),
            ..Default::default()
        };
        assert!(pending(&programs(false), one_walker, 0, &all).is_some());
        assert!(pending(&programs(false), Walkers::NONE, 1 << 21, &all).is_some());
        // Nothing to join: frame pointers only, no runtime.
        assert!(pending(&programs(false), Walkers::NONE, 0, &all).is_none());
        // Named processes and commands load everything before their first sample.
        assert!(pending(&programs(false), one_walker, 1 << 21, &named).is_none());
        assert!(pending(&programs(false), one_walker, 1 << 21, &command).is_none());
        // Kernels without bpf_loop walk tables by tail calls, and no runtime.
        assert!(pending(&programs(true), one_walker, 1 << 21, &all).is_none());
    }
}
