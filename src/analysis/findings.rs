//! The answer first: the two or three heaviest things a profile shows, each
//! in one plain sentence ("25% of wall time in thread idle-waiter,
//! sleeping: sleep in clock_nanosleep under fgbpf::demo::run"). A finding
//! is the time of one site ([`super::waits`]) in the threads of one name,
//! so that a pool of workers doing the same thing adds up. Threads idle for
//! the whole window ([`super::idle`]) are no finding.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use super::threads::COLUMNS;
use super::idle::Idle;
use super::waits::{Site, Sites};
use super::{category, pct};
use crate::profile::names::sanitize;
use crate::profile::{Kind, Profile};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Percentage of the profile's total.
    pub share: f64,
    pub weight: u64,
    /// "on-CPU" or the off-CPU state.
    pub state: &'static str,
    /// The thread name (without its ID), `None` for profiles without
    /// threads.
    pub thread: Option<String>,
    /// How many threads of that name share the site.
    pub threads: usize,
    pub site: String,
    /// The sentence.
    pub text: String,
    /// Who woke most of these waits (`--wakers`; [`super::woken`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub woken: Option<Woken>,
    /// What the finding adds up: the threads' process and name, the
    /// column, the site.
    #[serde(skip)]
    pub key: Key,
}

/// The heaviest waker of a finding's waits ([`super::woken`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Woken {
    /// The waker as "Top waits by waker" names it (`thread in A → B → C`).
    pub by: String,
    /// Percentage of the finding's waits (with a waker recorded) it woke.
    pub share: f64,
}

/// A finding's group: the threads' process and name (`None` for profiles
/// without threads), the column ([`COLUMNS`]), the site.
pub type Key = (Option<(Arc<str>, Arc<str>)>, usize, Site);

/// What the profile's total is, for the sentence.
fn scope(kind: Kind) -> &'static str {
    match kind {
        Kind::OnCpu | Kind::Other => "CPU time",
        Kind::OffCpu => "off-CPU time",
        Kind::Wall => "wall time",
        Kind::Alloc => "the bytes allocated",
    }
}

/// A share as people round it: "68%", or "4.2%" below 10.
pub(crate) fn share_text(share: f64) -> String {
    if share >= 9.95 {
        format!("{share:.0}%")
    } else {
        format!("{share:.1}%")
    }
}

/// The heaviest findings, at most `n`, each at least 1% of the total,
/// leaving out the threads of `idle` (what [`super::idle::idle`] found with
/// the same sites), each wait named as `sites` tells it apart.
pub fn findings(profile: &Profile, sites: &Sites, idle: &Idle, n: usize) -> Vec<Finding> {
    let total = profile.total();
    if total == 0 || n == 0 {
        return Vec::new();
    }
    let mut groups: FxHashMap<Key, (u64, FxHashSet<u32>)> = FxHashMap::default();
    let mut processes = FxHashSet::default();
    for s in profile.stacks().iter().filter(|s| !s.thread.is_some_and(|t| idle.has(t))) {
        let who = s.thread.map(|t| profile.thread(t));
        if let Some(t) = who {
            processes.insert(&*t.process);
        }
        let key = (
            who.map(|t| (t.process.clone(), t.name.clone())),
            category(profile, s),
            sites.site(profile, s),
        );
        let g = groups.entry(key).or_default();
        g.0 += s.weight;
        if let Some(t) = who {
            g.1.insert(t.tid);
        }
    }
    let mut all: Vec<(Key, (u64, FxHashSet<u32>))> = groups.into_iter().collect();
    all.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    let several_processes = processes.len() > 1;
    all.into_iter()
        .take(n)
        .filter(|(_, (w, _))| pct(*w, total) >= 1.0)
        .map(|(key, (weight, tids))| {
            let (who, cat, site) = &key;
            let cat = *cat;
            let share = pct(weight, total);
            let threads = tids.len();
            let thread = who.as_ref().map(|(_, name)| sanitize(name));
            let mut text = format!("{} of {}", share_text(share), scope(profile.meta.kind));
            if let Some((process, name)) = &who {
                let name = sanitize(name);
                match threads {
                    1 => text.push_str(&format!(" in thread {name}")),
                    k => text.push_str(&format!(" in {k} threads {name}")),
                }
                if several_processes {
                    text.push_str(&format!(" of {}", sanitize(process)));
                }
            }
            let state = COLUMNS[cat];
            let site = sanitize(&site.to_string());
            let key = key.clone();
            match cat {
                0 if profile.meta.kind != Kind::Wall => text.push_str(&format!(": {site}")),
                0 => text.push_str(&format!(", on CPU: {site}")),
                _ => text.push_str(&format!(", {state}: {site}")),
            }
            Finding {
                share,
                weight,
                state,
                thread,
                threads,
                site,
                text,
                woken: None,
                key,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Thread, Unit};

    #[test]
    fn workers_of_one_name_add_up_and_the_heaviest_come_first() {
        let mut p = Profile::new(Unit::Microseconds);
        p.meta.kind = Kind::Wall;
        let f = |p: &mut Profile, n: &str, k| p.intern_frame(Frame::new(n, k));
        let work = f(&mut p, "work", FrameKind::User);
        let read = f(&mut p, "__libc_read", FrameKind::User);
        let handle = f(&mut p, "handle", FrameKind::User);
        let pipe = f(&mut p, "pipe_read", FrameKind::Kernel);
        let sleeping = f(&mut p, "[sleeping]", FrameKind::Pseudo);
        for tid in 1..=3 {
            let t = p.intern_thread(Thread {
                start: 0,
                group: None,
                pid: 1,
                tid,
                process: "app".into(),
                name: "worker".into(),
            });
            p.push(Stack {
                thread: Some(t),
                frames: vec![handle, read, pipe, sleeping].into(),
                weight: 200,
                ..Default::default()
            });
            p.push(Stack {
                thread: Some(t),
                frames: vec![work].into(),
                weight: 100,
                ..Default::default()
            });
        }
        let found = findings(&p, &Sites::default(), &Idle::default(), 3);
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].text,
            "67% of wall time in 3 threads worker, sleeping: pipe read in read under handle"
        );
        assert_eq!(found[1].text, "33% of wall time in 3 threads worker, on CPU: work");
    }
}
