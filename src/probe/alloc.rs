//! `fgbpf alloc`'s probe side: which C library the target maps (read
//! through `/proc/PID/root`, so a container's), the uprobes on its
//! allocator (src/bpf/alloc.bpf.h) with the function as BPF cookie, the
//! sampling settings written before load (the mean and the exponential
//! table), the counters read back ([`Tally`]), and the decoding of the
//! kind and size a count carries in its key's cgroup field.

use std::path::{Path, PathBuf};

use libbpf_rs::{Link, MapCore, MapFlags, UprobeOpts};

use super::{bpf_error, CaptureError};
use crate::bpf::{types, FgbpfSkel};

/// `--sample-bytes`'s default: Go's and jemalloc's mean interval.
pub const DEFAULT_SAMPLE_BYTES: u64 = 512 * 1024;

pub use crate::profile::heap::Counted;

/// The functions probed, with their cookie (enum fg_alloc_fn). glibc's
/// `aligned_alloc` is `memalign`'s address: probing both would count
/// each call twice.
const ALLOCATORS: [(&str, u64); 6] = [("malloc", 0), ("calloc", 1), ("realloc", 2), ("memalign", 3), ("posix_memalign", 4), ("mmap", 5)];

/// Not a cookie: the functions that free (attached to `free`'s program).
const FREE: u64 = u64::MAX;

/// The settings of an `alloc` capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Mean bytes between samples; 1 samples every allocation.
    pub mean: u64,
    /// The C library to probe, as this process can open it.
    pub libc: PathBuf,
    /// The one process probed, or -1 for every process mapping `libc`.
    pub pid: i32,
    /// Allocators the target maps that are not probed (jemalloc, tcmalloc),
    /// with why.
    pub unread: Vec<String>,
    /// The allocator that replaces the C library's `malloc` in the one
    /// target (jemalloc, tcmalloc, mimalloc exporting `malloc` and
    /// `free`): its name, and its path as this process can open it. Its
    /// allocation functions and `free` are probed instead of the C
    /// library's; `mmap` and `munmap` stay the C library's.
    pub replacement: Option<Allocator>,
    /// A command's (not started yet, so its maps are not known): the
    /// replacement allocators it may map ([`installed_allocators`]),
    /// probed beside the C library's for its process alone, their calls
    /// counted apart.
    pub candidates: Vec<Allocator>,
    /// Entries of the live-allocation map.
    pub max_live: u32,
    /// Processes already running (`-p`, a host): their call rate is
    /// measured before the capture; not a command, which has not started.
    pub measure: bool,
    /// `--max-overhead` in hundredths of a percent of one CPU, `None`
    /// with `--force`.
    pub max_overhead: Option<u64>,
}

/// A replacement allocator's library: its file name, its path as this
/// process can open it, and the functions it exports that are probed,
/// with their cookies (its exports read once, in [`place`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocator {
    pub name: String,
    pub path: PathBuf,
    pub functions: Vec<(&'static str, u64)>,
}

impl Allocator {
    /// The library at `path` when it exports `malloc` and `free`.
    fn read(name: String, path: PathBuf) -> Option<Allocator> {
        let functions = replacement_functions(&exported(&path));
        ["malloc", "free"].iter().all(|f| functions.iter().any(|(g, _)| g == f)).then_some(Allocator { name, path, functions })
    }
}

/// Nanoseconds one allocation call adds with its free (three traps and
/// the programs), measured here (docs/commands.md): the cost estimate's.
pub const NS_PER_CALL: f64 = 25_000.0;

/// How long the call rate is measured before a `-p` capture.
const MEASURE: std::time::Duration = std::time::Duration::from_millis(200);

/// Fills in which C library to probe, and in which process, for `targets`:
/// one `-p` process's own; a command's (not started yet) or a host's, the
/// one fgbpf maps. Several `-p` processes, or a host: every process mapping
/// it traps, the BPF filter keeping the targets'.
pub fn place(opts: &mut Options, targets: &super::Targets) -> Result<(), String> {
    let one = match (&targets.pids[..], targets.held) {
        ([pid], None) => Some(*pid),
        _ => None,
    };
    let (libc, others) = match (find_libc(targets.pids.first().copied()), one) {
        (Ok(found), _) => found,
        // A Go program linked without the C library: its own heap profile
        // is read (src/runtimes/go/heap.rs), no uprobe is placed.
        (Err(_), Some(pid)) if go_heap_readable(pid) => (PathBuf::new(), Vec::new()),
        (Err(why), _) => return Err(why),
    };
    opts.libc = libc;
    opts.unread.clear();
    opts.replacement = None;
    for (name, path) in others {
        // Only one target's: several targets' or a host's processes each
        // map their own, or none.
        match (one, &opts.replacement) {
            (Some(_), None) => match Allocator::read(name.clone(), path) {
                Some(found) => opts.replacement = Some(found),
                None => opts.unread.push(format!("{name} is mapped too, exporting no malloc and free (a prefixed build): its allocations are not read")),
            },
            // One replacement is probed per process: the first its maps list.
            (Some(_), Some(probed)) => opts.unread.push(format!(
                "{name} is mapped too: its allocations are not read ({} is already probed in this process, and one replacement allocator is probed per process)",
                probed.name
            )),
            (None, _) => opts.unread.push(format!("{name} is mapped too: its allocations are not read (it is probed with a single -p)")),
        }
    }
    // A command: its own process only (the uprobes follow it through its
    // exec; the processes it forks are not probed), never every process
    // mapping the library, which would all pay the traps. Whether it maps
    // a replacement allocator (linked, as Debian's redis-server links
    // jemalloc, or preloaded) is known only once it runs: those installed
    // are probed too, for its process alone (a uprobe for one process
    // traps in no other).
    opts.candidates = match (targets.held, targets.pids.is_empty()) {
        (Some(_), true) => installed_allocators(),
        _ => Vec::new(),
    };
    opts.measure = targets.held.is_none();
    opts.pid = match (one, targets.held) {
        (Some(pid), _) => pid as i32,
        (None, Some(held)) if targets.pids.is_empty() => held as i32,
        _ => -1,
    };
    Ok(())
}

/// A command's candidate replacements, numbered 1 on in the cookie's
/// second byte (0 is the C library): FG_ALLOC_LIBS - 1 of
/// src/bpf/alloc.bpf.h, the length of `calls_in`.
const MAX_CANDIDATES: usize = (std::mem::offset_of!(types::fg_alloc_stats, reserved) - std::mem::offset_of!(types::fg_alloc_stats, calls_in)) / 8 - 1;

/// Where replacement allocators are installed: Debian's library
/// directories (merged /usr: /lib is /usr/lib) and the local one.
const LIB_DIRS: [&str; 3] = ["/usr/lib/x86_64-linux-gnu", "/usr/local/lib", "/usr/lib"];

/// Names of replacement allocators' libraries.
const REPLACEMENTS: [&str; 3] = ["libjemalloc", "libtcmalloc", "libmimalloc"];

/// The replacement allocators installed here, and those `LD_PRELOAD`
/// names (a command inherits fgbpf's environment), that export `malloc`
/// and `free`, one per file, at most [`MAX_CANDIDATES`].
fn installed_allocators() -> Vec<Allocator> {
    let preload = std::env::var_os("LD_PRELOAD").unwrap_or_default();
    let preloaded = preload.to_string_lossy().split([':', ' ']).filter(|p| p.starts_with('/')).map(PathBuf::from).collect::<Vec<_>>();
    let installed = LIB_DIRS.iter().flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten().map(|e| e.path()));
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for path in preloaded.into_iter().chain(installed) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
        if !REPLACEMENTS.iter().any(|r| name.starts_with(r)) || !name.contains(".so") {
            continue;
        }
        // One file under its several names (libjemalloc.so, .so.2).
        let Ok(real) = std::fs::canonicalize(&path) else { continue };
        if !real.is_file() || !seen.insert(real.clone()) {
            continue;
        }
        out.extend(Allocator::read(name, real));
        if out.len() == MAX_CANDIDATES {
            break;
        }
    }
    out
}

/// The functions the library at `path` exports (none when it cannot be
/// read).
fn exported(path: &Path) -> std::collections::HashSet<String> {
    use object::{Object, ObjectSymbol};
    let Ok(data) = std::fs::read(path) else { return Default::default() };
    let Ok(obj) = object::File::parse(&*data) else { return Default::default() };
    obj.dynamic_symbols().filter(|s| s.is_definition()).filter_map(|s| s.name().ok().map(str::to_string)).collect()
}

/// Whether `pid` runs a Go program whose heap profile can be read.
fn go_heap_readable(pid: u32) -> bool {
    let Ok(file) = std::fs::File::open(format!("/proc/{pid}/exe")) else { return false };
    matches!(crate::runtimes::go::find(&file, 0, 0), Ok(Some(rt)) if rt.heap.is_some())
}

impl Options {
    /// Whether the C library's functions are probed: not in a Go
    /// program linked without it.
    pub fn probes_libc(&self) -> bool {
        !self.libc.as_os_str().is_empty()
    }
}

impl super::Probe {
    /// With running targets and `--max-overhead`: the allocation calls
    /// counted over [`MEASURE`] since attaching, refused when their
    /// estimated cost is above the bound; else what it measured.
    pub fn alloc_cost_check(&self, opts: &Options) -> Result<Option<String>, String> {
        let Some(max) = opts.max_overhead.filter(|_| opts.measure).map(|m| m as f64 / 100.0) else { return Ok(None) };
        let calls = |p: &Self| tally_calls(&p.skel);
        let (before, t0) = (calls(self), std::time::Instant::now());
        std::thread::sleep(MEASURE);
        let n = calls(self).saturating_sub(before) as f64 / t0.elapsed().as_secs_f64();
        let percent = n * NS_PER_CALL / 1e7;
        if percent > max {
            return Err(format!(
                "{} {:.0} allocation calls a second while probed (the traps slow them): about {percent:.0}% of a CPU in the traps ({NS_PER_CALL:.0} ns a call with its free), above --max-overhead {max} (every call traps, sampled or not): give --force to run anyway",
                who(opts), n
            ));
        }
        Ok(Some(format!("alloc: {} {n:.0} allocation calls a second while probed: about {percent:.1}% of a CPU in the traps", who(opts))))
    }
}

/// The targets, as the cost check names them.
fn who(opts: &Options) -> String {
    match opts.pid {
        -1 => "the targets make".to_string(),
        pid => format!("process {pid} makes"),
    }
}

fn tally_calls(skel: &FgbpfSkel<'_>) -> u64 {
    match skel.maps.alloc_stats.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) {
        Ok(Some(per_cpu)) => per_cpu.iter().filter(|b| b.len() >= 8).map(|b| u64::from_ne_bytes(b[..8].try_into().expect("8 bytes"))).sum(),
        _ => 0,
    }
}

/// The C library `pid` maps (`None`: this process's, for a command not
/// started yet or a whole host), as a path this process can open: the
/// mapping's `/proc/PID/map_files` link (the very file, whatever the
/// target's mount namespace or root; /proc/PID/maps names it as seen from
/// fgbpf's root, which a container's may not be), else the path through
/// `/proc/PID/root`; and the other allocators it maps (name, path alike).
pub fn find_libc(pid: Option<u32>) -> Result<(PathBuf, Vec<(String, PathBuf)>), String> {
    let proc_dir = pid.map_or_else(|| "/proc/self".to_string(), |p| format!("/proc/{p}"));
    let maps = std::fs::read_to_string(format!("{proc_dir}/maps")).map_err(|e| format!("reading {proc_dir}/maps: {e}"))?;
    let mut libc = None;
    let mut unread = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5).filter(|p| p.starts_with('/')) else { continue };
        let name = Path::new(path).file_name().and_then(|n| n.to_str()).unwrap_or("");
        if libc.is_none() && (name.starts_with("libc.so") || (name.starts_with("libc-") && name.ends_with(".so"))) {
            libc = Some((line.split_whitespace().next().unwrap_or("").to_string(), path.to_string()));
        }
        for other in ["libjemalloc", "libtcmalloc", "libmimalloc"] {
            if name.starts_with(other) && !unread.iter().any(|(u, _): &(String, PathBuf)| u.starts_with(other)) {
                let range = line.split_whitespace().next().unwrap_or("");
                unread.push((name.to_string(), openable(pid, range, path)));
            }
        }
    }
    let libc = libc.ok_or_else(|| {
        format!("{} maps no C library (libc.so): a static binary's allocator is not probed yet", pid.map_or("fgbpf".into(), |p| format!("process {p}")))
    })?;
    let (range, libc) = libc;
    Ok((openable(pid, &range, &libc), unread))
}

/// The file `pid` maps at `range` (`/proc/PID/maps` names it `path`) as
/// this process can open it.
fn openable(pid: Option<u32>, range: &str, path: &str) -> PathBuf {
    match pid {
        Some(p) => {
            let link = PathBuf::from(format!("/proc/{p}/map_files/{range}"));
            match std::fs::metadata(&link) {
                Ok(_) => link,
                Err(_) => PathBuf::from(format!("/proc/{p}/root{path}")),
            }
        }
        None => PathBuf::from(path),
    }
}

/// The exponential table of alloc.bpf.h: -ln((i + 0.5) / 4096) in
/// 1/65536ths.
pub fn exp_table() -> Vec<u32> {
    (0..4096).map(|i| (-(((i as f64) + 0.5) / 4096.0).ln() * 65536.0).round() as u32).collect()
}

/// Attaches the allocator's uprobes and uretprobes and `free`'s uprobe.
pub(super) fn attach(skel: &FgbpfSkel<'_>, opts: &Options) -> Result<Vec<Link>, CaptureError> {
    let p = &skel.progs;
    let mut links = Vec::new();
    if !opts.probes_libc() {
        return Ok(links);
    }
    let err = |f: &str, lib: &Path, e| {
        CaptureError::new(format!(
            "attaching fgbpf alloc to {f} in {}: {} (`nm -D` on it lists its functions)",
            lib.display(),
            bpf_error("uprobe", e)
        ))
    };
    // A replacement allocator's functions, those it exports (its
    // `aligned_alloc` is its own function, not memalign's address as in
    // glibc); the C library's `mmap` and `munmap` always.
    let (lib, functions): (&Path, Vec<(&str, u64)>) = match &opts.replacement {
        Some(r) => (&r.path, r.functions.clone()),
        None => (&opts.libc, ALLOCATORS.iter().copied().filter(|(f, _)| *f != "mmap").chain([("free", FREE)]).collect()),
    };
    let libc = opts.libc.as_path();
    // A command's candidate replacements, each its functions with its
    // index in the cookie's second byte.
    let candidates: Vec<(&str, u64, &Path)> = opts
        .candidates
        .iter()
        .enumerate()
        .flat_map(|(i, a)| a.functions.iter().map(move |&(f, c)| (f, if c == FREE { FREE } else { c | (i as u64 + 1) << 8 }, a.path.as_path())))
        .collect();
    for (f, cookie, lib) in functions.into_iter().map(|(f, c)| (f, c, lib)).chain([("mmap", 5, libc), ("munmap", FREE, libc)]).chain(candidates) {
        if cookie == FREE {
            let o = UprobeOpts { func_name: Some(f.to_string()), ..Default::default() };
            links.push(p.alloc_free_entry.attach_uprobe_with_opts(opts.pid, lib, 0, o).map_err(|e| err(f, lib, e))?);
            continue;
        }
        for ret in [false, true] {
            let o = UprobeOpts { cookie, retprobe: ret, func_name: Some(f.to_string()), ..Default::default() };
            let prog = if ret { &p.alloc_return } else { &p.alloc_entry };
            links.push(prog.attach_uprobe_with_opts(opts.pid, lib, 0, o).map_err(|e| err(f, lib, e))?);
        }
    }
    Ok(links)
}

/// A replacement allocator's functions to probe, with their cookies:
/// those it exports (`have`; its `aligned_alloc` is its own function,
/// not memalign's address as in glibc), `free` included.
fn replacement_functions(have: &std::collections::HashSet<String>) -> Vec<(&'static str, u64)> {
    ALLOCATORS.iter().copied().filter(|(f, _)| *f != "mmap").chain([("aligned_alloc", 3), ("free", FREE)]).filter(|(f, _)| have.contains(*f)).collect()
}

/// The counters of alloc.bpf.h (struct fg_alloc_stats), summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub calls: u64,
    pub sampled: u64,
    pub recorded: u64,
    pub failed: u64,
    pub lost_returns: u64,
    pub lost_counts: u64,
    pub lost_user_stack: u64,
    pub live_full: u64,
    pub frees: u64,
    pub frees_matched: u64,
    pub threads_full: u64,
    pub lost_free_counts: u64,
    /// Calls whose return had not come when the capture ended.
    pub in_flight: u64,
    /// Sampled allocations still live at the end.
    pub live: u64,
    /// The mean and the allocators not read, for the summary.
    pub mean: u64,
    pub unread: Vec<String>,
    /// The C library was not probed (a Go program linked without it).
    pub no_libc: bool,
    /// The allocator probed in place of the C library's, by name.
    pub replacement: Option<String>,
    /// A command's: the calls in the C library's allocator, and in each
    /// candidate replacement that was called (name, calls).
    pub libc_calls: u64,
    pub called: Vec<(String, u64)>,
    /// Anonymous mmaps with no access (PROT_NONE), left out.
    pub reserved: u64,
}

/// Reads the counters and what the maps hold at the end.
pub(super) fn tally(skel: &FgbpfSkel<'_>, opts: &Options) -> Tally {
    let mut sum = [0u64; std::mem::size_of::<types::fg_alloc_stats>() / 8];
    if let Ok(Some(per_cpu)) = skel.maps.alloc_stats.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) {
        for bytes in per_cpu {
            for (s, c) in sum.iter_mut().zip(bytes.chunks_exact(8)) {
                *s += u64::from_ne_bytes(c.try_into().expect("chunks of 8 bytes"));
            }
        }
    }
    const PENDING: usize = std::mem::offset_of!(types::fg_alloc_thread, pending);
    let in_flight = skel
        .maps
        .alloc_threads
        .keys()
        .filter_map(|k| skel.maps.alloc_threads.lookup(&k, MapFlags::ANY).ok().flatten())
        .filter(|v| v.get(PENDING..PENDING + 4).is_some_and(|p| p != [0; 4]))
        .count() as u64;
    let live = skel.maps.alloc_live.keys().count() as u64;
    let [calls, sampled, recorded, failed, lost_returns, lost_counts, lost_user_stack, live_full, frees, frees_matched, threads_full, lost_free_counts, calls_in @ .., reserved] = sum;
    let called = opts.candidates.iter().zip(&calls_in[1..]).filter(|(_, &n)| n > 0).map(|(a, &n)| (a.name.clone(), n)).collect();
    Tally {
        calls,
        sampled,
        recorded,
        failed,
        lost_returns,
        lost_counts,
        lost_user_stack,
        live_full,
        frees,
        frees_matched,
        threads_full,
        lost_free_counts,
        in_flight,
        live,
        mean: opts.mean,
        unread: opts.unread.clone(),
        no_libc: !opts.probes_libc(),
        replacement: opts.replacement.as_ref().map(|r| r.name.clone()),
        libc_calls: calls_in[0],
        called,
        reserved,
    }
}

impl Tally {
    /// The summary's line: what was seen, sampled and matched.
    pub fn summary_line(&self) -> String {
        if self.no_libc {
            return "alloc: the target maps no C library (a Go program linked without it): no uprobe placed, its Go heap profile read".into();
        }
        let mut s = format!(
            "alloc: {} allocation calls, {} sampled (mean {} bytes), {} counted; {} frees, {} of sampled allocations ({} others: unsampled or from before the capture); {} sampled allocations still live at the end",
            self.calls,
            self.sampled,
            self.mean,
            self.recorded,
            self.frees,
            self.frees_matched,
            self.frees - self.frees_matched,
            self.live
        );
        if self.failed > 0 {
            s.push_str(&format!("; {} sampled calls returned no memory", self.failed));
        }
        if self.reserved > 0 {
            s.push_str(&format!(
                "; {} anonymous mmaps with no access (PROT_NONE) left out: address space reserved, not memory (glibc's malloc arenas and thread stacks; an arena's memory is counted as the mallocs it serves)",
                self.reserved
            ));
        }
        if let Some(r) = &self.replacement {
            s.push_str(&format!("; allocations read in {r}, which replaces the C library's malloc (its mmap and munmap stay probed)"));
        }
        if !self.called.is_empty() {
            let called: Vec<String> = self.called.iter().map(|(name, n)| format!("{n} in {name}")).collect();
            s.push_str(&format!(
                "; the command's allocation calls: {}, which replaces the C library's malloc, and {} in the C library's (probed beside it: which the command maps is known only once it runs)",
                called.join(", "),
                self.libc_calls
            ));
        }
        for u in &self.unread {
            s.push_str(&format!("; {u}"));
        }
        s
    }

    /// What was lost, with the option that raises the limit.
    pub fn losses(&self) -> Vec<(String, u64, &'static str)> {
        vec![
            ("sampled allocations lost: the counts map was full".into(), self.lost_counts, "raise --max-entries"),
            ("sampled allocations counted without their stack (stack map full)".into(), self.lost_user_stack, "raise --max-stacks"),
            ("sampled allocations whose free cannot be matched (live map full: they stay in use)".into(), self.live_full, "raise --max-live"),
            ("matched frees lost: the counts map was full (their allocation stays in use)".into(), self.lost_free_counts, "raise --max-entries"),
            ("allocation calls whose return never came (longjmp or thread exit between entry and return)".into(), self.lost_returns + self.in_flight, "none"),
            ("allocation calls of threads the thread map had no room for (not sampled)".into(), self.threads_full, "fewer threads"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_sizes_round_trip_and_the_table_has_mean_one() {
        assert_eq!(Counted::of((1 << 56) | 4096), Some(Counted::Alloc(4096)));
        assert_eq!(Counted::of((2 << 56) | 16), Some(Counted::Free(16)));
        assert_eq!(Counted::of(3), None);
        for c in [Counted::Alloc(7), Counted::Free(1 << 20)] {
            assert_eq!(Counted::parse(&c.name()), Some(c));
        }
        let t = exp_table();
        let mean = t.iter().map(|&v| v as f64 / 65536.0).sum::<f64>() / t.len() as f64;
        assert!((mean - 1.0).abs() < 0.002, "{mean}");
    }

    /// A `-p` process mapping two replacement allocators (jemalloc, and
    /// a copy of it named as tcmalloc): the first its maps list is
    /// probed, the other is said unread because of it, not as a
    /// prefixed build.
    #[test]
    fn a_second_replacement_is_unread_beside_the_one_probed() {
        let jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
        assert!(Path::new(jemalloc).exists(), "{jemalloc} is missing: scripts/test.sh installs libjemalloc2");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("libtcmalloc.so.4");
        std::fs::copy(jemalloc, &copy).unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").env("LD_PRELOAD", format!("{jemalloc}:{}", copy.display())).spawn().unwrap();
        let pid = child.id();
        // Once it sleeps (clock_nanosleep, syscall 230): the dynamic
        // loader has mapped everything, the C library after the preloaded
        // allocators.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !std::fs::read_to_string(format!("/proc/{pid}/syscall")).is_ok_and(|s| s.starts_with("230 ")) {
            assert!(std::time::Instant::now() < deadline, "process {pid} never went to sleep");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        assert!(maps.contains("libjemalloc") && maps.contains("libtcmalloc"), "process {pid} did not map both allocators:\n{maps}");
        let mut opts = Options { mean: 1, libc: PathBuf::new(), pid: -1, unread: Vec::new(), replacement: None, candidates: Vec::new(), max_live: 1, measure: false, max_overhead: None };
        let placed = place(&mut opts, &crate::probe::Targets { pids: vec![pid], ..Default::default() });
        child.kill().ok();
        child.wait().ok();
        placed.unwrap();
        let probed = opts.replacement.as_ref().expect("one replacement probed").name.clone();
        let other = if probed.starts_with("libjemalloc") { "libtcmalloc.so.4" } else { "libjemalloc.so.2" };
        assert_eq!(
            opts.unread,
            [format!("{other} is mapped too: its allocations are not read ({probed} is already probed in this process, and one replacement allocator is probed per process)")]
        );
    }
}
