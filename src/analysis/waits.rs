//! What a stack was doing, said the way a person says it: for a wait, the
//! kernel's reason (a lock, a pipe or socket read, a sleep, disk I/O), the
//! user-space function that blocked and the user's function above it; for
//! running code, the function and, when that is a library's, the user's
//! function that called it. The per-thread table and the findings of the
//! reports are written from these sites.

use std::fmt;

use super::functions::{is_library, plain_name, Lens};
use super::state_of;
use crate::profile::{FrameKind, Profile, Stack, State};

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

/// The site of `stack`: its state's reason when it ends in one (`None`
/// for on-CPU stacks), the function where it ran or blocked, and the
/// user's function above a library one.
pub fn site(profile: &Profile, stack: &Stack, lens: Lens) -> Site {
    let state = state_of(profile, stack);
    // Where the time went in user space: the deepest user function (for a
    // wait, the libc wrapper that blocked).
    let at = lens
        .positions(profile, stack)
        .rev()
        .find(|&i| profile.frame(stack.frames[i]).kind.is_user_space());
    // A wait with no user frames is named by its reason alone; kernel
    // code that ran, by its function.
    let function = match (at, state) {
        (Some(i), _) => Some(plain_name(&profile.frame(stack.frames[i]).name).to_string()),
        (None, None) => lens
            .leaf(profile, stack)
            .or(stack.frames.last().copied())
            .map(|f| profile.frame(f).name.clone()),
        (None, Some(_)) => None,
    };
    let under = at.and_then(|i| {
        if !is_library(&profile.frame(stack.frames[i]).name) {
            return None;
        }
        let callers = || stack.frames[..i].iter().rev().map(|&f| profile.frame(f));
        // In a Python or Ruby thread the native code between the wait and
        // the nearest Python function or Ruby method is the interpreter's
        // (or a module's): that function is the user's, a Ruby C method
        // (`sleep [c function]`) is not.
        callers()
            .find(|f| f.kind == FrameKind::Evaluated && !f.name.ends_with(" [c function]"))
            .or_else(|| callers().find(|f| f.kind.is_user_space() && !is_library(&f.name)))
            .map(|f| plain_name(&f.name).to_string())
    });
    Site {
        reason: state.map(|s| reason(profile, stack, s)),
        function,
        under,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, Unit};

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
}
