//! The report's "Top waits by waker" (`--wakers`): off-CPU time grouped by
//! where a thread blocked and by who woke it, read from the offwake
//! profile's stacks (blocked stack, `--`, waker stack from its leaf up);
//! wakers are named as [`crate::analysis::woken`] names them.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::folded::{leading_frames, sanitize, Leading};
use crate::analysis::pct;
use crate::analysis::woken::{site, split, waker_site};
use crate::profile::{FrameKind, Profile};

/// Rows the section lists.
const TOP: usize = 10;

/// Where the blocked side waited: its deepest user frames, caller first,
/// or its deepest kernel frame when it has none.
fn blocked_site(profile: &Profile, blocked: &[crate::profile::FrameId]) -> String {
    let user = site(
        blocked
            .iter()
            .rev()
            .map(|&f| profile.frame(f))
            .filter(|f| f.kind.is_user_space())
            .map(|f| sanitize(&f.name)),
    );
    if !user.is_empty() {
        return user.join(" → ");
    }
    blocked
        .iter()
        .rev()
        .map(|&f| profile.frame(f))
        .find(|f| f.kind == FrameKind::Kernel)
        .map_or_else(|| "[no stack]".to_string(), |f| sanitize(&f.name))
}

/// Whether `profile` joins waits with their wakers (an offwake view).
pub fn present(profile: &Profile) -> bool {
    profile.stacks().iter().any(|s| split(profile, s).is_some())
}

/// The section, empty for a profile with no waker stacks.
pub fn render(profile: &Profile) -> String {
    let mut rows: HashMap<(String, String, String), u64> = HashMap::new();
    let mut total = 0;
    for s in profile.stacks() {
        total += s.weight;
        let thread = s
            .thread
            .map(|t| leading_frames(profile.thread(t), Leading::ProcessAndThread).join(" / "))
            .unwrap_or_default();
        let (blocked, waker) = match split(profile, s) {
            Some(i) => (&s.frames[..i], &s.frames[i + 1..]),
            None => (&s.frames[..], &[][..]),
        };
        let key = (thread, blocked_site(profile, blocked), waker_site(profile, waker));
        *rows.entry(key).or_default() += s.weight;
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out = String::from(
        "\nTop waits by waker (off-CPU time: thread, where it blocked ← who woke it)\n",
    );
    for ((thread, blocked, waker), w) in rows.iter().take(TOP) {
        let _ = writeln!(
            out,
            "  {:>12}  {:5.1}%  {thread}: {blocked}  ←  {waker}",
            profile.unit.amount(*w),
            pct(*w, total)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::raw::INTERRUPT_WAKER;
    use crate::profile::{Frame, Stack, Thread, Unit};

    #[test]
    fn groups_by_blocked_site_and_waker() {
        let mut p = Profile::new(Unit::Microseconds);
        let t = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 10,
            tid: 11,
            process: "app".into(),
            name: "reader".into(),
        });
        let f = |p: &mut Profile, n: &str, k| p.intern_frame(Frame::new(n, k));
        let (main, wait, read) = (
            f(&mut p, "main", FrameKind::User),
            f(&mut p, "wait_for_byte", FrameKind::User),
            f(&mut p, "read", FrameKind::User),
        );
        let (pipe, sleeping, sep) = (
            f(&mut p, "pipe_read", FrameKind::Kernel),
            f(&mut p, "[sleeping]", FrameKind::Pseudo),
            f(&mut p, "--", FrameKind::Pseudo),
        );
        let waker: Vec<_> = ["try_to_wake_up", "pipe_write", "do_syscall_64", "write", "write", "notify_reader", "main", "writer"]
            .iter()
            .map(|n| f(&mut p, n, FrameKind::Waker))
            .collect();
        let irq: Vec<_> = ["try_to_wake_up", "hrtimer_wakeup", "asm_sysvec_apic_timer_interrupt", INTERRUPT_WAKER]
            .iter()
            .map(|n| f(&mut p, n, FrameKind::Waker))
            .collect();
        let mut frames = vec![main, wait, read, pipe, sleeping, sep];
        frames.extend(&waker);
        p.push(Stack { thread: Some(t), frames: frames.into(), weight: 3_000_000, ..Default::default() });
        let mut frames = vec![main, wait, read, pipe, sleeping, sep];
        frames.extend(&irq);
        p.push(Stack { thread: Some(t), frames: frames.into(), weight: 1_000_000, ..Default::default() });
        let text = render(&p);
        let lines: Vec<&str> = text.trim_start().lines().collect();
        assert!(lines[1].contains("3.00 s") && lines[1].contains("75.0%"), "{text}");
        assert!(lines[1].contains("main → wait_for_byte → read  ←  writer in main → notify_reader → write"), "{text}");
        assert!(lines[2].contains("[interrupt] in hrtimer_wakeup"), "{text}");
    }
}
