//! `-- COMMAND`: the command is forked first and held before `execve` until
//! the sampler is attached and knows its PID, so it is profiled from its
//! first instruction.

use std::env;
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{self, ForkResult, Pid};

/// Finds `program` the way `execvp` will, so a missing or non-executable
/// command is reported before any capture starts.
pub fn resolve(program: &str) -> Result<PathBuf, String> {
    let executable = |p: &Path| {
        p.is_file()
            && p.metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        if !p.exists() {
            return Err(format!("cannot start {program}: no such file"));
        }
        if !executable(&p) {
            return Err(format!(
                "cannot start {program}: not an executable file (chmod +x?)"
            ));
        }
        return Ok(p);
    }
    let path = env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
        .ok_or_else(|| format!("cannot start {program}: command not found in PATH"))
}

/// A forked child waiting to exec the command.
pub struct HeldCommand {
    pub pid: u32,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
    reaped: Option<i32>,
}

impl HeldCommand {
    pub fn spawn(argv: &[String]) -> Result<Self, String> {
        let program = resolve(&argv[0])?;
        let cargs: Vec<CString> = argv
            .iter()
            .map(|a| {
                CString::new(a.as_bytes())
                    .map_err(|_| format!("argument {a:?} contains a NUL byte"))
            })
            .collect::<Result<_, _>>()?;
        let cprog = CString::new(program.as_os_str().as_bytes())
            .map_err(|_| "command path contains a NUL byte")?;
        let (go_r, go_w) = unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
        let (err_r, err_w) = unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;

        // SAFETY: the child only calls async-signal-safe functions (read,
        // execv, write, _exit) on data prepared before the fork.
        match unsafe { unistd::fork() }
            .map_err(|e| format!("cannot fork to start the command: {e}"))?
        {
            ForkResult::Child => {
                drop(go_w);
                drop(err_r);
                let mut byte = [0u8; 1];
                // EOF without a byte: fgbpf gave up; do not run the command.
                if !matches!(unistd::read(go_r.as_fd(), &mut byte), Ok(1)) {
                    unsafe { libc::_exit(125) };
                }
                let err = unistd::execv(&cprog, &cargs).unwrap_err();
                let _ = unistd::write(&err_w, &(err as i32).to_ne_bytes());
                unsafe { libc::_exit(127) }
            }
            ForkResult::Parent { child } => {
                drop(go_r);
                drop(err_w);
                Ok(HeldCommand {
                    pid: child.as_raw() as u32,
                    go: Some(go_w),
                    exec_error: err_r,
                    reaped: None,
                })
            }
        }
    }

    /// Lets the command exec; fails if the exec did.
    pub fn release(&mut self) -> Result<(), String> {
        let go = self.go.take().expect("released once");
        unistd::write(&go, &[1u8]).map_err(|e| format!("cannot start the command: {e}"))?;
        drop(go);
        let mut buf = [0u8; 4];
        // The pipe closes on a successful exec (O_CLOEXEC) and carries the
        // errno otherwise.
        match unistd::read(self.exec_error.as_fd(), &mut buf) {
            Ok(4) => {
                let _ = waitpid(Pid::from_raw(self.pid as i32), None);
                self.reaped = Some(127);
                Err(format!(
                    "cannot start the command: {}",
                    Errno::from_raw(i32::from_ne_bytes(buf)).desc()
                ))
            }
            _ => Ok(()),
        }
    }

    /// The exit status once the command has ended, without waiting.
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.reaped.is_none() {
            match waitpid(Pid::from_raw(self.pid as i32), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, code)) => self.reaped = Some(code),
                Ok(WaitStatus::Signaled(_, sig, _)) => self.reaped = Some(128 + sig as i32),
                Err(_) => self.reaped = Some(-1),
                _ => {}
            }
        }
        self.reaped
    }
}

impl Drop for HeldCommand {
    fn drop(&mut self) {
        // Never released: closing the pipe makes the child exit unexecuted;
        // reap it so no zombie is left.
        if self.go.take().is_some() {
            let _ = waitpid(Pid::from_raw(self.pid as i32), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_finds_and_refuses() {
        assert!(resolve("sh").is_ok());
        assert!(resolve("no-such-command-fgbpf")
            .unwrap_err()
            .contains("not found"));
        assert!(resolve("/nonexistent/x")
            .unwrap_err()
            .contains("no such file"));
        let plain = std::env::temp_dir().join(format!("fgbpf-plain-{}", std::process::id()));
        std::fs::write(&plain, b"data").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = resolve(plain.to_str().unwrap()).unwrap_err();
        std::fs::remove_file(&plain).unwrap();
        assert!(err.contains("not an executable"), "{err}");
    }

    #[test]
    fn held_command_runs_after_release() {
        let mut cmd = HeldCommand::spawn(&["sh".into(), "-c".into(), "exit 3".into()]).unwrap();
        cmd.release().unwrap();
        let code = loop {
            if let Some(c) = cmd.try_wait() {
                break c;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(code, 3);
    }

    #[test]
    fn unreleased_command_never_runs() {
        let marker = std::env::temp_dir().join(format!("fgbpf-never-{}", std::process::id()));
        let cmd = HeldCommand::spawn(&["touch".into(), marker.display().to_string()]).unwrap();
        drop(cmd);
        assert!(!marker.exists());
    }
}
