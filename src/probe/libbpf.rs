//! How fgbpf talks to libbpf: its messages kept off stderr unless asked
//! for, the memory limit older kernels charge BPF maps to, and libbpf's
//! failures explained as what the user can check or do; the storage an
//! opened object lives in and the seed its stack hashing takes.

use super::CaptureError;

/// Explains a libbpf failure at `step` in terms of what to check.
pub(crate) fn bpf_error(step: &str, err: libbpf_rs::Error) -> CaptureError {
    let hint = match err.kind() {
        // Root is refused too when the verifier rejects a program (EACCES)
        // or the kernel is locked down: asking for root would mislead.
        libbpf_rs::ErrorKind::PermissionDenied if nix::unistd::geteuid().is_root() => {
            " (the kernel refused it although fgbpf runs as root: its verifier rejected a program, or BPF is locked down; rerun with FGBPF_LIBBPF_LOG=1 to see the verifier's log, and report it with `uname -r`)"
        }
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
/// every failure it reports also comes back as an error we explain. With
/// FGBPF_LIBBPF_LOG=1 they go to stderr, verifier logs included, for
/// diagnosing a kernel that refuses the object.
pub(super) fn quiet_libbpf() {
    if std::env::var_os("FGBPF_LIBBPF_LOG").is_some_and(|v| v == "1") {
        let print: libbpf_rs::PrintCallback = |_, msg| eprint!("{msg}");
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, print)));
    } else {
        libbpf_rs::set_print(None);
    }
}

/// BPF memory is charged to the cgroup on current kernels; older ones need
/// RLIMIT_MEMLOCK raised. Where that is refused, loading may still work.
pub(super) fn raise_memlock() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall with a valid pointer to a stack value.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
}

/// A seed no profiled process can predict: the kernel's random bytes.
pub(super) fn random_seed() -> u64 {
    let mut seed = [0u8; 8];
    // SAFETY: getrandom writes at most `seed.len()` bytes into `seed`.
    let n = unsafe { libc::getrandom(seed.as_mut_ptr().cast(), seed.len(), 0) };
    if n != seed.len() as isize {
        // Never expected; still unpredictable enough from outside.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t ^ (std::process::id() as u64).rotate_left(32);
    }
    u64::from_ne_bytes(seed)
}

/// Storage for an opened BPF object. libbpf-rs skeletons borrow it for
/// their whole life; a capture lives until the process ends, so the few
/// bytes are leaked rather than threaded through every caller's stack frame.
pub(super) fn object_storage() -> &'static mut std::mem::MaybeUninit<libbpf_rs::OpenObject> {
    Box::leak(Box::new(std::mem::MaybeUninit::uninit()))
}
