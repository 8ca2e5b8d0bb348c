//! Loading and attaching fgbpf's BPF programs, one module per program.
//! Everything here runs before or during the capture window; what the
//! programs aggregated is read out by [`crate::drain`].

pub mod offcpu;
pub mod oncpu;
pub mod perf;
pub mod procs;
pub mod targets;

use std::fmt;
use std::mem::MaybeUninit;

use libbpf_rs::{Link, OpenObject, ProgramMut};

use crate::profile::Losses;

pub use targets::Targets;

/// Storage for an opened BPF object. libbpf-rs skeletons borrow it for
/// their whole life; a capture lives until the process ends, so the few
/// bytes are leaked rather than threaded through every caller's stack frame.
pub(crate) fn object_storage() -> &'static mut MaybeUninit<OpenObject> {
    Box::leak(Box::new(MaybeUninit::uninit()))
}

/// A failure to set up a capture, with what the user can do about it.
#[derive(Debug)]
pub struct CaptureError {
    pub message: String,
}

impl CaptureError {
    pub fn new(message: impl Into<String>) -> Self {
        CaptureError {
            message: message.into(),
        }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CaptureError {}

/// Explains a libbpf failure at `step` in terms of what to check.
pub(crate) fn bpf_error(step: &str, err: libbpf_rs::Error) -> CaptureError {
    let hint = match err.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => {
            " (run as root, or grant CAP_BPF and CAP_PERFMON)"
        }
        libbpf_rs::ErrorKind::NotFound => {
            " (the kernel lacks a needed BPF feature or tracepoint; see README, 'Requirements')"
        }
        _ => "",
    };
    CaptureError::new(format!("{step}: {err}{hint}"))
}

/// libbpf's own messages would interleave with fgbpf's one-line errors;
/// every failure it reports also comes back as an error we explain.
pub(crate) fn quiet_libbpf() {
    libbpf_rs::set_print(None);
}

/// BPF memory is charged to the cgroup on current kernels; older ones need
/// RLIMIT_MEMLOCK raised. Where that is refused, loading may still work.
pub(crate) fn raise_memlock() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid pointer to a stack value.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
}

/// Whether BTF tracepoints (`tp_btf`) can be used: they need kernel BTF.
pub(crate) fn have_btf_tracepoints() -> bool {
    std::path::Path::new("/sys/kernel/btf/vmlinux").exists()
}

/// Applies what every fgbpf program shares (src/bpf/targets.bpf.h and
/// stacks.bpf.h) to an opened skeleton: target filters, map sizes, and the
/// choice between BTF and raw tracepoints. Skeleton types differ per
/// program, their field names do not.
macro_rules! configure_common {
    ($open:expr, $targets:expr, $max_stacks:expr, $max_entries:expr, $btf:expr) => {{
        let ro = $open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("every fgbpf program has read-only config");
        ro.filter_pids = !$targets.pids.is_empty();
        ro.filter_tids = !$targets.tids.is_empty();
        ro.follow_children = $targets.follow_children;
        $open
            .maps
            .stacks
            .set_max_entries($max_stacks)
            .map_err(|e| bpf_error("sizing the stack map", e))?;
        $open
            .maps
            .counts
            .set_max_entries($max_entries)
            .map_err(|e| bpf_error("sizing the counts map", e))?;
        $open.progs.fork_btf.set_autoload($btf);
        $open.progs.exec_btf.set_autoload($btf);
        $open.progs.fork_raw.set_autoload(!$btf);
        $open.progs.exec_raw.set_autoload(!$btf);
    }};
}
pub(crate) use configure_common;

/// Makes a skeleton's generated `fg_proc_event` readable by [`procs`].
macro_rules! impl_proc_event {
    ($ty:ty) => {
        // SAFETY: a plain C struct of integers and a byte array, generated
        // from src/bpf/common.h; every bit pattern is valid.
        unsafe impl plain::Plain for $ty {}
        impl $crate::capture::procs::RawProcEvent for $ty {
            fn decode(&self) -> $crate::capture::procs::ProcEvent {
                $crate::capture::procs::decode(self.pid, self.kind, &self.comm)
            }
        }
    };
}
pub(crate) use impl_proc_event;

/// Losses every program can have: stacks the stack map had no room for
/// (src/bpf/stacks.bpf.h) and process announcements the ring buffer
/// dropped (src/bpf/targets.bpf.h).
pub(crate) fn add_shared_losses(
    losses: &mut Losses,
    user_stacks: u64,
    kernel_stacks: u64,
    announcements: u64,
) {
    losses.add(
        "user stacks (stack map full)",
        user_stacks,
        "raise --max-stacks",
    );
    losses.add(
        "kernel stacks (stack map full)",
        kernel_stacks,
        "raise --max-stacks",
    );
    losses.add(
        "process announcements (their frames may stay unnamed)",
        announcements,
        "profile fewer processes with -p",
    );
}

/// Attaches the fork and exec tracepoints of targets.bpf.h.
pub(crate) fn attach_tracking(
    fork: &ProgramMut,
    exec: &ProgramMut,
) -> Result<Vec<Link>, CaptureError> {
    Ok(vec![
        fork.attach()
            .map_err(|e| bpf_error("attaching to sched_process_fork", e))?,
        exec.attach()
            .map_err(|e| bpf_error("attaching to sched_process_exec", e))?,
    ])
}
