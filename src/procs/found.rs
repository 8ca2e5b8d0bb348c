//! Processes that exited before they could be read, known by the mappings
//! the BPF walker found in them (src/bpf/files.bpf.h): a process that
//! lives a millisecond is gone before its /proc/PID/maps can be read, but
//! the kernel told the walker which file each of its frames lies in. Its
//! binaries are those held already (by device and inode), else the file
//! its program was exec'd by, opened and checked to be that very file.
//! What cannot be placed stays unplaced, and its frames unnamed.

use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{same_start, Proc, Region, Registry, Vma};

/// A mapping the walker found in a process (see [`Registry::place_found`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundMap {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// Device (`major << 32 | minor`, as /proc/PID/maps shows it) and
    /// inode of its file; both 0 for memory without one.
    pub dev: u64,
    pub ino: u64,
    pub vdso: bool,
    /// The path its binary was exec'd by, when it was a program's.
    pub path: Option<PathBuf>,
}

/// How long mappings found in a process wait for its announcement: one
/// that stores no stack is never announced (nor retired), and its
/// mappings are let go of.
const ANNOUNCED_WITHIN: Duration = Duration::from_secs(3);

impl Registry {
    /// Places the mappings the walker found since the last call, by process
    /// (PID and start): see [`Self::place`]. Only in processes announced:
    /// the others' wait for their announcement (the walker notes a
    /// mapping before the stack that announces the process is stored) and
    /// are let go of after [`ANNOUNCED_WITHIN`], as are those of processes
    /// retired already.
    pub fn place_found(&mut self, found: Vec<((u32, u32), Vec<FoundMap>)>) {
        let now = Instant::now();
        let mut waiting = std::mem::take(&mut self.pending_found);
        waiting.extend(found.into_iter().map(|(id, maps)| (now, id, maps)));
        for (at, (pid, start), maps) in waiting {
            if self.retired.contains_key(&(pid, start)) {
                continue;
            }
            if self.announced(pid, start) {
                self.place(pid, start, &maps);
            } else if now.duration_since(at) < ANNOUNCED_WITHIN {
                self.pending_found.push((at, (pid, start), maps));
            }
        }
    }

    /// Whether `pid` since `start` was announced (named) or read.
    fn announced(&self, pid: u32, start: u32) -> bool {
        self.names.get(&pid).is_some_and(|n| n.iter().any(|(s, _)| *s == start))
            || self.procs.get(&pid).is_some_and(|p| p.start == start)
            || self.older.contains_key(&(pid, start))
    }

    /// Places the mappings the walker found in `pid` since `start` (not
    /// read while it lived, or not since its exec): its frames there are
    /// named from them. They replace the mappings held of the process
    /// that they overlap (its image before an exec, inherited at its fork).
    fn place(&mut self, pid: u32, start: u32, found: &[FoundMap]) {
        if pid == 0 || start == 0 || found.is_empty() {
            return;
        }
        let mut vmas: Vec<Vma> = found
            .iter()
            .filter_map(|f| {
                let region = match (f.vdso, f.dev | f.ino) {
                    (true, _) => Region::Vdso,
                    (false, 0) => Region::Anon,
                    _ => Region::File(self.found_binary(f)?),
                };
                Some(Vma {
                    start: f.start,
                    end: f.end,
                    offset: f.offset,
                    region,
                })
            })
            .collect();
        vmas.sort_by_key(|v| v.start);
        vmas.dedup_by_key(|v| v.start);
        if let Some(p) = self.procs.get_mut(&pid).filter(|p| same_start(p.start, start)) {
            add_vmas(p, vmas);
        } else if let Some(p) = self.older.get_mut(&(pid, start)) {
            add_vmas(p, vmas);
        } else {
            let proc = Proc {
                start,
                vmas,
                ns_pid: None,
                root: None,
                root_known: true,
                perf_map: None,
                vsize: 0,
                alive: false,
            };
            match self.procs.get(&pid) {
                // A later process has the PID already.
                Some(now) if now.start > start => {
                    self.older.insert((pid, start), proc);
                }
                _ => self.put(pid, proc),
            }
        }
    }

    /// The binary of a found mapping: held already, else opened by the
    /// path its program was exec'd by when that is the same file.
    fn found_binary(&mut self, f: &FoundMap) -> Option<super::BinaryId> {
        let maps_key = (f.dev, f.ino);
        if let Some(&b) = self.by_maps_key.get(&maps_key) {
            return Some(b);
        }
        let path = f.path.as_ref()?;
        // Without blocking: the path a process was exec'd by may name a
        // FIFO by now.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .ok()?;
        let meta = file.metadata().ok()?;
        let dev = (u64::from(libc::major(meta.dev())) << 32) | u64::from(libc::minor(meta.dev()));
        if !meta.is_file() || dev != f.dev || meta.ino() != f.ino {
            return None;
        }
        let shown = path.to_string_lossy().into_owned();
        Some(self.hold_binary(maps_key, &shown, Some(file), None, None))
    }
}

/// Puts `found` into the process's mappings, over those they overlap.
fn add_vmas(proc: &mut Proc, found: Vec<Vma>) {
    proc.vmas
        .retain(|v| !found.iter().any(|f| f.start < v.end && v.start < f.end));
    proc.vmas.extend(found);
    proc.vmas.sort_by_key(|v| v.start);
}
