//! What a capture is asked to record ([`Options`], with the sampler's and
//! the tracer's settings) and what it hands over at its end
//! ([`Recorded`]): the probe's inputs and outputs, apart from the code
//! that loads and drains the BPF object.

use std::time::Duration;

use super::{Stats, TableStats, Targets, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_STACKS, DEFAULT_MAX_UNWIND_ROWS};
use crate::profile::{Losses, RawStack, State};

/// The on-CPU sampler's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OncpuOptions {
    /// Samples per second on each CPU.
    pub frequency: u64,
    pub include_idle: bool,
}

/// The off-CPU tracer's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffcpuOptions {
    /// Intervals shorter than this are not recorded.
    pub min_block: Duration,
    /// Intervals longer than this are not recorded.
    pub max_block: Option<Duration>,
    pub states: Vec<State>,
    /// Record one switch in N, scaling times by N.
    pub sample_every: u32,
    /// Record who woke each wait (`--wakers`).
    pub wakers: bool,
    /// System-wide: also record kernel threads (`--kernel-threads`).
    pub kernel_threads: bool,
    /// System-wide: also draw threads blocked for the whole capture
    /// (`--idle-threads`); otherwise they are counted in [`Recorded::idle`].
    pub idle_threads: bool,
    /// `fgbpf flight --wait-above`: waits at least this long are told as
    /// they end ([`super::Probe::take_long_waits`]).
    pub announce_wait: Option<Duration>,
}

impl OffcpuOptions {
    /// Whether kernel threads are left out: by default system-wide, where
    /// they idle in their loops; both the tracer and the seeding of
    /// threads blocked at the start follow it.
    pub(super) fn skips_kernel_threads(&self, targets: &Targets) -> bool {
        targets.whole_system() && !self.kernel_threads
    }
}

impl Default for OffcpuOptions {
    fn default() -> Self {
        OffcpuOptions {
            min_block: Duration::ZERO,
            max_block: None,
            states: State::ALL.to_vec(),
            sample_every: 1,
            wakers: false,
            kernel_threads: false,
            idle_threads: false,
            announce_wait: None,
        }
    }
}

/// The default width of time slices: FlameScope's rows are 20 ms, but a
/// 99 Hz sampler puts 2 samples per CPU in those; 100 ms keeps 10.
pub const DEFAULT_SLICE: Duration = Duration::from_millis(100);

/// What to record: the programs to enable and what they share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub targets: Targets,
    /// `--btf`: the vmlinux BTF file CO-RE relocates against, for kernels
    /// without their own.
    pub btf: Option<std::path::PathBuf>,
    /// The on-CPU sampler, when wanted.
    pub oncpu: Option<OncpuOptions>,
    /// The off-CPU tracer, when wanted.
    pub offcpu: Option<OffcpuOptions>,
    pub user_stacks: bool,
    pub kernel_stacks: bool,
    /// `--max-stacks`, `--max-entries`; `None`: sized for the capture
    /// ([`Options::map_sizes`]).
    pub max_stacks: Option<u32>,
    pub max_entries: Option<u32>,
    /// Rows of the unwind-table array; 0: frame pointers only.
    pub max_unwind_rows: u32,
    /// Read the Python frames of CPython threads (`--no-python` not given).
    pub python: bool,
    /// Read the Java frames of HotSpot JVMs (`--no-java` not given).
    pub java: bool,
    /// Name the JavaScript frames of V8 (Node.js) processes (`--no-node`
    /// not given).
    pub node: bool,
    /// Read the Ruby frames of Ruby threads (`--no-ruby` not given).
    pub ruby: bool,
    /// Read the PHP frames of PHP processes (`--no-php` not given).
    pub php: bool,
    /// Read Go programs' goroutines (`--no-go` not given, off-CPU time
    /// recorded).
    pub goroutines: bool,
    /// Go programs' stacks carry the goroutine they ran and its pprof
    /// labels (`--no-go` not given).
    pub go_labels: bool,
    /// Python frames carry their line: `f (app.py:42)`, else `f (app.py)`.
    pub py_lines: bool,
    /// The width of the time slices counts are kept in (`--slice`).
    pub slice: Duration,
    /// Key stacks by their thread's cgroup too (`--group-by cgroup`).
    pub group_cgroup: bool,
    /// Bytes of the process-announcement ring buffer: `fgbpf flight`
    /// does not read it for seconds while it writes a dump.
    pub events_ring: u32,
    /// A system-wide capture may start in two stages (src/probe/staged.rs);
    /// off when the kernel refused the first stage.
    pub staged_start: bool,
}

/// The process-announcement ring buffer of a capture (targets.bpf.h):
/// about 4,600 announcements.
pub const DEFAULT_EVENTS_RING: u32 = 256 * 1024;

impl Default for Options {
    fn default() -> Self {
        Options {
            targets: Targets::default(),
            btf: None,
            oncpu: None,
            offcpu: None,
            user_stacks: true,
            kernel_stacks: true,
            max_stacks: None,
            max_entries: None,
            max_unwind_rows: DEFAULT_MAX_UNWIND_ROWS,
            python: true,
            java: true,
            node: true,
            ruby: true,
            php: true,
            goroutines: true,
            go_labels: true,
            py_lines: true,
            slice: DEFAULT_SLICE,
            events_ring: DEFAULT_EVENTS_RING,
            group_cgroup: false,
            staged_start: true,
        }
    }
}

impl Options {
    /// Wall-clock captures measure the time threads run at their
    /// switches, the total their on-CPU samples divide among stacks.
    pub fn measures_runs(&self) -> bool {
        self.oncpu.is_some() && self.offcpu.is_some()
    }

    /// Entries of the stack map and of each counts map: as asked, else
    /// the defaults, or for on-CPU samples alone what `cpus` CPUs at the
    /// sampling frequency can fill between two drains, four times over (a
    /// drain is late when naming or table building holds the loop up).
    /// Smaller maps are made faster at start-up, and their buckets stay in
    /// the CPU's caches between samples.
    pub fn map_sizes(&self, cpus: usize) -> (u32, u32) {
        let per_second = match (&self.oncpu, &self.offcpu) {
            (Some(on), None) => Some(on.frequency * cpus.max(1) as u64),
            _ => None,
        };
        let sized = |asked: Option<u32>, per_sample: u64, least: u32, default: u32| {
            asked.unwrap_or_else(|| match per_second {
                Some(n) => (n * per_sample).clamp(u64::from(least), u64::from(default)) as u32,
                None => default,
            })
        };
        (
            sized(self.max_stacks, 8, 2048, DEFAULT_MAX_STACKS),
            sized(self.max_entries, 4, 1024, DEFAULT_MAX_ENTRIES),
        )
    }
}

/// Everything a finished capture recorded, read out of the kernel.
#[derive(Debug, Default)]
pub struct Recorded {
    /// On-CPU samples (`state` None, weight in samples) and off-CPU
    /// intervals (`state` set, weight in microseconds).
    pub stacks: Vec<RawStack>,
    pub stats: Stats,
    /// Losses of the on-CPU sampler only.
    pub oncpu_losses: Losses,
    /// Losses of the off-CPU tracer only.
    pub offcpu_losses: Losses,
    /// Losses every view shares: the stack store, process announcements.
    pub shared_losses: Losses,
    /// Off-CPU blocks still open when the capture ended (their time so far
    /// is in `stacks`).
    pub open_blocks: u64,
    /// The threads blocked since before the capture that were drawn: how
    /// their user stacks were read (src/probe/seeds.rs).
    pub seeded: super::SeedCounts,
    /// Wall-clock captures: the time each thread ran, measured at its
    /// switches (weight and spans in microseconds; no stacks), up to the
    /// end for those still running. Their on-CPU samples divide it among
    /// their stacks.
    pub runs: Vec<crate::profile::merge::Ran>,
    /// System-wide: threads blocked from before the capture to its end,
    /// not drawn unless `--idle-threads`: (threads, microseconds).
    pub idle: (u64, u64),
    /// Switch-outs of kernel threads left out (system-wide default).
    pub kthread_switches: u64,
    /// How many times the kernel skipped the sched_switch program (its
    /// recursion misses); `None` without one, or before Linux 5.12.
    pub switch_misses: Option<u64>,
    /// The window recorded, on CLOCK_MONOTONIC (ns): time 0 to the stop,
    /// or to the read while recording goes on.
    pub window_ns: Option<(u64, u64)>,
    /// What the unwind tables covered; `None` with frame pointers only.
    pub tables: Option<TableStats>,
    /// Why the kernel refused the table walker, when it did.
    pub tables_refused: Option<String>,
    /// Why the kernel refused the Python walker, when it did.
    pub python_refused: Option<String>,
    /// Why the Java walker was not loaded, when the user wanted it.
    pub java_refused: Option<String>,
    /// A staged start (src/probe/staged.rs): how long after the capture's
    /// time 0 (its slices' origin) the runtimes' walkers joined (the stats
    /// count what was recorded before: `lean_samples`, `lean_switches`).
    pub walkers_joined: Option<std::time::Duration>,
    /// The kernel fallbacks taken, one sentence each (see
    /// [`features::Paths::lines`](super::features::Paths::lines)).
    pub kernel: Vec<String>,
    /// The same, one word each ([`features::Paths::words`](super::features::Paths::words)).
    pub kernel_words: Vec<&'static str>,
    /// Python interpreters found: (pid, version, binary), and those fgbpf
    /// cannot read, with why.
    pub interpreters: Vec<(u32, (u32, u32), String)>,
    pub py_unsupported: Vec<(u32, String)>,
    /// Ruby VMs found: (pid, version, binary), and those fgbpf cannot
    /// read, with why.
    pub rubies: Vec<(u32, (u32, u32), String)>,
    pub rb_unsupported: Vec<(u32, String)>,
    /// PHP interpreters found: (pid, version, binary), and those fgbpf
    /// cannot read, with why.
    pub phps: Vec<(u32, (u32, u32), String)>,
    pub php_unsupported: Vec<(u32, String)>,
    /// HotSpot JVMs whose frames were walked: (pid, JDK feature version),
    /// and those fgbpf cannot read, with why.
    pub jvms: Vec<(u32, u32, bool)>,
    pub java_unsupported: Vec<(u32, crate::procs::java::Unsupported)>,
    /// Java frames that could not be named: weight per (pid, reason).
    pub java_unnamed: super::runtime_shared::Unnamed,
    /// Why JavaScript frames were not named, when the user wanted them.
    pub node_refused: Option<String>,
    /// V8 (Node.js) processes whose JavaScript frames were named, those
    /// fgbpf cannot read (with why), and the weight of frames left unnamed
    /// per (pid, reason).
    pub v8s: Vec<(u32, bool)>,
    pub v8_unsupported: Vec<(u32, String)>,
    pub v8_unnamed: super::runtime_shared::Unnamed,
    /// Go programs: their goroutines' time by stack and state
    /// (microseconds, thread 0 of the process), each one's last read, and
    /// those whose goroutines could not be read, with why.
    pub goroutines: Vec<RawStack>,
    pub go_snapshots: Vec<super::go::Snapshot>,
    pub go_unsupported: Vec<(u32, String)>,
    /// Go programs whose stacks carry their goroutine: (pid, Go version);
    /// those whose do not, or whose pprof labels are not read, with why;
    /// and per pid the weight of stacks whose labels could not be read
    /// (on-CPU samples, off-CPU microseconds).
    pub gos: Vec<(u32, String)>,
    pub go_labels_unsupported: Vec<(u32, String)>,
    pub go_labels_unread: std::collections::BTreeMap<u32, (u64, u64)>,
    /// Runtime (Java, JavaScript) frame words named, for the symbolizer.
    pub runtime_names: crate::symbolize::RuntimeNames,
    /// The width of the time slices the stacks' spans count in, widened
    /// from the one asked for when their number outgrew its bound.
    pub slice: Option<Duration>,
}

impl Recorded {
    /// Keeps what fell in slices `from..to`, renumbered so that `from` is
    /// slice 0: a flight recorder's dump (`to` unbounded), an OTLP
    /// stream's interval. Each stack and run keeps its part in the range
    /// (spread evenly over its spans' slices); those with none go.
    pub fn keep_slices(&mut self, from: u32, to: u32) {
        use crate::profile::time::keep_within;
        let renumber = |spans: &mut crate::profile::time::Spans| {
            for s in spans.iter_mut() {
                s.first -= from;
                s.last -= from;
            }
        };
        for r in &mut self.stacks {
            r.weight = keep_within(&mut r.spans, from, to);
            renumber(&mut r.spans);
        }
        self.stacks.retain(|r| r.weight > 0);
        for r in &mut self.runs {
            r.us = keep_within(&mut r.spans, from, to);
            renumber(&mut r.spans);
        }
        self.runs.retain(|r| r.us > 0);
    }
}
