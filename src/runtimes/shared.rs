//! What the runtimes' user-space halves share: finding a
//! runtime's binary in a process (also when renamed: [`Renamed`]), naming the frame words of one runtime,
//! and weighing what could not be named.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;

use crate::procs::maps::{self, MapsLine};
use crate::profile::RawStack;
use crate::symbolize::{is_runtime_word, Named, RuntimeNames, UnresolvedReason};

/// The first executable file mapping of `pid` (`text`, its
/// /proc/PID/maps) whose path `wanted` accepts, or which is the process's
/// own executable not yet found to be something else (`renamed`, for
/// the runtimes whose binary is the executable),
/// opened through /proc/PID/map_files (so a process in another mount
/// namespace is read too), unless `found_at` already holds it at that
/// place: a runtime's binary, looked at once per process.
pub(crate) fn runtime_binary<'a>(
    pid: u32,
    text: &'a str,
    wanted: fn(&str) -> bool,
    renamed: Option<&Renamed>,
    found_at: &mut HashMap<u32, (u64, u64)>,
) -> Option<(MapsLine<'a>, File)> {
    let mut exe = Executable::default();
    for m in text.lines().filter_map(maps::parse_line) {
        let is_exe = exe.is(&m);
        let worth = match renamed {
            Some(r) => r.worth(&m, is_exe, wanted),
            None => wanted(m.path),
        };
        if !m.exec || m.inode == 0 || !worth {
            continue;
        }
        if found_at.get(&pid) == Some(&(m.start, m.inode)) {
            return None;
        }
        let path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
        let Ok(file) = File::open(&path) else { continue };
        found_at.insert(pid, (m.start, m.inode));
        return Some((m, file));
    }
    None
}

/// A runtime's binary whatever it is called: a process's own executable
/// is looked into once per file (device, inode) even when its name is
/// not the runtime's (`cp php8.2 app`, a Node single-executable
/// application), and remembered when it is not the runtime's, so that a
/// storm of one program costs one look.
#[derive(Default)]
pub(crate) struct Renamed {
    not: HashSet<(u64, u64)>,
}

/// How many executables [`Renamed`] remembers before starting again.
const RENAMED_KEPT: usize = 4096;

/// Tells a process's executable among its mappings as a walk of its
/// /proc/PID/maps (in address order) reaches it: the first executable
/// file mapping (the executable is mapped below its libraries).
#[derive(Default)]
pub(crate) struct Executable {
    seen: bool,
}

impl Executable {
    /// Whether `m`, the walk's next mapping, is the executable's.
    pub fn is(&mut self, m: &MapsLine) -> bool {
        let first = m.exec && m.inode != 0 && !self.seen;
        self.seen |= first;
        first
    }
}

impl Renamed {
    /// Whether mapping `m` may be the runtime's binary: by name
    /// (`wanted`), or as the executable (`is_exe`, told by [`Executable`])
    /// not yet found to be something else.
    pub fn worth(&self, m: &MapsLine, is_exe: bool, wanted: fn(&str) -> bool) -> bool {
        wanted(m.path) || (is_exe && !self.not.contains(&(m.dev, m.inode)))
    }

    /// `m`, looked into, is not the runtime's binary: remembered when it
    /// was looked into for being the executable only.
    pub fn not_it(&mut self, m: &MapsLine, wanted: fn(&str) -> bool) {
        if wanted(m.path) {
            return;
        }
        if self.not.len() >= RENAMED_KEPT {
            self.not.clear();
        }
        self.not.insert((m.dev, m.inode));
    }
}

/// Per process, the weight of stacks holding a runtime's frames that could
/// not be named, by reason (why, remedy): on-CPU samples and off-CPU
/// microseconds. Said in the summary and the report.
pub type Unnamed = BTreeMap<(u32, &'static str, &'static str), (u64, u64)>;

/// What is said of a frame named only in part (why, remedy).
pub(crate) type Partly = Option<(&'static str, &'static str)>;

/// Names every frame word of one runtime (fgbpf.h: bits 61-60, FG_RT_*) in
/// `stacks` and their wakers', each (process, word) once with `name_word`,
/// and weighs the stacks holding a word left unnamed, or named only in
/// part, once per reason.
pub(crate) fn name_words(
    stacks: &[RawStack],
    runtime: u64,
    name_word: impl Fn(u32, u64) -> (Named, Partly),
) -> (RuntimeNames, Unnamed) {
    let mut names = RuntimeNames::new();
    let mut partly = std::collections::HashMap::new();
    let mut unnamed = Unnamed::new();
    for r in stacks.iter().flat_map(|r| std::iter::once(r).chain(r.waker.as_deref())) {
        let mut reasons = Vec::new();
        for &w in r.user.iter().filter(|&&w| is_runtime_word(w) && (w >> 60) & 3 == runtime) {
            if let std::collections::hash_map::Entry::Vacant(e) = names.entry((r.pid, w)) {
                let (named, part) = name_word(r.pid, w);
                e.insert(named);
                partly.insert((r.pid, w), part);
            }
            let why = match (&names[&(r.pid, w)].unresolved, partly[&(r.pid, w)]) {
                (Some(UnresolvedReason::Runtime { why, remedy }), _) => Some((*why, *remedy)),
                (_, part) => part,
            };
            if let Some(why) = why.filter(|why| !reasons.contains(why)) {
                reasons.push(why);
            }
        }
        for (why, remedy) in reasons {
            let e = unnamed.entry((r.pid, why, remedy)).or_default();
            match r.state {
                None => e.0 += r.weight,
                Some(_) => e.1 += r.weight,
            }
        }
    }
    (names, unnamed)
}

/// What a runtime keeps per process (`pid → T`: why it cannot read one),
/// in pid order, for the summary.
pub(crate) fn by_pid<T: Clone>(per: &HashMap<u32, T>) -> Vec<(u32, T)> {
    let mut v: Vec<(u32, T)> = per.iter().map(|(&pid, t)| (pid, t.clone())).collect();
    v.sort_by_key(|(pid, _)| *pid);
    v
}
