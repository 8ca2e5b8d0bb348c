//! What a capture saw but could not keep in full, by cause, each with what
//! the user can do about it: the probe's counters sorted into the on-CPU
//! view's losses, the off-CPU view's and those both share.

use std::time::Duration;

use super::{Recorded, Stats};

/// The counters the losses are read from.
pub(super) struct Lost {
    pub stats: Stats,
    /// Waits whose waker was recorded but could not be read back.
    pub wakers_missing: u64,
    pub announcements: u64,
    pub follow_lost: u64,
    pub inherit_lost: u64,
    pub merged_spans: u64,
    /// The slices' width after any widening.
    pub slice: Duration,
}

/// Adds every loss of `l` to `rec`.
pub(super) fn count(rec: &mut Recorded, l: &Lost) {
    rec.oncpu_losses.add(
        "samples (counts map full)",
        l.stats.lost_samples,
        "raise --max-entries",
    );
    rec.offcpu_losses.add(
        "off-CPU intervals (counts map full)",
        l.stats.lost_intervals,
        "raise --max-entries",
    );
    rec.offcpu_losses.add(
        "off-CPU intervals (thread map full)",
        l.stats.lost_start_full,
        "profile fewer threads with -p or -t",
    );
    rec.offcpu_losses.add(
        "off-CPU waits whose end sched_switch did not report, with no record of when the thread ran again (their time and the run after them)",
        l.stats.untraced_ins_lost,
        "nothing to do: the kernel did not report those switches",
    );
    rec.shared_losses.add(
        "measured runs of threads (counts map full: their samples weigh 1/F each)",
        l.stats.lost_runs,
        "raise --max-entries",
    );
    rec.offcpu_losses.add(
        "wakers (waker map full: those waits show no waker)",
        l.stats.lost_wakers + l.wakers_missing,
        "raise --max-stacks",
    );
    let shared = &mut rec.shared_losses;
    shared.add(
        &format!(
            "time spans merged into wider slices to bound memory (slices now {} ms; no weight lost)",
            l.slice.as_millis()
        ),
        l.merged_spans,
        "a wider --slice, or a shorter capture",
    );
    shared.add(
        "user stacks (stack map full)",
        l.stats.lost_user_stack,
        "raise --max-stacks",
    );
    shared.add(
        "kernel stacks (stack map full)",
        l.stats.lost_kern_stack,
        "raise --max-stacks",
    );
    shared.add(
        "process announcements (their frames may stay unnamed)",
        l.announcements,
        "profile fewer processes with -p",
    );
    shared.add(
        "forked processes walked by frame pointers until read (unwind map full)",
        l.inherit_lost,
        "profile fewer processes with -p",
    );
    shared.add(
        "child processes of the command not followed (target map full)",
        l.follow_lost,
        "at most 8192 of its processes are followed at once",
    );
}
