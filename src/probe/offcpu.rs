//! What the off-CPU tracer needs from user space: clocks for threads that
//! were already blocked when it started (seeded from /proc), and the
//! blocks still open when it stops, counted up to the end.

use std::fs;

use libbpf_rs::{MapCore, MapFlags};

use super::drain::{entries, StackReader};
use super::words::{interp_walk_of, raw_state, state_of_raw, walk_of};
use crate::bpf::types;
use super::Targets;
use crate::procs::groups::Groups;
use crate::profile::merge::Ran;
use crate::profile::{More, RawStack, State, BEFORE_CAPTURE, LOST_STACK, START_UNTRACED};

/// `task_struct.flags` bit of kernel threads (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// Gives the targets' threads their entries as they are now, from /proc:
/// blocked ones a wait begun before the capture (counted from `origin`,
/// the capture's time 0); running ones a run since `origin`, with the
/// scheduler's counts of them (/proc/TID/schedstat), so that a switch-out
/// of that run which sched_switch does not report is measured as the
/// tracer measures those of runs it saw begin (src/bpf/offcpu.bpf.h:
/// hidden_switches), and in wall-clock captures (`runs`) their time adds
/// up from the start. With
/// `skip_kthreads`, kernel threads are left out, as the tracer does.
/// Returns the threads given a wait (their stacks: seeds.rs).
pub(super) fn seed_threads<M: MapCore>(
    starts: &M,
    targets: &Targets,
    (states, skip_kthreads, runs): (&[State], bool, bool),
    origin: u64,
) -> Vec<u32> {
    let mut waiting = Vec::new();
    for (pid, tid, state) in thread_states(targets, skip_kthreads) {
        if pid == std::process::id() {
            continue;
        }
        let (phase, state) = match state {
            Some(s) if states.contains(&s) => (FG_WAITING, raw_state(s)),
            Some(_) if runs => (FG_SKIPPED, 0),
            None => (FG_RUNNING, 0),
            _ => continue,
        };
        // Zeros without schedstats: the tracer then goes by the switches
        // it sees alone.
        let (sum_exec, run_delay, pcount) =
            if phase == FG_RUNNING { schedstat(pid, tid).unwrap_or_default() } else { (0, 0, 0) };
        let start = types::fg_start {
            ts: origin,
            user_stack: 0,
            pid,
            state,
            flags: 1, // FG_PRE_EXISTING
            phase,
            waker: 0,
            kern_stack: 0,
            sum_exec,
            run_delay,
            pcount,
        };
        // SAFETY: fg_start is a padding-free struct of integers.
        let bytes = unsafe { plain::as_bytes(&start) };
        // NOEXIST: a switch seen since attaching is more precise.
        if starts.update(&tid.to_ne_bytes(), bytes, MapFlags::NO_EXIST).is_ok() && phase == FG_WAITING {
            waiting.push(tid);
        }
    }
    waiting
}

/// `enum fg_phase` of src/bpf/fgbpf.h.
const FG_WAITING: u32 = 0;
const FG_RUNNING: u32 = 1;
const FG_SKIPPED: u32 = 2;

/// What [`open_blocks`] found.
#[derive(Clone, Debug, Default)]
pub(super) struct OpenBlocks {
    /// Blocks drawn, counted up to the end.
    pub drawn: u64,
    /// System-wide without `--idle-threads`: threads blocked from before
    /// the capture to its end, left out, and their microseconds.
    pub idle_threads: u64,
    pub idle_us: u64,
    /// Wall-clock captures: threads running at the end, with their run
    /// since their last switch-in (from `(pid, tid, comm)`), in
    /// microseconds with its span.
    pub running: Vec<Ran>,
}

/// Blocks still open at `now` count up to it. Their kernel stacks were
/// never read at a switch-in, so they come from /proc/TID/stack.
///
/// System-wide, most of a host's threads sleep through any capture (idle
/// daemons, pools, agetty): drawn, each would add the whole capture's
/// length and bury the waits that happened. Unless `opts.idle_threads`,
/// those blocked from before the start to the end are counted, not drawn.
pub(super) fn open_blocks<M: MapCore, S: MapCore>(
    starts: &M,
    probe: &super::Options,
    (now, slicing, groups): (u64, super::counts::Slicing, Option<&Groups>),
    reader: &mut StackReader<'_, S>,
    out: &mut Vec<RawStack>,
) -> OpenBlocks {
    let Some(opts) = probe.offcpu.as_ref() else { return OpenBlocks::default() };
    let (kernel_stacks, whole_system) = (probe.kernel_stacks, probe.targets.whole_system());
    let mut found = OpenBlocks::default();
    let sample_every = opts.sample_every.max(1) as u64;
    for (k, v) in entries(starts) {
        let mut start = types::fg_start::default();
        if k.len() < 4 || plain::copy_from_bytes(&mut start, &v).is_err() {
            continue;
        }
        let tid = u32::from_ne_bytes(k[..4].try_into().expect("4 bytes"));
        let ns = now.saturating_sub(start.ts);
        let pre = start.flags & 1 != 0;
        if start.phase == FG_RUNNING {
            // Held running, but the scheduler may have taken it off the
            // CPU in a switch-out sched_switch did not report: what it
            // says the thread did since is split as the BPF side splits
            // such a span (src/bpf/offcpu.bpf.h: untraced_switch_out).
            let tail = untraced_tail(&start, tid, ns).unwrap_or_default();
            let group = || groups.map(|g| g.label_of_pid(start.pid));
            // Read once, for the run and the tail's stacks alike.
            let name = std::cell::OnceCell::new();
            let comm = || {
                name.get_or_init(|| {
                    let text = task_file(start.pid, tid, "comm", 64).unwrap_or_default();
                    std::sync::Arc::<str>::from(text.trim_end_matches('\n'))
                })
                .clone()
            };
            let ran = ns - tail.off - tail.queued;
            if probe.oncpu.is_some() {
                let weight = (ran + 500) / 1000;
                found.running.push(Ran {
                    pid: start.pid,
                    tid,
                    comm: comm(),
                    us: weight,
                    spans: smallvec::smallvec![slicing.span(start.ts, start.ts + ran, weight)],
                });
            }
            let mut at = start.ts + ran;
            for (state, span) in [(State::Sleeping, tail.off), (State::Runqueue, tail.queued)] {
                let weight = (span + 500) / 1000;
                if weight > 0 && opts.states.contains(&state) {
                    found.drawn += 1;
                    out.push(RawStack {
                        pid: start.pid,
                        // The process under the PID now: the thread runs.
                        start: 0,
                        tid,
                        comm: comm(),
                        root_note: Some(START_UNTRACED),
                        user: Default::default(),
                        kernel: Default::default(),
                        kernel_note: None,
                        spans: smallvec::smallvec![slicing.span(at, at + span, weight)],
                        weight,
                        state: Some(state),
                        walk: Default::default(),
                        interp_walk: Default::default(),
                        waker: None,
                        more: RawStack::more_of(More {
                            group: group(),
                            kernel_names: Vec::new(),
                            ..Default::default()
                        }),
                    });
                }
                at += span;
            }
            continue;
        }
        if start.phase != FG_WAITING {
            continue;
        }
        if !pre
            && (ns < opts.min_block.as_nanos() as u64
                || opts.max_block.is_some_and(|m| ns > m.as_nanos() as u64))
        {
            continue;
        }
        // A thread that has exited leaves its last start behind.
        let Ok(comm) = fs::read_to_string(format!("/proc/{}/task/{tid}/comm", start.pid)) else {
            continue;
        };
        if pre && whole_system && !opts.idle_threads {
            found.idle_threads += 1;
            found.idle_us += ns / 1000;
            continue;
        }
        let user = reader.get(start.user_stack);
        found.drawn += 1;
        // A seeded block was not sampled: it is this thread's own wait.
        let weight = (ns * if pre { 1 } else { sample_every } + 500) / 1000;
        out.push(RawStack {
            pid: start.pid,
            // The process under the PID now: the thread lives.
            start: 0,
            tid,
            comm: comm.trim_end_matches('\n').into(),
            root_note: if pre {
                Some(BEFORE_CAPTURE)
            } else {
                user.is_none().then_some(LOST_STACK)
            },
            user: user.unwrap_or_default(),
            kernel: Default::default(),
            kernel_note: None,
            spans: smallvec::smallvec![slicing.span(start.ts, now, weight)],
            weight,
            state: state_of_raw(start.state),
            walk: walk_of(start.flags),
            interp_walk: interp_walk_of(start.flags),
            // Still blocked: nobody has woken it.
            waker: None,
            more: RawStack::more_of(More {
                group: groups.map(|g| g.label_of_pid(start.pid)),
                kernel_names: match kernel_stacks {
                    true => proc_kernel_stack(start.pid, tid),
                    false => Vec::new(),
                },
                ..Default::default()
            }),
        });
    }
    found
}

/// What the scheduler says a thread held running for `ns` did off-CPU
/// (nanoseconds): `off` not runnable, `queued` waiting for a CPU.
#[derive(Clone, Copy, Debug, Default)]
struct Tail {
    off: u64,
    queued: u64,
}

/// The part of a run begun at `start` (its switch-in or its seeding, `ns`
/// ago) that the thread spent off-CPU, by /proc/TID/schedstat (run time,
/// run-queue delay): `None` without the counts the entry noted, or when
/// the thread is gone. The file is read after the stop, so the run it
/// counts is if anything longer.
fn untraced_tail(start: &types::fg_start, tid: u32, ns: u64) -> Option<Tail> {
    if start.pcount == 0 {
        return None;
    }
    tail_of(start, schedstat(start.pid, tid)?, off_cpu_now(start.pid, tid), ns)
}

/// [`untraced_tail`] from the thread's schedstat (run ns, run-queue ns,
/// runs) and whether it is off the CPU now. A thread on a CPU (or queued
/// for one) in the run the entry began has no tail; one the kernel has
/// begun runs for since, unreported, has one (measured on this VM with
/// bpftrace: the threads of one daemon had every switch-out unreported;
/// a capture ending while one is on a CPU again would count all the time
/// since its last reported switch-in as running). A running thread's run time lags by what it ran since the
/// scheduler last updated it (up to a tick), which is then counted
/// off-CPU; a queued one's run-queue delay leaves out the queueing still
/// open, counted as not runnable.
fn tail_of(start: &types::fg_start, (run, delay, runs): (u64, u64, u64), off_now: bool, ns: u64) -> Option<Tail> {
    if start.pcount == 0 || runs + 1 < start.pcount {
        return None; // no counts, or not the thread the entry began with
    }
    if !off_now && runs <= start.pcount {
        return None;
    }
    let ran = run.saturating_sub(start.sum_exec).min(ns);
    let queued = delay.saturating_sub(start.run_delay).min(ns - ran);
    Some(Tail {
        off: ns - ran - queued,
        queued,
    })
}

/// Whether the thread is off the CPU now by its state in /proc (not `R`):
/// a running thread's schedstat lags its run by up to a tick, which would
/// pass for a tail off-CPU.
fn off_cpu_now(pid: u32, tid: u32) -> bool {
    stat_fields(pid, tid).is_some_and(|f| f.first().is_some_and(|s| s != "R"))
}

/// The fields of a thread's /proc stat after its name, which is in
/// parentheses and may hold anything (fields follow the last ')'): the
/// state first, the flags 7th. `None` when the thread is gone.
fn stat_fields(pid: u32, tid: u32) -> Option<Vec<String>> {
    let stat = task_file(pid, tid, "stat", 1024)?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// A thread's /proc schedstat: its time on a CPU and waiting on a
/// run-queue (ns), and its count of runs (sched_info.pcount). `None` when
/// the thread is gone or the kernel keeps no schedstats.
pub(super) fn schedstat(pid: u32, tid: u32) -> Option<(u64, u64, u64)> {
    let text = task_file(pid, tid, "schedstat", 128)?;
    let mut f = text.split_ascii_whitespace().map(|w| w.parse::<u64>().ok());
    Some((f.next()??, f.next()??, f.next()??))
}

/// /proc/PID/task/TID/NAME, its first `limit` bytes, lossily decoded (the
/// name in it is the target's); `None` when the thread is gone.
pub(super) fn task_file(pid: u32, tid: u32, name: &str, limit: u64) -> Option<String> {
    let mut bytes = Vec::new();
    let file = fs::File::open(format!("/proc/{pid}/task/{tid}/{name}")).ok()?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit), &mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The kernel stack of a blocked thread as the kernel names it, leaf first.
/// A module's function keeps its module: `name [module]`, as the kernel
/// writes it.
fn proc_kernel_stack(pid: u32, tid: u32) -> Vec<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stack")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace().skip(1);
            let f = fields.next()?;
            let name = f.split('+').next().unwrap_or(f);
            Some(match fields.next().filter(|m| m.starts_with('[') && m.ends_with(']')) {
                Some(module) => format!("{name} {module}"),
                None => name.to_string(),
            })
        })
        .collect()
}

/// Threads of the targets (every thread when there are none), with their
/// state now: `None` for running (or runnable); kernel threads left out
/// with `skip_kthreads`.
fn thread_states(targets: &Targets, skip_kthreads: bool) -> Vec<(u32, u32, Option<State>)> {
    let mut pids: Vec<u32> = if targets.whole_system() {
        fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect()
    } else {
        targets.pids.clone()
    };
    if let Some(scope) = &targets.scope {
        let inside = scope.pids();
        pids.retain(|p| inside.contains(p));
    }
    let mut out = Vec::new();
    let mut add = |pid: u32, tid: u32| {
        let Some(fields) = stat_fields(pid, tid) else {
            return;
        };
        // Field 9 of stat(5), the 7th after the name, is the flags.
        let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
        if skip_kthreads && flags & PF_KTHREAD != 0 {
            return;
        }
        let state = match fields.first().map(String::as_str) {
            Some("S") | Some("I") => Some(State::Sleeping),
            Some("D") => Some(State::Uninterruptible),
            Some("R") => None,
            _ => return,
        };
        out.push((pid, tid, state));
    };
    for pid in pids {
        for tid in fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        {
            add(pid, tid);
        }
    }
    for &tid in &targets.tids {
        let tgid = fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse().ok())
            });
        if let Some(pid) = tgid {
            add(pid, tid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run begun at a reported switch-in: 1.0 s run so far, 120 ms
    /// queued, the switch-in's arrival counted as run 1029.
    fn begun() -> types::fg_start {
        types::fg_start { sum_exec: 1_000_000_000, run_delay: 120_000_000, pcount: 1029, ..Default::default() }
    }

    #[test]
    fn a_thread_running_in_the_run_its_entry_began_has_no_tail() {
        assert!(tail_of(&begun(), (1_004_000_000, 120_000_000, 1029), false, 900_000_000).is_none());
    }

    #[test]
    fn a_thread_on_a_cpu_again_after_unreported_switches_has_its_tail() {
        // Ran 14 ms more, queued 2 ms more, over two runs the kernel began
        // unreported: 884 ms of the 900 were off the CPU, though it is on
        // one at the end.
        let t = tail_of(&begun(), (1_014_000_000, 122_000_000, 1031), false, 900_000_000).unwrap();
        assert_eq!((t.off, t.queued), (884_000_000, 2_000_000));
    }

    #[test]
    fn a_thread_off_the_cpu_has_its_tail_and_another_thread_has_none() {
        let t = tail_of(&begun(), (1_004_000_000, 120_000_000, 1029), true, 900_000_000).unwrap();
        assert_eq!((t.off, t.queued), (896_000_000, 0));
        // The id's earlier thread: fewer runs than the entry counted.
        assert!(tail_of(&begun(), (4_000_000, 0, 3), true, 900_000_000).is_none());
        // No counts noted.
        let none = types::fg_start::default();
        assert!(tail_of(&none, (1_004_000_000, 120_000_000, 1029), true, 900_000_000).is_none());
    }
}
