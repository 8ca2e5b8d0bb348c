//! Checks that the processes, threads and cgroup named on the command line
//! exist, and tells when they are all gone.

use std::fs;

use crate::cli::CaptureArgs;
use crate::procs::cgroup::{self, Scope};

/// The cgroup `--cgroup`, `--unit` or `--container` limits the capture
/// to, if any; one clear line when it names none.
pub fn scope(args: &CaptureArgs) -> Result<Option<Scope>, String> {
    let found = match (&args.cgroup, &args.unit, &args.container) {
        (Some(path), _, _) => cgroup::resolve(path),
        (_, Some(unit), _) => cgroup::of_unit(unit),
        (_, _, Some(id)) => cgroup::of_container(id),
        _ => return Ok(None),
    };
    found.map(Some)
}

/// Whether `/proc/ID` names a task that is running (not a zombie).
/// Works for thread IDs too: `/proc/TID` resolves though it is not listed.
pub fn task_alive(id: u32) -> bool {
    match fs::read_to_string(format!("/proc/{id}/stat")) {
        // The state follows the parenthesised name, which may contain ") ".
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|s| s != "Z" && s != "X"),
        Err(_) => false,
    }
}

fn is_thread_of_other_process(tid: u32) -> bool {
    fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Tgid:"))
                .map(|l| l[5..].trim().to_string())
        })
        .is_some_and(|tgid| tgid != tid.to_string())
}

/// One clear line for the first PID or TID that cannot be profiled.
pub fn check(pids: &[u32], tids: &[u32]) -> Result<(), String> {
    for &pid in pids {
        if pid == 0 {
            return Err(
                "-p 0 is the idle task, not a process; omit -p to profile the whole system".into(),
            );
        }
        if !task_alive(pid) {
            return Err(format!(
                "no process with PID {pid} (see `ps -e` for running processes)"
            ));
        }
        if is_thread_of_other_process(pid) {
            return Err(format!(
                "{pid} is a thread, not a process: use -t {pid} for one thread"
            ));
        }
    }
    for &tid in tids {
        if tid == 0 {
            return Err("-t 0 is the idle task, not a thread".into());
        }
        if !task_alive(tid) {
            return Err(format!(
                "no thread with TID {tid} (see `ps -eL` for running threads)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_checks_pass() {
        let me = std::process::id();
        assert!(task_alive(me));
        assert!(check(&[me], &[me]).is_ok());
    }

    #[test]
    fn missing_and_idle_targets_are_refused() {
        assert!(check(&[0], &[]).unwrap_err().contains("idle"));
        // PIDs are capped well below u32::MAX by pid_max.
        let err = check(&[u32::MAX - 1], &[]).unwrap_err();
        assert!(err.contains("no process with PID"), "{err}");
        assert!(check(&[], &[u32::MAX - 1])
            .unwrap_err()
            .contains("no thread"));
    }
}
