//! Who woke the waits a finding names (`--wakers`): the offwake view's
//! stacks (blocked stack, `--`, the waker's stack from its leaf up) split
//! at the separator, each blocked half named as the findings name a wait,
//! and the heaviest waker of each finding's waits said beside it: for a
//! lock, the code that released it. Also how a waker is named, shared
//! with the report's "Top waits by waker".

use rustc_hash::FxHashMap;

use super::findings::{share_text, Finding, Key, Woken};
use super::waits::Sites;
use super::{category, pct, STATES};
use crate::profile::names::sanitize;
use crate::profile::raw::{INTERRUPT_WAKER, WAKER_SEPARATOR};
use crate::profile::{FrameId, FrameKind, Profile, Stack, State};

/// Kernel frames between a wakeup and its cause: skipped when naming what
/// an interrupt woke a thread from.
const WAKEUP_PLUMBING: &[&str] = &[
    "bpf_", "__bpf", "__traceiter", "trace_", "try_to_wake_up", "wake_up_", "__wake_up",
    "default_wake_function", "autoremove_wake_function", "woken_wake_function",
];

/// Frames a site shows: enough to reach the user's code past libc's
/// wrappers and their inlined helpers.
const SITE_FRAMES: usize = 3;

/// The syscall entry: the waker's user frames start above it.
fn is_syscall_entry(name: &str) -> bool {
    name.starts_with("entry_SYSCALL") || name == "do_syscall_64"
}

/// `names` (leaf first) without repeats of the same name in a row (a
/// function and its inlined copy), at most [`SITE_FRAMES`], caller first.
pub fn site(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if out.last() != Some(&n) {
            out.push(n);
        }
        if out.len() == SITE_FRAMES {
            break;
        }
    }
    out.reverse();
    out
}

/// Who woke it: the waker's thread name (or `[interrupt]`) and its user
/// frames nearest the wakeup, or for an interrupt the kernel function that
/// woke the thread.
pub fn waker_site(profile: &Profile, waker: &[FrameId]) -> String {
    let names: Vec<&str> = waker.iter().map(|&f| profile.frame(f).name.as_str()).collect();
    let Some((&who, frames)) = names.split_last() else {
        return "[no waker recorded]".to_string();
    };
    let site: Vec<String> = if who == INTERRUPT_WAKER {
        frames
            .iter()
            .find(|n| !WAKEUP_PLUMBING.iter().any(|p| n.starts_with(p)))
            .map(|n| sanitize(n))
            .into_iter()
            .collect()
    } else {
        let user_start = frames.iter().rposition(|n| is_syscall_entry(n)).map_or(0, |i| i + 1);
        site(frames[user_start..].iter().map(|n| sanitize(n)))
    };
    match site.is_empty() {
        true => sanitize(who),
        false => format!("{} in {}", sanitize(who), site.join(" → ")),
    }
}

/// Where `stack` of an offwake view splits into the blocked stack and its
/// waker's.
pub fn split(profile: &Profile, stack: &Stack) -> Option<usize> {
    stack.frames.iter().position(|&f| {
        let f = profile.frame(f);
        f.kind == FrameKind::Pseudo && f.name == WAKER_SEPARATOR
    })
}

/// Says beside each finding of `found` that sleeps who woke most of its waits,
/// from `wake` (the same capture's offwake view), its blocked halves named
/// with the findings' `sites`.
pub fn name_wakers(found: &mut [Finding], wake: &Profile, sites: &Sites) {
    // Sleeps only: a thread waiting for a CPU was preempted, not woken.
    let slept = |cat: usize| cat != 0 && STATES[cat - 1] != State::Runqueue;
    let wanted: FxHashMap<&Key, usize> =
        found.iter().enumerate().filter(|(_, f)| slept(f.key.1)).map(|(i, f)| (&f.key, i)).collect();
    if wanted.is_empty() {
        return;
    }
    let mut by: Vec<FxHashMap<String, u64>> = vec![FxHashMap::default(); found.len()];
    for s in wake.stacks() {
        let Some(at) = split(wake, s) else { continue };
        let blocked = Stack { thread: s.thread, frames: s.frames[..at].to_vec().into(), weight: s.weight, ..Default::default() };
        let who = s.thread.map(|t| wake.thread(t)).map(|t| (t.process.clone(), t.name.clone()));
        let key: Key = (who, category(wake, &blocked), sites.site(wake, &blocked));
        if let Some(&i) = wanted.get(&key) {
            *by[i].entry(waker_site(wake, &s.frames[at + 1..])).or_default() += s.weight;
        }
    }
    for (f, wakers) in found.iter_mut().zip(by) {
        let total: u64 = wakers.values().sum();
        let Some((waker, w)) = wakers.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0))) else {
            continue;
        };
        let share = pct(w, total);
        f.text.push_str(&format!("; {} of it woken by {waker}", share_text(share)));
        f.woken = Some(Woken { by: waker, share });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::findings::findings;
    use crate::analysis::idle::Idle;
    use crate::profile::{Frame, Kind, Thread, Unit};

    /// A profile whose thread `worker` waits in `lock_row` (a futex under
    /// it), with `wakers` after `--` when given: the offwake view of the
    /// same waits.
    fn waits(wakers: &[(&[&str], u64)]) -> Profile {
        let mut p = Profile::new(Unit::Microseconds);
        p.meta.kind = Kind::OffCpu;
        let t = p.intern_thread(Thread { start: 0, group: None, pid: 10, tid: 11, process: "db".into(), name: "worker".into() });
        let f = |p: &mut Profile, n: &str, k| p.intern_frame(Frame::new(n, k));
        let blocked = vec![
            f(&mut p, "main", FrameKind::User),
            f(&mut p, "lock_row", FrameKind::User),
            f(&mut p, "futex_wait", FrameKind::Kernel),
            f(&mut p, "[sleeping]", FrameKind::Pseudo),
        ];
        if wakers.is_empty() {
            p.push(Stack { thread: Some(t), frames: blocked.clone().into(), weight: 4_000_000, ..Default::default() });
        }
        for (names, weight) in wakers {
            let mut frames = blocked.clone();
            frames.push(f(&mut p, WAKER_SEPARATOR, FrameKind::Pseudo));
            frames.extend(names.iter().map(|n| f(&mut p, n, FrameKind::Waker)));
            p.push(Stack { thread: Some(t), frames: frames.into(), weight: *weight, ..Default::default() });
        }
        p
    }

    #[test]
    fn a_finding_says_who_released_most_of_its_waits() {
        let main = waits(&[]);
        let wake = waits(&[
            (&["try_to_wake_up", "futex_wake", "do_syscall_64", "pthread_mutex_unlock", "unlock_row", "vacuum_step", "vacuum"], 3_000_000),
            (&["try_to_wake_up", "futex_wake", "do_syscall_64", "pthread_mutex_unlock", "unlock_row", "commit", "client"], 1_000_000),
        ]);
        let sites = Sites::learn(&main, Default::default());
        let mut found = findings(&main, &sites, &Idle::default(), 3);
        assert_eq!(found.len(), 1);
        name_wakers(&mut found, &wake, &sites);
        let f = &found[0];
        assert_eq!(f.woken.as_ref().map(|w| (w.by.as_str(), w.share)), Some(("vacuum in vacuum_step → unlock_row → pthread_mutex_unlock", 75.0)));
        assert!(f.text.ends_with("; 75% of it woken by vacuum in vacuum_step → unlock_row → pthread_mutex_unlock"), "{}", f.text);
    }

    #[test]
    fn waits_of_another_site_are_not_counted() {
        let main = waits(&[]);
        let mut wake = waits(&[]);
        // The same thread woken at another wait only.
        let t = wake.stacks()[0].thread;
        let f = |p: &mut Profile, n: &str, k| p.intern_frame(Frame::new(n, k));
        let frames = vec![
            f(&mut wake, "main", FrameKind::User),
            f(&mut wake, "read_socket", FrameKind::User),
            f(&mut wake, "[sleeping]", FrameKind::Pseudo),
            f(&mut wake, WAKER_SEPARATOR, FrameKind::Pseudo),
            f(&mut wake, "client", FrameKind::Waker),
        ];
        wake.push(Stack { thread: t, frames: frames.into(), weight: 1, ..Default::default() });
        let sites = Sites::learn(&main, Default::default());
        let mut found = findings(&main, &sites, &Idle::default(), 3);
        name_wakers(&mut found, &wake, &sites);
        assert_eq!(found[0].woken, None, "{}", found[0].text);
    }
}
