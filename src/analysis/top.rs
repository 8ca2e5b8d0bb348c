//! What `fgbpf top` shows, computed from two profiles of one capture, the
//! last interval's and everything since the start: the function table in
//! the manner of `py-spy top` (self and total), the off-CPU waits by site
//! and state as the report's findings name them, the processes and
//! threads, and the flame tree of the interval. Names come from the
//! target: they are sanitized here, once.

use rustc_hash::FxHashMap;

use super::functions::Lens;
use super::{ranking, state_of, waits};
use crate::profile::names::sanitize;
use crate::profile::{Profile, State};

/// Which side of the capture is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    OnCpu,
    OffCpu,
}

/// The column rows are sorted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// Self weight in the last interval, then since the start.
    SelfNow,
    TotalNow,
    SelfAll,
    TotalAll,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::SelfNow => Sort::TotalNow,
            Sort::TotalNow => Sort::SelfAll,
            Sort::SelfAll => Sort::TotalAll,
            Sort::TotalAll => Sort::SelfNow,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Sort::SelfNow => "self, last interval",
            Sort::TotalNow => "total, last interval",
            Sort::SelfAll => "self, since start",
            Sort::TotalAll => "total, since start",
        }
    }
}

/// A function's weight: in the last interval, and since the start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Line {
    pub name: String,
    pub self_now: u64,
    pub total_now: u64,
    pub self_all: u64,
    pub total_all: u64,
}

impl Line {
    fn key(&self, sort: Sort) -> (u64, u64) {
        match sort {
            Sort::SelfNow => (self.self_now, self.self_all),
            Sort::TotalNow => (self.total_now, self.total_all),
            Sort::SelfAll => (self.self_all, self.total_all),
            Sort::TotalAll => (self.total_all, self.self_all),
        }
    }
}

/// Sorts heaviest first by `sort`, ties by name.
pub fn sort_lines(lines: &mut [Line], sort: Sort) {
    lines.sort_by(|a, b| b.key(sort).cmp(&a.key(sort)).then_with(|| a.name.cmp(&b.name)));
}

/// Every function of either profile, with its self and total weight in
/// each (recursion counted once per stack, inlined fragments in their
/// function, as the report counts them).
pub fn functions(now: &Profile, all: &Profile, sort: Sort) -> Vec<Line> {
    let opts = ranking::Options::every_function(Lens::default());
    let mut by_name: FxHashMap<String, Line> = FxHashMap::default();
    for (profile, is_now) in [(now, true), (all, false)] {
        let summary = ranking::summarize(profile, &opts);
        for row in summary.by_total {
            let line = by_name.entry(row.name.clone()).or_insert_with(|| Line {
                name: sanitize(&row.name),
                ..Default::default()
            });
            match is_now {
                true => (line.self_now, line.total_now) = (row.self_weight, row.total_weight),
                false => (line.self_all, line.total_all) = (row.self_weight, row.total_weight),
            }
        }
    }
    let mut lines: Vec<Line> = by_name.into_values().collect();
    sort_lines(&mut lines, sort);
    lines
}

/// Off-CPU time by where it waited, as the report's findings say it
/// ("sleep in nanosleep under main") and in which state: self is the
/// site's time, total the same (a site is a leaf).
pub fn waits(now: &Profile, all: &Profile, sort: Sort) -> Vec<Line> {
    let mut by_site: FxHashMap<String, Line> = FxHashMap::default();
    for (profile, is_now) in [(now, true), (all, false)] {
        for s in profile.stacks() {
            let Some(state) = state_of(profile, s) else { continue };
            let name = wait_name(&waits::site(profile, s, Lens::default()), state);
            let line = by_site.entry(name.clone()).or_insert_with(|| Line { name, ..Default::default() });
            match is_now {
                true => line.self_now += s.weight,
                false => line.self_all += s.weight,
            }
        }
    }
    let mut lines: Vec<Line> = by_site
        .into_values()
        .map(|mut l| {
            (l.total_now, l.total_all) = (l.self_now, l.self_all);
            l
        })
        .collect();
    sort_lines(&mut lines, sort);
    lines
}

/// A wait as the report's findings name it, the user's function first (a
/// terminal's narrow column cuts the end): `nap_50ms > clock_nanosleep:
/// sleep [S]`.
fn wait_name(site: &waits::Site, state: State) -> String {
    let at: Vec<&str> = [site.under.as_deref(), site.function.as_deref()].into_iter().flatten().collect();
    let why = site.reason.as_deref().unwrap_or(state.name());
    let text = match at.is_empty() {
        true => format!("{why} [{}]", state_letter(state)),
        false => format!("{}: {why} [{}]", at.join(" > "), state_letter(state)),
    };
    sanitize(&text)
}

/// `S`, `D`, `R`: as `ps` and `top` write the states.
pub fn state_letter(state: State) -> &'static str {
    match state {
        State::Sleeping => "S",
        State::Uninterruptible => "D",
        State::Runqueue => "R",
    }
}

/// Which stacks are shown: all, one process's or one thread's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Narrow {
    #[default]
    All,
    Process(u32),
    Thread(u32),
}

impl Narrow {
    /// Keeps only the stacks of the process or thread narrowed to.
    pub fn apply(self, profile: &mut Profile) {
        let (pid, tid) = match self {
            Narrow::All => return,
            Narrow::Process(p) => (Some(p), None),
            Narrow::Thread(t) => (None, Some(t)),
        };
        let keep: Vec<bool> = profile
            .threads()
            .iter()
            .map(|t| pid.is_none_or(|p| t.pid == p) && tid.is_none_or(|x| x == t.tid))
            .collect();
        profile.retain(|s| s.thread.is_some_and(|t| keep[t as usize]));
    }
}

/// A process, or one of its threads (listed under it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    /// `None` for the process row.
    pub tid: Option<u32>,
    pub name: String,
    pub now: u64,
    pub all: u64,
}

impl Task {
    pub fn narrow(&self) -> Narrow {
        match self.tid {
            Some(t) => Narrow::Thread(t),
            None => Narrow::Process(self.pid),
        }
    }
}

/// Each process, heaviest first since the start, followed by its threads:
/// those of `now` and `all` with their weights, and those seen only on the
/// other side (`other`: a thread that sleeps is in the on-CPU table too,
/// with nothing, so that it can be narrowed to before a sample lands on
/// its rare runs).
pub fn tasks(now: &Profile, all: &Profile, other: Option<&Profile>) -> Vec<Task> {
    type Weights = FxHashMap<(u32, u32), (u64, u64, String, String)>;
    let mut threads: Weights = FxHashMap::default();
    let sides = [(now, Some(true)), (all, Some(false))].into_iter().chain(other.map(|o| (o, None)));
    for (profile, is_now) in sides {
        for s in profile.stacks() {
            let Some(t) = s.thread.map(|t| profile.thread(t)) else { continue };
            let e = threads
                .entry((t.pid, t.tid))
                .or_insert_with(|| (0, 0, sanitize(&t.process), sanitize(&t.name)));
            match is_now {
                Some(true) => e.0 += s.weight,
                Some(false) => e.1 += s.weight,
                None => {}
            }
        }
    }
    let mut processes: FxHashMap<u32, Task> = FxHashMap::default();
    for (&(pid, _), (now, all, process, _)) in &threads {
        let p = processes.entry(pid).or_insert_with(|| Task {
            pid,
            tid: None,
            name: process.clone(),
            now: 0,
            all: 0,
        });
        p.now += now;
        p.all += all;
    }
    let mut order: Vec<Task> = processes.into_values().collect();
    order.sort_by(|a, b| b.all.cmp(&a.all).then(a.pid.cmp(&b.pid)));
    let mut out = Vec::new();
    for p in order {
        let mut mine: Vec<Task> = threads
            .iter()
            .filter(|((pid, _), _)| *pid == p.pid)
            .map(|(&(pid, tid), (now, all, _, name))| Task {
                pid,
                tid: Some(tid),
                name: name.clone(),
                now: *now,
                all: *all,
            })
            .collect();
        mine.sort_by(|a, b| b.all.cmp(&a.all).then(a.tid.cmp(&b.tid)));
        out.push(p);
        out.extend(mine);
    }
    out
}

/// A frame of the flame tree and the weight under it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub weight: u64,
    /// Heaviest first.
    pub children: Vec<Node>,
}

impl Node {
    /// The node at `path` (child indexes from here), if it exists.
    pub fn at(&self, path: &[usize]) -> Option<&Node> {
        path.iter().try_fold(self, |n, &i| n.children.get(i))
    }
}

/// The flame tree of `profile`: a root `all`, then each process, then
/// its stacks from their roots.
pub fn flame(profile: &Profile) -> Node {
    let mut root = Node {
        name: "all".into(),
        ..Default::default()
    };
    for s in profile.stacks() {
        root.weight += s.weight;
        let process = s.thread.map(|t| {
            let t = profile.thread(t);
            format!("{}-{}", sanitize(&t.process), t.pid)
        });
        let names = process
            .into_iter()
            .chain(s.frames.iter().map(|&f| sanitize(&profile.frame(f).name)));
        let mut node = &mut root;
        for name in names {
            let i = match node.children.iter().position(|c| c.name == name) {
                Some(i) => i,
                None => {
                    node.children.push(Node {
                        name,
                        ..Default::default()
                    });
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i];
            node.weight += s.weight;
        }
    }
    sort_tree(&mut root);
    root
}

fn sort_tree(node: &mut Node) {
    node.children
        .sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
    for c in &mut node.children {
        sort_tree(c);
    }
}

#[cfg(test)]
#[path = "top_tests.rs"]
mod tests;
