//! What a stack was doing, said the way a person says it: for a wait, the
//! kernel's reason (a lock, a pipe or socket read, a sleep, disk I/O), the
//! user-space function that blocked and the user's function above it; for
//! running code, the function and, when that is a library's, the user's
//! function that called it. The per-thread table and the findings of the
//! reports are written from these sites. A wait that passes through a
//! frame many different waits pass through (an event loop's wait, a latch,
//! a condition-variable helper: learnt from the profile, [`Sites::learn`])
//! is named by the path that tells it apart: `under WaitEventSetWait ←
//! WaitLatch ← ProcSleep`.

use std::fmt;

use rustc_hash::{FxHashMap, FxHashSet};

use super::functions::{is_library, plain_name, Lens};
use super::state_of;
use crate::profile::{FrameId, FrameKind, Profile, Stack, State};

/// Callers climbed above a wait's own function, at most.
const CLIMB: usize = 8;

/// A frame is a hub when no one of its callers holds this share of the
/// waits that pass through it.
const ONE_CALLER: f64 = 0.9;

/// ... or when this many different callers reach it, whatever their
/// shares: a helper many places call (PostgreSQL's PGSemaphoreLock, 99.4%
/// under LWLockAcquireOrWait in a capture of commits, is every LWLock's
/// wait). Two are not enough: a walk that missed a frame (by frame
/// pointers, before a process's tables were placed) gives a wait a
/// second caller.
const MANY_CALLERS: usize = 3;

/// Kernel functions that say why a thread waited, by name prefix; the
/// frame nearest the leaf that matches decides.
const REASONS: &[(&[&str], &str)] = &[
    (&["futex_", "__x64_sys_futex"], "lock, condition variable or join (futex)"),
    (&["hrtimer_nanosleep", "do_nanosleep", "common_nsleep", "__x64_sys_nanosleep", "__x64_sys_clock_nanosleep"], "sleep"),
    (&["pipe_read", "anon_pipe_read"], "pipe read"),
    (&["pipe_write", "anon_pipe_write"], "pipe write"),
    (&["inet_csk_accept", "do_accept", "__sys_accept"], "accepting a connection"),
    (&["inet_wait_for_connect", "__sys_connect"], "connecting"),
    (&["sk_wait_data", "__skb_wait_for_more_packets", "unix_stream_read", "unix_stream_recvmsg", "unix_dgram_recvmsg", "tcp_recvmsg", "udp_recvmsg", "inet_recvmsg", "sock_recvmsg", "__sys_recv"], "socket read"),
    (&["sk_stream_wait_memory", "sock_alloc_send_pskb", "unix_stream_sendmsg", "tcp_sendmsg", "sock_sendmsg", "__sys_send"], "socket write"),
    (&["ep_poll", "do_epoll_wait"], "waiting for events (epoll)"),
    (&["do_sys_poll", "do_select", "core_sys_select"], "waiting for events (poll/select)"),
    (&["io_schedule", "folio_wait_bit", "bit_wait_io", "__folio_lock", "wait_on_page_bit", "blk_mq_get_tag", "jbd2_log_wait_commit", "__wait_on_buffer"], "disk I/O"),
    (&["n_tty_read", "tty_read"], "terminal read"),
    (&["do_wait", "kernel_wait4"], "waiting for a child process"),
    (&["do_sigtimedwait", "sigsuspend", "__x64_sys_pause", "__x64_sys_rt_sigsuspend"], "waiting for a signal"),
    (&["inotify_read"], "inotify read"),
    (&["eventfd_read"], "eventfd read"),
    (&["do_msgrcv"], "message queue read"),
    (&["rwsem_down_", "__mutex_lock", "mutex_lock", "rt_mutex_", "down_read", "down_write"], "kernel lock"),
    (&["exc_page_fault", "do_user_addr_fault", "handle_mm_fault"], "page fault"),
    (&["wait_for_completion"], "waiting for the kernel to complete work"),
    (&["do_exit"], "exiting"),
];

/// The scheduler's own frames: never the reason.
fn is_scheduler(name: &str) -> bool {
    ["finish_task_switch", "__schedule", "schedule", "preempt_schedule", "__cond_resched"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Where one stack's time went.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site {
    /// Why it waited ("sleep", "socket read", ...); `None` while running.
    pub reason: Option<String>,
    /// The user-space function that blocked, or that ran; for a stack with
    /// no user frames, the kernel function.
    pub function: Option<String>,
    /// The user's own function above `function` when that one belongs to a
    /// library.
    pub under: Option<String>,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(r) = &self.reason {
            f.write_str(r)?;
            sep = " in ";
        }
        if let Some(func) = &self.function {
            write!(f, "{sep}{func}")?;
        }
        if let Some(u) = &self.under {
            write!(f, " under {u}")?;
        }
        Ok(())
    }
}

/// The kernel's reason for the wait of an off-CPU `stack` in `state`.
fn reason(profile: &Profile, stack: &Stack, state: State) -> String {
    if state == State::Runqueue {
        return "waiting for a CPU".into();
    }
    // Time after a switch-out the kernel did not report: no stack, and no
    // state anybody recorded (drawn as sleeping).
    if stack.frames.iter().any(|&f| profile.frame(f).name == crate::profile::START_UNTRACED) {
        return "off-CPU after a switch-out the kernel did not report (no stack)".into();
    }
    let kernel = stack
        .frames
        .iter()
        .rev()
        .map(|&f| profile.frame(f))
        .filter(|f| f.kind == FrameKind::Kernel);
    let mut first_other = None;
    for f in kernel {
        if let Some((_, why)) = REASONS
            .iter()
            .find(|(names, _)| names.iter().any(|n| f.name.starts_with(n)))
        {
            return (*why).into();
        }
        if first_other.is_none() && !is_scheduler(&f.name) {
            first_other = Some(f.name.as_str());
        }
    }
    match first_other {
        Some(k) => format!("kernel {k}"),
        None => state.name().into(),
    }
}

/// The site of `stack` with no hubs learnt: its state's reason when it
/// ends in one (`None` for on-CPU stacks), the function where it ran or
/// blocked, and the user's function above a library one.
pub fn site(profile: &Profile, stack: &Stack, lens: Lens) -> Site {
    Sites::plain(lens).site(profile, stack)
}

/// How one profile's stacks are named as sites: the lens, and the frames
/// its waits fan out from ([`Sites::learn`]).
#[derive(Clone, Debug, Default)]
pub struct Sites {
    pub lens: Lens,
    /// Frames (by plain name) whose waits come from several callers, none
    /// of which holds [`ONE_CALLER`] of them.
    hubs: FxHashSet<String>,
    /// By the function a wait blocked in and the frame that tells it
    /// apart, the path shown: the one most of its waits were walked
    /// through (a walk by frame pointers, before a process's tables were
    /// placed, can miss a frame between: the same wait, one name).
    paths: FxHashMap<(String, String), String>,
}

impl Sites {
    /// Sites named by their nearest caller only.
    pub fn plain(lens: Lens) -> Sites {
        Sites { lens, ..Sites::default() }
    }

    /// Learns from `profile`'s waits which frames many different waits
    /// pass through: for each frame a wait is named by and each caller
    /// above it (up to [`CLIMB`]), the weight of the waits from each of its
    /// callers and of its callers' callers. A frame with several callers,
    /// or callers' callers, none holding [`ONE_CALLER`] of its waits, or
    /// with [`MANY_CALLERS`] of them, is a hub: a wait under it is named by
    /// the callers up to the first that is not.
    pub fn learn(profile: &Profile, lens: Lens) -> Sites {
        // Each wait climbed once: its chain counts its callers, then, with
        // the hubs known, gives its path.
        let mut waits: Vec<(FrameId, Vec<&str>, u64)> = Vec::new();
        let mut callers: FxHashMap<&str, FxHashMap<&str, u64>> = FxHashMap::default();
        let mut grand: FxHashMap<&str, FxHashMap<&str, u64>> = FxHashMap::default();
        for s in profile.stacks() {
            if state_of(profile, s).is_none() {
                continue;
            }
            let Some(anchor) = anchor(profile, s, lens) else { continue };
            let chain = climb(profile, s, anchor.at);
            for pair in chain.windows(2) {
                *callers.entry(pair[0]).or_default().entry(pair[1]).or_default() += s.weight;
            }
            for three in chain.windows(3) {
                *grand.entry(three[0]).or_default().entry(three[2]).or_default() += s.weight;
            }
            let function = s.frames[anchor.function];
            waits.push((function, chain, s.weight));
        }
        // Told apart within two callers: PostgreSQL's WaitEventSetWait is
        // 90.7% under WaitLatch in one capture, but WaitLatch's callers
        // (lock, background and sleep waits) are its callers' callers.
        let fans_out = |by: &FxHashMap<&str, u64>| {
            let all: u64 = by.values().sum();
            let top = by.values().copied().max().unwrap_or(0);
            by.len() >= MANY_CALLERS || (by.len() >= 2 && (top as f64) < ONE_CALLER * all as f64)
        };
        let hubs: FxHashSet<String> = callers
            .iter()
            .filter(|(name, by)| fans_out(by) || grand.get(*name).is_some_and(|g| fans_out(g)))
            .map(|(name, _)| name.to_string())
            .collect();
        let mut sites = Sites { lens, hubs, paths: FxHashMap::default() };
        let mut seen: FxHashMap<(String, String), FxHashMap<String, u64>> = FxHashMap::default();
        for (function, chain, weight) in &waits {
            if let Some((key, path)) = sites.path_of(profile, *function, chain) {
                *seen.entry(key).or_default().entry(path).or_default() += weight;
            }
        }
        sites.paths = seen
            .into_iter()
            .filter_map(|(key, by)| {
                let best = by.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))?;
                Some((key, best.0))
            })
            .collect();
        sites
    }

    /// For a wait under a hub: the key of its path (the function it
    /// blocked in, the frame that tells it apart) and the path as this
    /// stack was walked (`A ← B ← C`, or `A ← … ← D` past three).
    fn path(&self, profile: &Profile, stack: &Stack, a: &Anchor) -> Option<((String, String), String)> {
        self.path_of(profile, stack.frames[a.function], &climb(profile, stack, a.at))
    }

    /// [`Self::path`] of a wait already climbed: `function` is the frame id
    /// it blocked in, `chain` its callers from where it was anchored.
    fn path_of(&self, profile: &Profile, function: FrameId, chain: &[&str]) -> Option<((String, String), String)> {
        let last = chain.iter().position(|n| !self.hubs.contains(*n)).unwrap_or(chain.len() - 1);
        if last == 0 {
            return None;
        }
        let path = match last {
            1 | 2 => chain[..=last].join(" ← "),
            _ => format!("{} ← … ← {}", chain[0], chain[last]),
        };
        let function = plain_name(&profile.frame(function).name).to_string();
        Some(((function, chain[last].to_string()), path))
    }

    /// The site of `stack`: its state's reason when it ends in one
    /// (`None` for on-CPU stacks), the function where it ran or blocked,
    /// and the user's function above a library one; for a wait under a
    /// hub, the callers that tell it apart (`A ← B ← C`).
    pub fn site(&self, profile: &Profile, stack: &Stack) -> Site {
        let lens = self.lens;
        let state = state_of(profile, stack);
        let anchor = anchor(profile, stack, lens);
        // A wait with no user frames is named by its reason alone; kernel
        // code that ran, by its function.
        let mut function = match (&anchor, state) {
            (Some(a), _) => Some(plain_name(&profile.frame(stack.frames[a.function]).name).to_string()),
            (None, None) => lens
                .leaf(profile, stack)
                .or(stack.frames.last().copied())
                .map(|f| profile.frame(f).name.clone()),
            (None, Some(_)) => None,
        };
        let mut under = anchor
            .as_ref()
            .filter(|a| a.at != a.function)
            .map(|a| plain_name(&profile.frame(stack.frames[a.at]).name).to_string());
        if let Some(a) = anchor.filter(|_| state.is_some() && !self.hubs.is_empty()) {
            if let Some((key, walked)) = self.path(profile, stack, &a) {
                let path = self.paths.get(&key).cloned().unwrap_or(walked);
                match a.at == a.function {
                    true => function = Some(path),
                    false => under = Some(path),
                }
            }
        }
        Site {
            reason: state.map(|s| reason(profile, stack, s)),
            function,
            under,
        }
    }
}

/// Where a stack's site is read from: `function`, the deepest user
/// function (for a wait, the libc wrapper that blocked), and `at`, the
/// frame its time is named by: the user's function above `function` when
/// that one is a library's, else `function` itself.
struct Anchor {
    function: usize,
    at: usize,
}

fn anchor(profile: &Profile, stack: &Stack, lens: Lens) -> Option<Anchor> {
    let function = lens
        .positions(profile, stack)
        .rev()
        .find(|&i| profile.frame(stack.frames[i]).kind.is_user_space())?;
    if !is_library(&profile.frame(stack.frames[function]).name) {
        return Some(Anchor { function, at: function });
    }
    // In a Python or Ruby thread the native code between the wait and the
    // nearest Python function or Ruby method is the interpreter's (or a
    // module's): that function is the user's, a Ruby C method (`sleep [c
    // function]`) is not.
    let callers = || (0..function).rev();
    let at = callers()
        .find(|&j| is_evaluated(profile, stack, j))
        .or_else(|| callers().find(|&j| is_own(profile, stack, j)));
    Some(Anchor { function, at: at.unwrap_or(function) })
}

fn is_evaluated(profile: &Profile, stack: &Stack, j: usize) -> bool {
    let f = profile.frame(stack.frames[j]);
    f.kind == FrameKind::Evaluated && !f.name.ends_with(" [c function]")
}

fn is_own(profile: &Profile, stack: &Stack, j: usize) -> bool {
    let f = profile.frame(stack.frames[j]);
    f.kind.is_user_space() && !is_library(&f.name)
}

/// The plain names of the frame at `from` and of its callers of the same
/// sort (interpreted functions above an interpreted one, the program's own
/// functions above the program's), nearest first, at most [`CLIMB`] above
/// it; a name repeated by recursion or inlining is one.
fn climb<'a>(profile: &'a Profile, stack: &Stack, from: usize) -> Vec<&'a str> {
    let evaluated = is_evaluated(profile, stack, from);
    let mut names = vec![plain_name(&profile.frame(stack.frames[from]).name)];
    for j in (0..from).rev() {
        let same = if evaluated { is_evaluated(profile, stack, j) } else { is_own(profile, stack, j) };
        if !same {
            continue;
        }
        let name = plain_name(&profile.frame(stack.frames[j]).name);
        if names.last() != Some(&name) {
            names.push(name);
        }
        if names.len() > CLIMB {
            break;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, Unit};

    /// Waits pushed into `p`, one per (callers below `main`, weight), each
    /// `main`, its callers, then `leaf` (the wait's own frames); returned
    /// in that order.
    fn waits_under(p: &mut Profile, callers: &[(&[&str], u64)], leaf: &[(&str, FrameKind)]) -> Vec<Stack> {
        callers
            .iter()
            .map(|(tail, weight)| {
                let mut v: Vec<(&str, FrameKind)> = vec![("main", FrameKind::User)];
                v.extend(tail.iter().map(|n| (*n, FrameKind::User)));
                v.extend_from_slice(leaf);
                let mut s = stack(p, &v);
                s.weight = *weight;
                p.push(s.clone());
                s
            })
            .collect()
    }

    fn stack(p: &mut Profile, frames: &[(&str, FrameKind)]) -> Stack {
        let frames = frames
            .iter()
            .map(|(n, k)| p.intern_frame(Frame::new(*n, *k)))
            .collect();
        Stack {
            thread: None,
            frames,
            weight: 1,
            ..Default::default()
        }
    }

    #[test]
    fn a_sleep_is_named_by_reason_wrapper_and_caller() {
        use FrameKind::*;
        let mut p = Profile::new(Unit::Microseconds);
        let s = stack(
            &mut p,
            &[
                ("start_thread", User),
                ("fgbpf::demo::run::{{closure}}", Inlined),
                ("std::thread::functions::sleep", User),
                ("__GI___clock_nanosleep", User),
                ("do_syscall_64", Kernel),
                ("hrtimer_nanosleep", Kernel),
                ("schedule", Kernel),
                ("[sleeping]", Pseudo),
            ],
        );
        let site = site(&p, &s, Lens::default());
        assert_eq!(
            site.to_string(),
            "sleep in clock_nanosleep under fgbpf::demo::run"
        );
    }

    #[test]
    fn a_python_sleep_is_under_the_python_function_not_the_interpreters() {
        use FrameKind::*;
        let mut p = Profile::new(Unit::Microseconds);
        let s = stack(
            &mut p,
            &[
                ("Py_BytesMain", User),
                ("<module> (nap.py:17)", Evaluated),
                ("nap (nap.py:11)", Evaluated),
                ("time_sleep", User),
                ("pysleep", Inlined),
                ("__GI___clock_nanosleep", User),
                ("hrtimer_nanosleep", Kernel),
                ("[sleeping]", Pseudo),
            ],
        );
        let site = site(&p, &s, Lens::default());
        assert_eq!(site.to_string(), "sleep in clock_nanosleep under nap (nap.py:11)");
    }

    #[test]
    fn unknown_kernel_waits_name_the_kernel_function_and_running_code_its_function() {
        use FrameKind::*;
        let mut p = Profile::new(Unit::Microseconds);
        let s = stack(
            &mut p,
            &[
                ("main", User),
                ("do_thing", User),
                ("ioctl", User),
                ("my_driver_wait", Kernel),
                ("schedule", Kernel),
                ("[uninterruptible]", Pseudo),
            ],
        );
        assert_eq!(
            site(&p, &s, Lens::default()).to_string(),
            "kernel my_driver_wait in ioctl under do_thing"
        );
        let s = stack(
            &mut p,
            &[("main", User), ("parse", User), ("core::hint::black_box", Inlined)],
        );
        assert_eq!(site(&p, &s, Lens::default()).to_string(), "parse");
        assert_eq!(
            site(&p, &s, Lens { inlines: true }).to_string(),
            "core::hint::black_box under parse"
        );
        let s = stack(&mut p, &[("worker_thread", Kernel), ("schedule", Kernel), ("[sleeping]", Pseudo)]);
        assert_eq!(site(&p, &s, Lens::default()).to_string(), "kernel worker_thread");
    }

    #[test]
    fn a_wait_under_a_frame_many_waits_pass_through_is_named_by_the_callers_that_tell_it_apart() {
        use FrameKind::*;
        let mut p = Profile::new(Unit::Microseconds);
        let epoll = [("epoll_wait", User), ("do_epoll_wait", Kernel), ("schedule", Kernel), ("[sleeping]", Pseudo)];
        let lock: &[&str] = &["PostgresMain", "LockAcquire", "WaitOnLock", "ProcSleep", "WaitLatch", "WaitEventSetWait"];
        let client: &[&str] = &["PostgresMain", "pq_getbyte", "secure_read", "WaitEventSetWait"];
        let idle: &[&str] = &["BackgroundWriterMain", "WaitLatch", "WaitEventSetWait"];
        let stacks = waits_under(&mut p, &[(lock, 50), (client, 40), (idle, 100)], &epoll);
        let plain = Sites::plain(Lens::default());
        assert_eq!(plain.site(&p, &stacks[0]).to_string(), "waiting for events (epoll) in epoll_wait under WaitEventSetWait");
        let sites = Sites::learn(&p, Lens::default());
        let named: Vec<String> = stacks.iter().map(|s| sites.site(&p, s).to_string()).collect();
        assert_eq!(
            named,
            [
                "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← WaitLatch ← ProcSleep",
                "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← secure_read",
                "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← WaitLatch ← BackgroundWriterMain",
            ]
        );
        // ProcSleep reached from a second caller too: a path of four,
        // shown by its ends.
        waits_under(&mut p, &[(&["Vacuum", "ProcSleep", "WaitLatch", "WaitEventSetWait"], 50)], &epoll);
        let sites = Sites::learn(&p, Lens::default());
        assert_eq!(
            sites.site(&p, &stacks[0]).to_string(),
            "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← … ← WaitOnLock"
        );
        // A walk that missed a frame between (by frame pointers, before
        // the process's tables were placed): the same wait, one name.
        let short = waits_under(&mut p, &[(&["PostgresMain", "LockAcquire", "WaitOnLock", "ProcSleep", "WaitLatch"], 10)], &epoll).remove(0);
        let sites = Sites::learn(&p, Lens::default());
        assert_eq!(sites.site(&p, &short), sites.site(&p, &stacks[0]));
        // Running code keeps its plain site.
        let run = stack(&mut p, &[("main", User), ("WaitLatch", User), ("spin", User)]);
        assert_eq!(sites.site(&p, &run).to_string(), "spin");
    }

    #[test]
    fn a_frame_one_caller_holds_nearly_all_waits_of_is_no_hub() {
        use FrameKind::*;
        let mut p = Profile::new(Unit::Microseconds);
        let mut stacks = Vec::new();
        for (caller, weight) in [("serve", 95), ("admin", 5)] {
            let mut s = stack(&mut p, &[("main", User), (caller, User), ("wait_event", User), ("read", User), ("pipe_read", Kernel), ("[sleeping]", Pseudo)]);
            s.weight = weight;
            p.push(s.clone());
            stacks.push(s);
        }
        let sites = Sites::learn(&p, Lens::default());
        assert_eq!(sites.site(&p, &stacks[0]).to_string(), "pipe read in read under wait_event");
    }

    #[test]
    fn a_frame_whose_waits_fan_out_at_its_callers_callers_is_a_hub() {
        use FrameKind::*;
        // As one capture of PostgreSQL under lock contention measured it:
        // WaitEventSetWait 90.7% under WaitLatch, which lock, background
        // and sleep waits share.
        let mut p = Profile::new(Unit::Microseconds);
        let stacks = waits_under(
            &mut p,
            &[
                (&["PostgresMain", "WaitOnLock", "ProcSleep", "WaitLatch"], 443),
                (&["BackgroundWriterMain", "WaitLatch"], 120),
                (&["pg_sleep", "WaitLatch"], 33),
                (&["PostgresMain", "secure_read"], 64),
            ],
            &[("WaitEventSetWait", User), ("epoll_wait", User), ("do_epoll_wait", Kernel), ("[sleeping]", Pseudo)],
        );
        let sites = Sites::learn(&p, Lens::default());
        let named: Vec<String> = stacks.iter().map(|s| sites.site(&p, s).to_string()).collect();
        assert_eq!(
            named,
            [
                "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← WaitLatch ← ProcSleep",
                "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← WaitLatch ← BackgroundWriterMain",
                "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← WaitLatch ← pg_sleep",
                "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← secure_read",
            ]
        );
    }

    #[test]
    fn a_helper_many_callers_reach_is_a_hub_whatever_their_shares() {
        use FrameKind::*;
        // As a capture of PostgreSQL's commits measured it: 99.4% of the
        // semaphore waits under LWLockAcquireOrWait, the rest from three
        // other callers.
        let mut p = Profile::new(Unit::Microseconds);
        let stacks = waits_under(
            &mut p,
            &[
                (&["CommitTransaction", "XLogFlush", "LWLockAcquireOrWait"], 9940),
                (&["_bt_relandgetbuf", "LWLockAcquire"], 40),
                (&["XLogFlush", "LWLockWaitForVar"], 10),
                (&["CommitTransaction", "ProcArrayEndTransaction"], 10),
            ],
            &[("PGSemaphoreLock", User), ("sem_wait", User), ("futex_wait", Kernel), ("[sleeping]", Pseudo)],
        );
        let sites = Sites::learn(&p, Lens::default());
        assert_eq!(
            sites.site(&p, &stacks[0]).to_string(),
            "lock, condition variable or join (futex) in sem_wait under PGSemaphoreLock ← LWLockAcquireOrWait"
        );
    }
}
