//! `fgbpf alloc`'s options: the sampling interval, the live-allocation
//! map's size and the overhead bound, beside the capture commands'
//! targets, maps and root frames; and its `--help` text, which says what
//! probing the allocator costs.

use clap::Args;

use super::{CaptureArgs, MapArgs, RootArgs};

/// `fgbpf alloc --help`'s text.
pub(super) const ALLOC_ABOUT: &str = "Allocations by stack, sampled by bytes: uprobes on the C library's malloc, calloc, realloc, memalign/aligned_alloc, posix_memalign, anonymous mmap (not a PROT_NONE one, which reserves address space only: counted and said), free and munmap (a call nested in another, as glibc's memalign calling malloc, counts once), in the library the target maps (opened through /proc/PID/map_files: a container's own). A command is probed in its own process, not in the processes it forks. A thread's allocations are sampled on average once every --sample-bytes bytes (Poisson sampling, as Go, jemalloc and tcmalloc do: a countdown of bytes drawn from an exponential distribution); only a sampled call's stack is walked, and each sample counts as s / (1 - exp(-s/mean)) bytes, an unbiased estimate. Frees are matched to the sampled allocations: what is left at the end is in use. Writes alloc_space, alloc_objects, inuse_space and inuse_objects (.folded, .svg), alloc.pb.gz with the four sample types of Go's heap profiles (with --format pprof) and report.txt, whose first lines name the top allocating and the top retaining paths. A single -p target whose malloc is jemalloc's, tcmalloc's or mimalloc's is probed in that library (the C library's mmap and munmap still); for a command, which maps its libraries only once it runs, those installed are probed beside the C library's, for its process alone, and the summary says which it called. A Go program's own heap profile is read from outside instead (its runtime's sampled buckets; in use as its last GC says); a Go program linked without the C library gets no uprobe; other static binaries are refused. --otlp sends the four views as four profiles, once at the end.\n\nCost, measured on this project's 2-CPU VM (BENCHMARKS.md, section 23): every allocation call takes a breakpoint trap at its entry and another at its return, and every free one: about 15-33 us added per malloc+free pair here (19 ns without; heaptrack, which preloads a library instead, 1.9 us), whether sampled or not; a sampled allocation walks its stack, about 1-1.5 us more. A program making 40,000 allocations a second spends about a CPU in the traps. With -p or a whole host, fgbpf counts the targets' allocation calls for 0.2 s after attaching and stops, before the capture, when their estimated cost exceeds --max-overhead (percent of one CPU) unless --force.";

/// `fgbpf alloc`: how to sample and what it may cost.
#[derive(Debug, Args, Clone, Default)]
pub struct AllocArgs {
    /// Mean bytes allocated between two samples, per thread; 1 samples
    /// every allocation.
    #[arg(long, value_name = "N", default_value_t = crate::probe::alloc::DEFAULT_SAMPLE_BYTES, value_parser = clap::value_parser!(u64).range(1..=(1u64 << 40)))]
    pub sample_bytes: u64,
    /// Sampled allocations kept live at once to match their frees (96
    /// bytes each); beyond it, further sampled allocations stay in use.
    #[arg(long, value_name = "N", default_value_t = 262_144, value_parser = clap::value_parser!(u32).range(64..=16_777_216))]
    pub max_live: u32,
    /// Refuse running targets (-p, a whole host) whose allocation calls,
    /// measured for 0.2 s before the capture, would cost more than this
    /// percent of one CPU.
    #[arg(long, value_name = "PERCENT", default_value_t = 10.0)]
    pub max_overhead: f64,
    /// Run whatever the measured cost.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub maps: MapArgs,
    #[command(flatten)]
    pub roots: RootArgs,
}
