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
pub fn enabled() -> bool {
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

/// Resident memory now and its peak since the last reset, in KB, from
/// `/proc/self/status`.
pub fn resident_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (field_kb(&status, "VmRSS:"), field_kb(&status, "VmHWM:"))
}

/// A `/proc/self/status` field in KB (0 when missing).
fn field_kb(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// The highest peak since [`reset_peak`], marks in between included (KB).
static SINCE_KB: AtomicU64 = AtomicU64::new(0);

/// Starts a new peak (the kernel's, and the marks'); the highest so far
/// is kept for [`highest_kb`].
pub fn reset_peak() {
    HIGHEST_KB.fetch_max(resident_kb().1, Ordering::Relaxed);
    SINCE_KB.store(0, Ordering::Relaxed);
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The peak resident memory since [`reset_peak`], in KB.
pub fn peak_kb() -> u64 {
    SINCE_KB.load(Ordering::Relaxed).max(resident_kb().1)
}

/// The allocator's bytes in use, in MB.
fn allocated_mb() -> f64 {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as f64 / 1048576.0
}

/// Prints, with `FGBPF_MEMORY_STAGES=1`, the resident and allocated
/// memory now and `what` (the sizes of what the caller holds).
pub fn note(what: std::fmt::Arguments<'_>) {
    if enabled() {
        let (rss, _) = resident_kb();
        eprintln!("fgbpf memory: now {:.1} MB, allocated {:.1} MB; {what}", rss as f64 / 1024.0, allocated_mb());
    }
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
    let (rss, peak, files) = (field_kb(&status, "VmRSS:"), field_kb(&status, "VmHWM:"), field_kb(&status, "RssFile:"));
    HIGHEST_KB.fetch_max(peak, Ordering::Relaxed);
    SINCE_KB.fetch_max(peak, Ordering::Relaxed);
    let mb = |kb: u64| kb as f64 / 1024.0;
    eprintln!(
        "fgbpf memory: {stage}: peak {:.1} MB, now {:.1} MB ({:.1} MB of it files mapped), allocated {:.1} MB",
        mb(peak),
        mb(rss),
        mb(files),
        allocated_mb()
    );
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
