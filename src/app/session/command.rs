//! `-- COMMAND`: the command is forked first and held before `execve` until
//! the sampler is attached and knows its PID, so it is profiled from its
//! first instruction (and not before: fgbpf's own code in the child, until
//! its `execve`, is not profiled), and stopped at its entry point until the
//! walkers have its image (entry.rs). The child may run as another user
//! (`--user`); after the capture it is waited for, signalled or left
//! running, and its exit status becomes fgbpf's.

use std::env;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{self, ForkResult, Pid, Uid, User};

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

/// Who the command runs as: `--user NAME`, resolved before the fork.
pub struct RunAs {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
    /// HOME, USER and LOGNAME for the command, as `sudo -u` sets them.
    env: [(String, String); 3],
}

impl RunAs {
    /// Looks `name` up (a user name or a numeric UID) and its groups.
    pub fn lookup(name: &str) -> Result<Self, String> {
        let user = match name.parse::<u32>() {
            Ok(uid) => User::from_uid(Uid::from_raw(uid)),
            Err(_) => User::from_name(name),
        }
        .map_err(|e| format!("cannot look up user {name}: {e}"))?
        .ok_or_else(|| format!("--user {name}: no such user"))?;
        let cname = CString::new(user.name.as_bytes()).map_err(|_| "user name contains NUL")?;
        let groups = unistd::getgrouplist(&cname, user.gid)
            .map_err(|e| format!("cannot read the groups of {}: {e}", user.name))?;
        Ok(RunAs {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups: groups.into_iter().map(|g| g.as_raw()).collect(),
            env: [
                ("HOME".into(), user.dir.display().to_string()),
                ("USER".into(), user.name.clone()),
                ("LOGNAME".into(), user.name),
            ],
        })
    }
}

/// What [`HeldCommand::release`] tells its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The command will be stopped at its entry point: recording of it
    /// waits for that.
    Traced(u32),
    /// The command is at its entry point (stopped there, its libraries
    /// mapped), or runs already when the stop failed after its exec.
    Entry(u32),
}

/// A forked child waiting to exec the command.
pub struct HeldCommand {
    pub pid: u32,
    /// The file it will exec, as `execvp` finds it.
    pub program: PathBuf,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
    reaped: Option<i32>,
}

/// NUL-terminated strings and the pointer array `execve` takes, built
/// before the fork: the child must not allocate.
struct CStrings {
    _owned: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
}

impl CStrings {
    fn new(items: impl IntoIterator<Item = Vec<u8>>, what: &str) -> Result<Self, String> {
        let owned: Vec<CString> = items
            .into_iter()
            .map(|b| CString::new(b).map_err(|_| format!("{what} contains a NUL byte")))
            .collect::<Result<_, _>>()?;
        let mut ptrs: Vec<*const libc::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        Ok(CStrings { _owned: owned, ptrs })
    }
}

impl HeldCommand {
    pub fn spawn(argv: &[String], run_as: Option<&RunAs>) -> Result<Self, String> {
        let program = resolve(&argv[0])?;
        let cprog = CString::new(program.as_os_str().as_bytes())
            .map_err(|_| "command path contains a NUL byte")?;
        let args = CStrings::new(argv.iter().map(|a| a.as_bytes().to_vec()), "an argument")?;
        let overrides: &[(String, String)] = run_as.map_or(&[], |r| &r.env[..]);
        let env = CStrings::new(
            env::vars_os()
                .filter(|(k, _)| !overrides.iter().any(|(o, _)| k.as_bytes() == o.as_bytes()))
                .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
                .chain(overrides.iter().map(|(k, v)| format!("{k}={v}").into_bytes())),
            "the environment",
        )?;
        let (go_r, go_w) = unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
        let (err_r, err_w) = unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;

        // SAFETY: fgbpf has other threads, so after the fork the child may
        // only make async-signal-safe calls. It calls nothing but raw
        // system calls (close, read, setgroups, setgid, setuid, execve,
        // write, _exit) on memory prepared above, and allocates nothing.
        match unsafe { unistd::fork() }
            .map_err(|e| format!("cannot fork to start the command: {e}"))?
        {
            ForkResult::Child => unsafe {
                libc::close(go_w.as_raw_fd());
                libc::close(err_r.as_raw_fd());
                let fail = |code: i32| -> ! {
                    let errno = *libc::__errno_location();
                    libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
                    libc::_exit(code)
                };
                let mut byte = 0u8;
                loop {
                    match libc::read(go_r.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) {
                        1 => break,
                        -1 if *libc::__errno_location() == libc::EINTR => continue,
                        // EOF: fgbpf gave up; do not run the command.
                        _ => libc::_exit(125),
                    }
                }
                if let Some(r) = run_as {
                    if libc::setgroups(r.groups.len(), r.groups.as_ptr()) != 0
                        || libc::setgid(r.gid) != 0
                        || libc::setuid(r.uid) != 0
                    {
                        fail(126);
                    }
                }
                libc::execve(cprog.as_ptr(), args.ptrs.as_ptr(), env.ptrs.as_ptr());
                fail(127)
            },
            ForkResult::Parent { child } => {
                drop(go_r);
                drop(err_w);
                Ok(HeldCommand {
                    pid: child.as_raw() as u32,
                    program,
                    go: Some(go_w),
                    exec_error: err_r,
                    reaped: None,
                })
            }
        }
    }

    /// Lets the command exec, and has it stopped at its program's entry
    /// point (entry.rs): `hook` hears [`Stage::Traced`] before the exec
    /// when it will be, then [`Stage::Entry`] with it stopped there (or
    /// running, when the stop failed after the exec). Fails if the exec
    /// did. `Ok` with a note when it could not be stopped there (it then
    /// ran at once).
    pub fn release(&mut self, mut hook: impl FnMut(Stage)) -> Result<Option<String>, String> {
        let seized = super::entry::seize(self.pid);
        if seized.is_ok() {
            hook(Stage::Traced(self.pid));
        }
        let go = self.go.take().expect("released once");
        unistd::write(&go, &[1u8]).map_err(|e| format!("cannot start the command: {e}"))?;
        drop(go);
        let mut buf = [0u8; 4];
        // The pipe closes on a successful exec (O_CLOEXEC) and carries the
        // errno otherwise.
        match unistd::read(self.exec_error.as_fd(), &mut buf) {
            Ok(4) => {
                let status = waitpid(Pid::from_raw(self.pid as i32), None);
                self.reaped = Some(127);
                let why = Errno::from_raw(i32::from_ne_bytes(buf)).desc();
                Err(match status {
                    Ok(WaitStatus::Exited(_, 126)) => {
                        format!("cannot start the command as the --user: {why}")
                    }
                    _ => format!("cannot start the command: {why}"),
                })
            }
            _ => {
                if let Err(why) = seized {
                    return Ok(Some(format!("the command was not stopped at its entry point: {why}")));
                }
                let pid = self.pid;
                let mut entered = false;
                let reached = super::entry::run_to_entry(pid, |p| {
                    entered = true;
                    hook(Stage::Entry(p));
                });
                match reached {
                    super::entry::Entry::Reached => Ok(None),
                    super::entry::Entry::Ended(code) => {
                        self.reaped = Some(code);
                        Ok(None)
                    }
                    super::entry::Entry::NotStopped(why) => {
                        if !entered {
                            hook(Stage::Entry(pid));
                        }
                        Ok(Some(format!("the command was not stopped at its entry point: {why}")))
                    }
                }
            }
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

    /// Waits up to `limit` for the command to end; its status if it did.
    pub fn wait_for(&mut self, limit: std::time::Duration) -> Option<i32> {
        let until = std::time::Instant::now() + limit;
        loop {
            if let Some(code) = self.try_wait() {
                return Some(code);
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Sends `sig` to the command, unless it has been reaped (its PID may
    /// belong to another process by then), and to every process it
    /// started: a shell script's children would otherwise outlive it.
    pub fn signal_tree(&mut self, sig: Signal) {
        if self.try_wait().is_some() {
            return;
        }
        // The whole tree first: children of a process that dies are
        // re-parented and no longer found under it.
        let mut tree = vec![self.pid];
        let parents = parents();
        let mut i = 0;
        while i < tree.len() {
            let p = tree[i];
            tree.extend(parents.iter().filter(|&&(_, pp)| pp == p).map(|&(c, _)| c));
            i += 1;
        }
        for pid in tree {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), sig);
        }
    }
}

/// (pid, parent pid) of every process, from /proc.
fn parents() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The name may hold spaces and parentheses: fields follow the
            // last ')'.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
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
        let mut cmd = HeldCommand::spawn(&["sh".into(), "-c".into(), "exit 3".into()], None).unwrap();
        let mut stopped = None;
        let mut traced = false;
        let note = cmd.release(|stage| match stage {
            Stage::Traced(_) => traced = true,
            Stage::Entry(pid) => {
                // Stopped at sh's entry: its libraries are mapped.
                let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
                stopped = Some(maps.contains("libc.so"));
            }
        });
        assert!(traced, "told before the exec");
        assert_eq!(note.unwrap(), None, "stopped at its entry point");
        assert_eq!(stopped, Some(true), "the libraries were mapped at the entry point");
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
        let cmd = HeldCommand::spawn(&["touch".into(), marker.display().to_string()], None).unwrap();
        drop(cmd);
        assert!(!marker.exists());
    }
}
