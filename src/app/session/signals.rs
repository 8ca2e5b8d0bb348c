//! Ctrl-C, SIGTERM and SIGHUP end the capture and still write every
//! output; a second one exits at once. With `-- COMMAND`, a signal sent to
//! fgbpf by another process (`kill`) is passed on to the command, as a
//! terminal passes Ctrl-C to its whole foreground process group; one that
//! came from the terminal already reached the command and is not sent
//! twice. SIGUSR1 asks `fgbpf flight` for a dump.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static HITS: AtomicUsize = AtomicUsize::new(0);
static COMMAND: AtomicI32 = AtomicI32::new(0);
static DUMPS: AtomicUsize = AtomicUsize::new(0);

/// Runs in signal context: one atomic add.
extern "C" fn on_dump(_: libc::c_int) {
    DUMPS.fetch_add(1, Ordering::SeqCst);
}

/// `fgbpf flight`: SIGUSR1 asks for a dump.
pub struct DumpSignal(());

impl DumpSignal {
    /// Installs the handler; call once, before recording starts.
    pub fn install() -> Result<Self, String> {
        let action = SigAction::new(SigHandler::Handler(on_dump), SaFlags::SA_RESTART, SigSet::empty());
        // SAFETY: the handler only adds to an atomic.
        unsafe { sigaction(Signal::SIGUSR1, &action) }.map_err(|e| format!("cannot install the SIGUSR1 handler: {e}"))?;
        Ok(DumpSignal(()))
    }

    /// Whether a dump was asked for since the last call (signals that came
    /// together ask for one).
    pub fn take(&self) -> bool {
        DUMPS.swap(0, Ordering::SeqCst) > 0
    }
}

/// Runs in signal context: only atomics and raw system calls.
extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    if HITS.fetch_add(1, Ordering::SeqCst) >= 1 {
        const MSG: &[u8] = b"\nfgbpf: interrupted again, exiting without writing outputs\n";
        // SAFETY: write and _exit are async-signal-safe.
        unsafe {
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
            libc::_exit(130);
        }
    }
    let command = COMMAND.load(Ordering::SeqCst);
    // si_code <= 0: sent by a process (SI_USER, SI_QUEUE, SI_TKILL), not
    // by the terminal or the kernel.
    // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO.
    let from_process = unsafe { (*info).si_code } <= 0;
    if command > 0 && from_process {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(command, sig) };
    }
}

#[derive(Clone, Copy)]
pub struct StopFlag(());

impl StopFlag {
    /// Installs the handlers; call once, before the capture starts.
    pub fn install() -> Result<Self, String> {
        let action = SigAction::new(
            SigHandler::SigAction(on_signal),
            SaFlags::SA_SIGINFO | SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            // SAFETY: the handler only touches atomics and makes
            // async-signal-safe calls.
            unsafe { sigaction(sig, &action) }
                .map_err(|e| format!("cannot install the {sig} handler: {e}"))?;
        }
        Ok(StopFlag(()))
    }

    /// From now on, signals sent to fgbpf by other processes are passed on
    /// to `pid`, the `-- COMMAND` fgbpf started.
    pub fn forward_to(&self, pid: u32) {
        COMMAND.store(pid as i32, Ordering::SeqCst);
    }

    /// Stops forwarding (the command was reaped; its PID may be reused).
    pub fn forward_none(&self) {
        COMMAND.store(0, Ordering::SeqCst);
    }

    pub fn stopped(&self) -> bool {
        HITS.load(Ordering::SeqCst) > 0
    }
}
