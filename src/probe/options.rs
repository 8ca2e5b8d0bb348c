//! What a capture is asked to record ([`Options`], with the sampler's and
//! the tracer's settings): the probe's inputs, checked once; what it
//! hands over at its end is [`super::recorded`].

use std::time::Duration;

use super::{Targets, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_STACKS, DEFAULT_MAX_UNWIND_ROWS};
use crate::profile::State;

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
    /// What the runtimes are asked: their walkers (`--no-python`,
    /// `--no-java`… not given), goroutines, lines.
    pub runtimes: crate::runtimes::Settings,
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
    /// `fgbpf events`: the tracepoints, uprobes and USDT probes to count
    /// stacks at (src/probe/points.rs), instead of the sampler.
    pub events: Vec<super::points::Event>,
    /// `--weight argN`: the argument each event's hit weighs (0: 1 each).
    pub event_weight: u32,
    /// `fgbpf alloc`: the allocator to probe and how to sample it
    /// (src/probe/alloc.rs), instead of the sampler.
    pub alloc: Option<super::alloc::Options>,
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
            runtimes: Default::default(),
            slice: DEFAULT_SLICE,
            events_ring: DEFAULT_EVENTS_RING,
            group_cgroup: false,
            staged_start: true,
            events: Vec::new(),
            event_weight: 0,
            alloc: None,
        }
    }
}

impl Options {
    /// What the runtimes are asked: nothing without user stacks, and
    /// goroutines only with off-CPU time.
    pub fn runtimes_on(&self) -> crate::runtimes::Settings {
        let u = self.user_stacks;
        let asked = self.runtimes;
        crate::runtimes::Settings {
            walkers: if u { asked.walkers } else { crate::runtimes::Walkers::NONE },
            goroutines: u && asked.goroutines && self.offcpu.is_some(),
            heap: u && asked.heap && self.alloc.is_some(),
            no_lines: asked.no_lines,
        }
    }

    /// These options with only `walkers` of the runtimes' walkers asked.
    pub fn with_walkers(&self, walkers: crate::runtimes::Walkers) -> Options {
        let mut o = self.clone();
        o.runtimes.walkers = walkers;
        o
    }

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
