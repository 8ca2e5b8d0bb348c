//! The steps of a capture's end, marked: at each mark what the step freed
//! goes back to the system, and with `FGBPF_MEMORY_STAGES=1` the step's
//! peak resident memory is printed, one line on stderr, so that the soak
//! (`scripts/soak.sh`) can say where the end's memory goes. Each mark
//! prints the peak since the mark before, then starts a new one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The highest of the peaks marked so far, in KB: each mark resets the
/// kernel's own, which the capture's summary reports otherwise.
static HIGHEST_KB: AtomicU64 = AtomicU64::new(0);

/// The highest peak resident memory the marks saw (KB; 0 without marks).
pub fn highest_kb() -> u64 {
    HIGHEST_KB.load(Ordering::Relaxed)
}

/// Whether the marks print (read once).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("FGBPF_MEMORY_STAGES").is_some_and(|v| v == "1"))
}

/// Gives the allocator's free pages back to the system: a long-running
/// recorder frees much at once (the past it forgets, a dump's tables),
/// and glibc otherwise keeps those pages resident.
pub fn trim() {
    // SAFETY: malloc_trim only returns free pages of the allocator's own.
    unsafe { libc::malloc_trim(0) };
}

/// Prints `stage`'s peak and current resident memory in MB, and resets
/// the kernel's peak (`/proc/self/clear_refs`, 5) for the next stage.
pub fn mark(stage: &str) {
    // What the step freed goes back to the system before the next one.
    trim();
    if !enabled() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let peak = kb("VmHWM:");
    HIGHEST_KB.fetch_max(peak, Ordering::Relaxed);
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    let mb = |kb: u64| kb as f64 / 1024.0;
    eprintln!(
        "fgbpf memory: {stage}: peak {:.1} MB, now {:.1} MB ({:.1} MB of it files mapped), allocated {:.1} MB",
        mb(peak),
        mb(kb("VmRSS:")),
        mb(kb("RssFile:")),
        (m.uordblks + m.hblkhd) as f64 / 1048576.0
    );
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
