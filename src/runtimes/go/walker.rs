//! Go programs' goroutines during a capture: each process the probe reads
//! is checked for a Go runtime ([`crate::runtimes::go`]); the goroutines of
//! those found are read from outside at a steady interval
//! ([`crate::runtimes::go::goroutines`]), each read weighing every goroutine's
//! stack and state by the time since the previous one (the goroutine wall
//! view), and the last read kept as a snapshot (the report's goroutine
//! counts). No BPF reads them: goroutines wait in Go's scheduler, not the
//! kernel's. The goroutine each thread runs when sampled is the BPF
//! walker's ([`super::label_walker`]), given each program found here.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libbpf_rs::MapCore;

use super::heap::Watch;
use super::label_walker::GoLabels;
use crate::runtimes::go::goroutines::{self, Reader};
use crate::runtimes::go::{self as golang};
use crate::bpf::FgbpfSkel;
use crate::procs::maps;
use crate::runtimes::shared::by_pid;
use crate::runtimes::{interp_added, Announcement, Found, Runtime, Settings, BpfWalker};
use crate::profile::RawStack;

/// How often goroutines are read, at most: more often when a read is
/// cheap, less when it is not (see [`Go::tick`]).
const EVERY: Duration = Duration::from_millis(100);
/// The share of one CPU the reads may take: a process whose read takes
/// 2 ms is read every 100 ms, one whose read takes 50 ms every 2.5 s.
const BUDGET: u32 = 50;
/// Binaries found not to be Go, remembered at most.
const MAX_NOT_GO: usize = 65536;

/// A goroutine stack and state: the key its time is summed under.
type Key = (u32, Arc<[u64]>, &'static str);

struct Process {
    reader: Reader,
    /// When it was last read, and how long the read took.
    last: Instant,
    took: Duration,
    /// The last read: goroutines by stack and state.
    snapshot: HashMap<(Arc<[u64]>, &'static str), u64>,
    reads: u64,
    at: Duration,
    /// Its goroutines could not be read at the last try (it exited).
    done: bool,
}

/// What the report says of one Go process.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub pid: u32,
    pub version: String,
    /// Reads made, and the capture time of the last.
    pub reads: u64,
    pub at: Duration,
    /// The last read's goroutines, one stack per (stack, state), weighing
    /// how many goroutines had it.
    pub stacks: Vec<RawStack>,
    /// Goroutines that could not be read at the last read.
    pub not_read: usize,
}

pub(crate) struct Go {
    processes: HashMap<u32, Process>,
    found_at: HashMap<u32, (u64, u64)>,
    not_go: HashSet<(u64, u64)>,
    /// Go processes whose goroutines cannot be read, and why.
    pub unsupported: HashMap<u32, String>,
    /// Goroutine time by stack and state, microseconds.
    time: HashMap<Key, u64>,
    not_read: HashMap<u32, usize>,
    start: Instant,
    comm: Arc<str>,
    /// Whether goroutines are read (off-CPU time recorded, `--no-go` not
    /// given), besides the walker's telling them on stacks.
    read_goroutines: bool,
    /// The walker's side: `None` with `--no-go`.
    pub labels: Option<GoLabels>,
    /// `fgbpf alloc`: each Go process's own heap profile, over the
    /// capture; `None` otherwise.
    heaps: Option<HashMap<u32, Watch>>,
    /// What the summary says of those that cannot be read.
    heap_notes: HashMap<u32, String>,
}

impl Go {
    pub fn new(read_goroutines: bool, labels: bool, heap: bool) -> Go {
        Go {
            processes: HashMap::new(),
            found_at: HashMap::new(),
            not_go: HashSet::new(),
            unsupported: HashMap::new(),
            time: HashMap::new(),
            not_read: HashMap::new(),
            start: Instant::now(),
            comm: Arc::from("goroutines"),
            read_goroutines,
            labels: labels.then(GoLabels::default),
            heaps: heap.then(HashMap::new),
            heap_notes: HashMap::new(),
        }
    }

    /// Looks for a Go runtime in `pid`'s main executable (`text`: the
    /// executable mappings of its /proc/PID/maps). True when the walker
    /// was given an entry in `procs` (`go_procs`).
    pub fn track<M: MapCore>(&mut self, pid: u32, text: &str, procs: &M) -> bool {
        let Some(m) = text.lines().filter_map(maps::parse_line).find(|m| m.exec && m.inode != 0 && m.path.starts_with('/')) else {
            return false;
        };
        let key = (m.dev, m.inode);
        if self.found_at.get(&pid) == Some(&key) || self.not_go.contains(&key) {
            return false;
        }
        let Ok(file) = File::open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end)) else {
            return false;
        };
        self.found_at.insert(pid, key);
        match golang::find(&file, m.start, m.offset) {
            Ok(Some(rt)) => {
                self.unsupported.remove(&pid);
                let added = self.labels.as_mut().is_some_and(|l| l.add(pid, &rt, procs));
                if let Some(heaps) = self.heaps.as_mut() {
                    match rt.heap {
                        Some(at) => {
                            let funcs = super::heap::Funcs::of(&file, rt.bias);
                            heaps.insert(pid, Watch::new(pid, at, rt.heap_off, funcs));
                        }
                        None => {
                            self.heap_notes.insert(pid, "its heap profile not read: its binary has no runtime.mbuckets or runtime.MemProfileRate".into());
                        }
                    }
                }
                if !self.read_goroutines {
                    return added;
                }
                self.processes.insert(
                    pid,
                    Process {
                        reader: Reader::new(pid, rt),
                        last: self.start.max(Instant::now().checked_sub(EVERY).unwrap_or(self.start)),
                        took: Duration::ZERO,
                        snapshot: HashMap::new(),
                        reads: 0,
                        at: Duration::ZERO,
                        done: false,
                    },
                );
                added
            }
            Ok(None) => {
                self.found_at.remove(&pid);
                if self.not_go.len() >= MAX_NOT_GO {
                    self.not_go.clear();
                }
                self.not_go.insert(key);
                false
            }
            Err(why) => {
                if self.heaps.is_some() {
                    self.heap_notes.insert(pid, format!("its heap profile not read: {why}"));
                }
                self.unsupported.insert(pid, why);
                false
            }
        }
    }

    pub fn knows(&self, pid: u32) -> bool {
        self.found_at.contains_key(&pid)
    }

    /// `pid` exited: what was read of it is kept, and its PID is not read
    /// again (another program may be given it).
    pub fn exited(&mut self, pid: u32) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.done = true;
        }
        if let Some(h) = self.heaps.as_mut().and_then(|h| h.get_mut(&pid)) {
            h.exited();
        }
        self.found_at.remove(&pid);
    }

    /// Reads the goroutines of the processes due: each at most every
    /// [`EVERY`], and no more often than its last read's cost allows
    /// ([`BUDGET`]).
    pub fn tick(&mut self) {
        self.read(false);
    }

    /// Reads every process now: at the capture's end, so that the view
    /// covers it up to there.
    pub fn read_all(&mut self) {
        self.read(true);
    }

    /// Reads the processes due, or all.
    fn read(&mut self, all: bool) {
        for h in self.heaps.iter_mut().flat_map(|h| h.values_mut()) {
            h.tick(all);
        }
        let now = Instant::now();
        for (&pid, p) in &mut self.processes {
            if p.done {
                continue;
            }
            let due = EVERY.max(p.took * BUDGET);
            if !all && now.duration_since(p.last) < due {
                continue;
            }
            let weight = now.duration_since(p.last).as_micros() as u64;
            let read = match p.reader.read() {
                Ok(r) => r,
                // Gone: what was read of it is kept.
                Err(_) => {
                    p.done = true;
                    continue;
                }
            };
            p.took = now.elapsed();
            p.last = now;
            p.reads += 1;
            p.at = now.duration_since(self.start);
            p.snapshot.clear();
            *self.not_read.entry(pid).or_default() = read.not_read;
            // Counted by stack first: goroutines by the thousand share a
            // few stacks, each then kept once.
            let mut counts: HashMap<(&[u64], &'static str), u64> = HashMap::new();
            for g in &read.goroutines {
                let frame = goroutines::state_frame(&mut p.reader, g.state);
                *counts.entry((&g.pcs, frame)).or_default() += 1;
            }
            for ((pcs, frame), n) in counts {
                let pcs: Arc<[u64]> = Arc::from(pcs);
                *self.time.entry((pid, pcs.clone(), frame)).or_default() += weight * n;
                p.snapshot.insert((pcs, frame), n);
            }
        }
    }

    /// The goroutine wall view's stacks (microseconds) and each process's
    /// last snapshot, so far (`fgbpf top` asks again and again).
    pub fn finish(&self) -> (Vec<RawStack>, Vec<Snapshot>) {
        let comm = self.comm.clone();
        let stack = |pid, user: Arc<[u64]>, frame, weight| RawStack {
            pid,
            tid: 0,
            comm: comm.clone(),
            user,
            weight,
            kernel_note: Some(frame),
            ..RawStack::default()
        };
        let stacks = self
            .time
            .iter()
            .map(|((pid, user, frame), &w)| stack(*pid, user.clone(), frame, w))
            .collect();
        let mut snapshots: Vec<Snapshot> = self
            .processes
            .iter()
            .filter(|(_, p)| p.reads > 0)
            .map(|(&pid, p)| Snapshot {
                pid,
                version: p.reader.runtime().version.clone(),
                reads: p.reads,
                at: p.at,
                stacks: p.snapshot.iter().map(|((user, frame), &n)| stack(pid, user.clone(), frame, n)).collect(),
                not_read: self.not_read.get(&pid).copied().unwrap_or(0),
            })
            .collect();
        snapshots.sort_by_key(|s| s.pid);
        (stacks, snapshots)
    }
}

/// Go programs: whether their stacks carry the goroutine they ran.
pub const LANG: super::super::walks::Lang = super::super::walks::Lang {
    name: "Go",
    runtime: "Go",
    native: "their functions without the goroutine",
    outside: "running no goroutine (the scheduler, threads Go did not start)",
    whole: "with the goroutine it ran (its id and pprof labels)",
    cut: "without their goroutine (stacks at the 127-frame limit)",
    fault: "without their goroutine (its memory could not be read)",
    not_read: "goroutines not told on its stacks",
    early: "taken before fgbpf had read the program (without their goroutine)",
};

/// What the Go folder registers (crate::runtimes' one list).
pub(crate) const REGISTERED: super::super::Registered = super::super::Registered {
    start,
    plumbing: super::PLUMBING,
    thread_roles: &[],
    marker: None,
    walker_maps: &[],
    id_label: Some(super::label_walker::GOROUTINE),
};

/// Its reader, when the capture reads goroutines or the walker tells them
/// on stacks.
pub(crate) fn start(s: &Settings) -> Option<Box<dyn Runtime>> {
    let labels = s.walks(BpfWalker::Go);
    (s.goroutines || labels || s.heap).then(|| Box::new(Go::new(s.goroutines, labels, s.heap)) as Box<dyn Runtime>)
}

impl Runtime for Go {
    fn track(&mut self, skel: &mut FgbpfSkel<'_>, pid: u32, text: &str) {
        if Go::track(self, pid, text, &skel.maps.go_procs) {
            interp_added(skel);
        }
    }

    /// FG_PROC_GO_LABELS.
    fn announced(&mut self, pid: u32, a: &Announcement) -> bool {
        if a.kind != 13 {
            return false;
        }
        if let Some(labels) = self.labels.as_mut() {
            labels.read_announced(pid, a.addr);
        }
        true
    }

    fn reads_fresh(&self) -> bool {
        self.labels.is_some()
    }

    fn fresh(&mut self, pid: u32, user: &[u64]) {
        if let Some(labels) = self.labels.as_mut() {
            labels.fresh(pid, user);
        }
    }

    fn tick(&mut self) {
        Go::tick(self);
    }

    fn exited(&mut self, pid: u32) {
        Go::exited(self, pid);
    }

    fn stopped(&mut self) {
        self.read_all();
    }

    fn finish(&mut self, stacks: &mut [RawStack], found: &mut Found) {
        if let Some(labels) = self.labels.as_mut() {
            labels.name(stacks);
            found.gos = labels.found().map(|(pid, v)| (pid, v.to_string())).collect();
            found.gos.sort_unstable();
            found.go_labels_unsupported = by_pid(&labels.unsupported);
            found.go_labels_unread = labels.unread.clone();
        }
        (found.goroutines, found.go_snapshots) = Go::finish(self);
        found.go_unsupported = by_pid(&self.unsupported);
        let mut notes: Vec<(u32, String)> = self.heap_notes.iter().map(|(&pid, n)| (pid, n.clone())).collect();
        for (&pid, h) in self.heaps.iter().flatten() {
            let (stacks, note) = h.stacks();
            found.go_heap.extend(stacks);
            notes.push((pid, note));
        }
        notes.sort_unstable();
        found.notes.extend(notes.into_iter().map(|(pid, n)| (pid, LANG.name, n)));
    }

    fn forget(&mut self, keep: &dyn Fn(u32) -> bool) {
        if let Some(labels) = self.labels.as_mut() {
            labels.forget(keep);
        }
    }

    fn knows(&self, pid: u32) -> bool {
        Go::knows(self, pid)
    }
}
