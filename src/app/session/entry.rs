//! A held `-- COMMAND` stopped at its program's entry point, after its
//! `execve` and after the dynamic linker has mapped its libraries, so that
//! the walkers' tables for its binary and libraries are placed before its
//! first instruction: without this its first waits and samples (a second
//! of them, until the next turn reads its new image) are walked by frame
//! pointers, which a `gcc -O2` or Rust program does not keep.
//!
//! How: fgbpf attaches to the held child with `PTRACE_SEIZE` (exec events
//! on) before letting it exec, waits for the exec's stop, puts a
//! breakpoint on the entry point the kernel gives the program (`AT_ENTRY`
//! in `/proc/PID/auxv`), lets it run the dynamic linker to there, restores
//! the instruction, hands the stopped process to the caller, and detaches.
//! As root fgbpf may trace it, and a set-user-ID program execs as usual
//! (the kernel drops privileges only for a tracer without
//! `CAP_SYS_PTRACE`). Where tracing is refused (a Yama policy, seccomp)
//! the command runs at once, as before, and the caller says so.

use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// `AT_ENTRY` in the auxiliary vector: the program's entry point.
const AT_ENTRY: u64 = 9;

/// How a held command reached its entry point.
pub enum Entry {
    /// Stopped there, handed to the caller, detached.
    Reached,
    /// It ended before reaching it (its exit status).
    Ended(i32),
    /// Not stopped (why): it ran at once.
    NotStopped(String),
}

/// Attaches to the held child `pid` before it is let go; `Err` (why) when
/// tracing is refused: it is then let go untraced.
pub fn seize(pid: u32) -> Result<(), String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("stopping a command at its entry point is done on x86-64 only".into());
    }
    ptrace::seize(Pid::from_raw(pid as i32), ptrace::Options::PTRACE_O_TRACEEXEC)
        .map_err(|e| format!("ptrace refused ({e})"))
}

/// After the child seized by [`seize`] was let go to exec: waits for its
/// exec, runs it to its entry point, calls `at_entry` with it stopped
/// there, and detaches.
pub fn run_to_entry(pid: u32, at_entry: impl FnOnce(u32)) -> Entry {
    let p = Pid::from_raw(pid as i32);
    // The exec's stop, or an end before it (the exec failed).
    match wait_stop(p, |s| matches!(s, WaitStatus::PtraceEvent(_, Signal::SIGTRAP, e) if *e == libc::PTRACE_EVENT_EXEC)) {
        Ok(()) => {}
        Err(end) => return end,
    }
    let entry = match entry_point(pid) {
        Some(e) => e,
        None => return detach(p, "its entry point was not found in /proc/PID/auxv"),
    };
    let Ok(word) = ptrace::read(p, entry as ptrace::AddressType) else {
        return detach(p, "its entry point could not be read");
    };
    // int3 in the entry's first byte.
    let trap = (word & !0xff) | 0xcc;
    if ptrace::write(p, entry as ptrace::AddressType, trap).is_err() {
        return detach(p, "a breakpoint could not be set at its entry point");
    }
    if ptrace::cont(p, None).is_err() {
        return detach(p, "it could not be resumed after its exec");
    }
    let reached = wait_stop(p, |s| matches!(s, WaitStatus::Stopped(_, Signal::SIGTRAP)));
    if let Err(end) = reached {
        return end;
    }
    // Back to the entry's first byte, its instruction restored.
    let restored = ptrace::write(p, entry as ptrace::AddressType, word).and_then(|()| {
        let mut regs = ptrace::getregs(p)?;
        if regs.rip != entry + 1 {
            // Stopped by a SIGTRAP of its own (sent by another process
            // before the entry): nothing to rewind. Rare; said.
            return Err(nix::errno::Errno::EINVAL);
        }
        regs.rip = entry;
        ptrace::setregs(p, regs)
    });
    if restored.is_err() {
        // It cannot be run on safely from here: its instruction or program
        // counter is not as it was.
        let _ = nix::sys::signal::kill(p, Signal::SIGKILL);
        return Entry::NotStopped("its entry point could not be restored: the command was killed".into());
    }
    at_entry(pid);
    let _ = ptrace::detach(p, None);
    Entry::Reached
}

/// Waits for the stop `wanted`; signals meant for the program on the way
/// are delivered. `Err` with how it ended, or why it was let go.
fn wait_stop(p: Pid, wanted: impl Fn(&WaitStatus) -> bool) -> Result<(), Entry> {
    loop {
        let status = match waitpid(p, Some(WaitPidFlag::__WALL)) {
            Ok(s) => s,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(Entry::NotStopped(format!("waiting for it failed ({e})"))),
        };
        if wanted(&status) {
            return Ok(());
        }
        match status {
            WaitStatus::Exited(_, code) => return Err(Entry::Ended(code)),
            WaitStatus::Signaled(_, sig, _) => return Err(Entry::Ended(128 + sig as i32)),
            // A signal for the program: delivered as it would have been.
            WaitStatus::Stopped(_, sig) => {
                if ptrace::cont(p, Some(sig)).is_err() {
                    return Err(detach(p, "it could not be resumed"));
                }
            }
            _ => {
                if ptrace::cont(p, None).is_err() {
                    return Err(detach(p, "it could not be resumed"));
                }
            }
        }
    }
}

fn detach(p: Pid, why: &str) -> Entry {
    let _ = ptrace::detach(p, None);
    Entry::NotStopped(why.to_string())
}

/// `AT_ENTRY` of process `pid`, from its auxiliary vector: (type, value)
/// pairs of native words, ended by a zero type.
fn entry_point(pid: u32) -> Option<u64> {
    let bytes = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    entry_in(&bytes)
}

fn entry_in(auxv: &[u8]) -> Option<u64> {
    auxv.chunks_exact(16)
        .map(|c| {
            let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
            (word(&c[..8]), word(&c[8..]))
        })
        .take_while(|&(kind, _)| kind != 0)
        .find(|&(kind, _)| kind == AT_ENTRY)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_point_is_read_from_the_auxiliary_vector() {
        let pairs: [(u64, u64); 4] = [(33, 0x7fff0000), (AT_ENTRY, 0x401020), (0, 0), (AT_ENTRY, 1)];
        let bytes: Vec<u8> = pairs.iter().flat_map(|&(k, v)| [k.to_ne_bytes(), v.to_ne_bytes()].concat()).collect();
        assert_eq!(entry_in(&bytes), Some(0x401020));
        assert_eq!(entry_in(&bytes[32..]), None, "nothing after the end");
        let own = entry_point(std::process::id()).expect("this process's own AT_ENTRY");
        assert!(own > 0);
    }
}
