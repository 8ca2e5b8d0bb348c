//! How fgbpf talks to libbpf: its messages kept off stderr unless asked
//! for, the verifier's reason kept from them when it refuses a program,
//! the memory limit older kernels charge BPF maps to, and libbpf's
//! failures explained as what the user can check or do; the storage an
//! opened object lives in and the seed its stack hashing takes.

use std::sync::Mutex;

use super::CaptureError;

/// The last program the verifier refused since it was taken, and the
/// verifier's reason, read from libbpf's warning that carries its log.
static REFUSED: Mutex<Option<(String, String)>> = Mutex::new(None);

/// The program the kernel's verifier refused last, and its reason (the
/// last line of its log that is not a statistic), cleared.
pub(crate) fn take_refusal() -> Option<(String, String)> {
    REFUSED.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// From one libbpf message: a refused program's name and the verifier's
/// reason. libbpf writes the log of a program that failed to load as one
/// warning, `libbpf: prog 'NAME': -- BEGIN PROG LOAD LOG --\nLOG-- END
/// PROG LOAD LOG --`; the reason is the log's last line other than its
/// statistics (the instructions processed, the time, the stack depth).
fn refusal_in(msg: &str) -> Option<(String, String)> {
    let rest = msg.strip_prefix("libbpf: prog '")?;
    let (name, rest) = rest.split_once("': -- BEGIN PROG LOAD LOG --")?;
    let log = rest.split("-- END PROG LOAD LOG --").next()?;
    let statistic = |l: &str| {
        ["processed ", "verification time", "stack depth", "Validating ", "Func#", "mark_precise"]
            .iter()
            .any(|p| l.starts_with(p))
    };
    let reason = log.lines().map(str::trim).filter(|l| !l.is_empty() && !statistic(l)).last()?;
    // The log comes from the kernel: bounded and printable.
    let reason: String = reason.chars().filter(|c| !c.is_control()).take(200).collect();
    Some((name.chars().filter(|c| !c.is_control()).take(64).collect(), reason))
}

fn keep_refusal(msg: &str) {
    if let Some(r) = refusal_in(msg) {
        *REFUSED.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }
}

/// Explains a libbpf failure at `step` in terms of what to check; when
/// the verifier refused a program, names it and says its reason.
pub(crate) fn bpf_error(step: &str, err: libbpf_rs::Error) -> CaptureError {
    if let Some((prog, reason)) = take_refusal() {
        return CaptureError::new(format!(
            "{step}: the kernel's verifier refused the program {prog}: \"{reason}\" ({err}; FGBPF_LIBBPF_LOG=1 prints its whole log; report it with `uname -r`)"
        ));
    }
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
            " (the kernel lacks a needed BPF feature or tracepoint; see docs/kernels.md, 'Supported kernels')"
        }
        _ => "",
    };
    CaptureError::new(format!("{step}: {err}{hint}"))
}

/// libbpf's own messages would interleave with fgbpf's one-line errors;
/// every failure it reports also comes back as an error we explain, with
/// the verifier's reason kept from its warnings. With FGBPF_LIBBPF_LOG=1
/// they go to stderr, verifier logs included, for diagnosing a kernel
/// that refuses the object.
pub(super) fn quiet_libbpf() {
    if std::env::var_os("FGBPF_LIBBPF_LOG").is_some_and(|v| v == "1") {
        let print: libbpf_rs::PrintCallback = |_, msg| {
            keep_refusal(&msg);
            eprint!("{msg}");
        };
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, print)));
    } else {
        let keep: libbpf_rs::PrintCallback = |_, msg| keep_refusal(&msg);
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, keep)));
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

#[cfg(test)]
mod tests {
    use super::refusal_in;

    #[test]
    fn the_verifiers_reason_is_the_last_line_of_its_log_that_is_not_a_statistic() {
        // As Debian 11's 5.10 printed it through libbpf 1.7.
        let msg = "libbpf: prog 'do_sample_compat': -- BEGIN PROG LOAD LOG --\nperf_event programs can only use preallocated hash map\nprocessed 0 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n-- END PROG LOAD LOG --\n";
        let (prog, why) = refusal_in(msg).unwrap();
        assert_eq!(prog, "do_sample_compat");
        assert_eq!(why, "perf_event programs can only use preallocated hash map");
        let long = "libbpf: prog 'walk': -- BEGIN PROG LOAD LOG --\n0: (bf) r6 = r1\n1: (85) call 14\nR1 invalid mem access 'scalar'\nverification time 12 usec\nstack depth 8\nprocessed 2 insns (limit 1000000)\n-- END PROG LOAD LOG --\n";
        assert_eq!(refusal_in(long).unwrap().1, "R1 invalid mem access 'scalar'");
        assert!(refusal_in("libbpf: map 'x': created successfully, fd=3\n").is_none());
    }
}
