//! Threads idle for the whole window: waiting in one place from the
//! capture's start to its end and (nearly) never running. An event loop
//! with nothing to do, a pool worker with no task, a master waiting for
//! signals: their time says nothing of the work, so it is no finding
//! ([`super::findings`] leaves them out); one line says who they are.
//! Waits of threads that also ran (requests blocked on a lock, a disk, a
//! downstream) stay findings.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::threads::COLUMNS;
use super::waits::{Site, Sites};
use super::category;
use crate::profile::names::sanitize;
use crate::profile::{Kind, Profile, ThreadId, Unit};

/// The least share of the window a thread waits in one site to be idle.
const WAITING: f64 = 0.95;
/// The most of the window it may run.
const RUNNING: f64 = 0.01;
/// Groups the line lists before "and N more".
const LISTED: usize = 3;

/// Threads of one name in one process, idle in one site.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IdleGroup {
    /// Process and thread names, made safe to print.
    pub process: String,
    pub name: String,
    pub threads: usize,
    /// The off-CPU state, as the findings say it.
    pub state: &'static str,
    /// Made safe to print.
    pub site: String,
}

/// The idle threads of a profile.
#[derive(Clone, Debug, Default)]
pub struct Idle {
    pub threads: Vec<ThreadId>,
    /// Grouped as findings group threads, most threads first.
    pub groups: Vec<IdleGroup>,
}

impl Idle {
    pub fn has(&self, t: ThreadId) -> bool {
        self.threads.binary_search(&t).is_ok()
    }

    /// The summary's and the report's line; `None` when no thread idled.
    pub fn line(&self) -> Option<String> {
        if self.threads.is_empty() {
            return None;
        }
        let groups: Vec<String> = self
            .groups
            .iter()
            .take(LISTED)
            .map(|g| {
                let who = match g.threads {
                    1 => format!("thread {}", g.name),
                    k => format!("{k} threads {}", g.name),
                };
                format!("{who} of {}, {}: {}", g.process, g.state, g.site)
            })
            .collect();
        let more = match self.groups.len().saturating_sub(LISTED) {
            0 => String::new(),
            k => format!("; and {k} more"),
        };
        let n = self.threads.len();
        Some(format!(
            "{n} thread{} idle for the whole window (waiting in one place, never running; not in the findings): {}{more}",
            if n == 1 { "" } else { "s" },
            groups.join("; ")
        ))
    }
}

/// The threads of a wall-clock or off-CPU profile that waited in one site
/// for at least 95% of its duration and ran for at most 1% of it. None for
/// on-CPU profiles (they hold no waits) and profiles without a duration.
pub fn idle(profile: &Profile, sites: &Sites) -> Idle {
    let window = profile.meta.duration.as_micros() as f64;
    let timed = matches!(profile.meta.kind, Kind::Wall | Kind::OffCpu) && profile.unit == Unit::Microseconds;
    if !timed || window <= 0.0 {
        return Idle::default();
    }
    #[derive(Default)]
    struct Account {
        running: u64,
        waits: FxHashMap<(usize, Site), u64>,
    }
    let mut by_thread: FxHashMap<ThreadId, Account> = FxHashMap::default();
    for s in profile.stacks() {
        let Some(t) = s.thread else { continue };
        let a = by_thread.entry(t).or_default();
        match category(profile, s) {
            0 => a.running += s.weight,
            cat => *a.waits.entry((cat, sites.site(profile, s))).or_default() += s.weight,
        }
    }
    let mut threads = Vec::new();
    let mut groups: FxHashMap<(Arc<str>, Arc<str>, usize, String), usize> = FxHashMap::default();
    for (t, a) in by_thread {
        let Some(((cat, site), waited)) = a.waits.into_iter().max_by(|x, y| x.1.cmp(&y.1).then_with(|| y.0.cmp(&x.0))) else {
            continue;
        };
        if (a.running as f64) <= RUNNING * window && waited as f64 >= WAITING * window {
            threads.push(t);
            let th = profile.thread(t);
            *groups.entry((th.process.clone(), th.name.clone(), cat, site.to_string())).or_default() += 1;
        }
    }
    threads.sort_unstable();
    let mut groups: Vec<IdleGroup> = groups
        .into_iter()
        .map(|((process, name, cat, site), threads)| IdleGroup {
            process: sanitize(&process),
            name: sanitize(&name),
            threads,
            state: COLUMNS[cat],
            site: sanitize(&site),
        })
        .collect();
    groups.sort_by(|a, b| {
        b.threads.cmp(&a.threads).then_with(|| (&a.process, &a.name, &a.site).cmp(&(&b.process, &b.name, &b.site)))
    });
    Idle { threads, groups }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Thread};
    use std::time::Duration;

    /// A 10 s wall profile: a master that waited in sigsuspend all along,
    /// two workers that waited as long in epoll but ran a little, and one
    /// that waited 9 s.
    fn profile(worker_runs: u64) -> Profile {
        let mut p = Profile::new(Unit::Microseconds);
        p.meta.kind = Kind::Wall;
        p.meta.duration = Duration::from_secs(10);
        let f = |p: &mut Profile, n: &str, k| p.intern_frame(Frame::new(n, k));
        let main = f(&mut p, "main", FrameKind::User);
        let sigsuspend = f(&mut p, "sigsuspend", FrameKind::User);
        let epoll = f(&mut p, "epoll_wait", FrameKind::User);
        let handle = f(&mut p, "handle", FrameKind::User);
        let sleeping = f(&mut p, "[sleeping]", FrameKind::Pseudo);
        let thread = |p: &mut Profile, tid, name: &str| {
            p.intern_thread(Thread { start: 0, group: None, pid: 1, tid, process: "server".into(), name: name.into() })
        };
        let master = thread(&mut p, 1, "master");
        let w1 = thread(&mut p, 2, "worker");
        let w2 = thread(&mut p, 3, "worker");
        let busy = thread(&mut p, 4, "worker");
        let push = |p: &mut Profile, t, frames: Vec<u32>, weight| {
            p.push(Stack { thread: Some(t), frames: frames.into(), weight, ..Default::default() })
        };
        push(&mut p, master, vec![main, sigsuspend, sleeping], 10_000_000);
        for t in [w1, w2] {
            push(&mut p, t, vec![main, epoll, sleeping], 9_990_000);
            push(&mut p, t, vec![main, handle], worker_runs);
        }
        push(&mut p, busy, vec![main, epoll, sleeping], 9_000_000);
        push(&mut p, busy, vec![main, handle], 1_000_000);
        p
    }

    #[test]
    fn threads_waiting_in_one_place_all_along_are_idle_and_said_in_one_line() {
        let p = profile(10_000);
        let idle = idle(&p, &Sites::default());
        assert_eq!(idle.threads.len(), 3, "{idle:?}");
        assert_eq!(
            idle.line().unwrap(),
            "3 threads idle for the whole window (waiting in one place, never running; not in the findings): \
             2 threads worker of server, sleeping: sleeping in epoll_wait under main; \
             thread master of server, sleeping: sleeping in sigsuspend"
        );
    }

    #[test]
    fn a_thread_that_ran_or_waited_less_is_not_idle() {
        // 0.2 s of 10 s on CPU: over 1%.
        let p = profile(200_000);
        let idle = idle(&p, &Sites::default());
        assert_eq!(idle.threads.len(), 1, "{idle:?}");
        assert_eq!(idle.groups[0].name, "master");
        let mut on = p.clone();
        on.meta.kind = Kind::OnCpu;
        assert!(super::idle(&on, &Sites::default()).line().is_none(), "on-CPU profiles hold no waits");
        let mut read = p;
        read.meta.duration = Duration::ZERO;
        assert!(super::idle(&read, &Sites::default()).line().is_none(), "no window, no idle");
    }
}
