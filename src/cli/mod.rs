//! Command-line definitions. Parsing only: checks that need the system
//! (do these processes exist, can that directory be written) live in
//! [`crate::app`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

mod alloc;
mod events;
mod flight;
mod post;
mod sinks;
pub use alloc::AllocArgs;
use alloc::ALLOC_ABOUT;
pub use events::EventsArgs;
use events::EVENTS_ABOUT;
pub use flight::{DumpArgs, FlightArgs};
pub use post::{ConvertArgs, DiffArgs, FlamegraphArgs, RangeArgs, ReportArgs, Target};
pub use sinks::{OtlpArgs, SymbolArgs};

/// Highest sampling rate accepted: beyond it the timer interrupts alone
/// take a noticeable share of every CPU.
pub const MAX_FREQUENCY: u64 = 10_000;

#[derive(Debug, Parser)]
#[command(
    name = "fgbpf",
    version,
    about = "eBPF on-CPU and off-CPU profiler for live Linux servers: oncpu, offcpu, wall, a live top, a flight recorder; native and runtime stacks (Python, Ruby, PHP, Perl, Java, Node.js, Go)",
    after_help = "Examples:\n  sudo fgbpf oncpu -p 1234 -d 30     profile a running process for 30 s\n  sudo fgbpf oncpu -- ./server       profile a command from its first instruction\n  sudo fgbpf demo                    profile the built-in demo into ./fgbpf-demo/"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sample on-CPU stacks and write a CPU flamegraph, folded stacks and a report.
    Oncpu(OncpuArgs),
    /// Measure where threads wait off-CPU (sleeping, disk I/O, run queue) and why.
    Offcpu(OffcpuArgs),
    /// On-CPU and off-CPU together: CPU, off-CPU and a combined wall-clock flamegraph.
    Wall(WallArgs),
    /// Count stacks at tracepoints, uprobes or USDT probes (-e), one root frame per event; a uprobe costs a trap per call (see --help).
    #[command(long_about = EVENTS_ABOUT)]
    Events(EventsArgs),
    /// Allocations and in-use memory by stack: the C library's malloc and free by uprobes, sampled by bytes; a trap per call (see --help).
    #[command(long_about = ALLOC_ABOUT)]
    Alloc(AllocArgs),
    /// A live view, refreshed every second: the functions on and off the CPU, processes and threads, a flame; `w` writes a capture.
    Top(TopArgs),
    /// A flight recorder: keeps the last --keep (10 minutes) of on-CPU and off-CPU stacks at 49 Hz, and writes them as a capture directory on `fgbpf dump`, SIGUSR1 or a trigger.
    Flight(FlightArgs),
    /// Ask a running `fgbpf flight` for a dump now, through its socket in --dumps; prints the dump's directory.
    Dump(DumpArgs),
    /// Profile the built-in demo workload and write its outputs to ./fgbpf-demo/.
    Demo(DemoArgs),
    /// The demo workload itself (run by `fgbpf demo`).
    #[command(hide = true, name = "demo-workload")]
    DemoWorkload {
        #[arg(long, default_value = "5")]
        seconds: f64,
    },
    /// Print the report of a folded file or capture directory (no root needed).
    Report(ReportArgs),
    /// Re-render a folded file as a flamegraph: filters, icicle layout, threads merged.
    Flamegraph(FlamegraphArgs),
    /// Compare two folded files: differential flamegraphs and the functions that moved.
    Diff(DiffArgs),
    /// Convert a folded file to pprof (.pb.gz) or speedscope (.speedscope.json).
    Convert(ConvertArgs),
    /// Print a shell completion script (e.g. `fgbpf completions bash > /etc/bash_completion.d/fgbpf`).
    Completions {
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page in roff (e.g. `fgbpf man > /usr/local/share/man/man1/fgbpf.1`).
    Man,
}

/// What to profile, for how long, and where the outputs go: shared by
/// every capture command.
/// A file format a capture can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Svg,
    Folded,
    Pprof,
    Speedscope,
}

/// What `--group-by` puts at the root of every stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    Cgroup,
}

#[derive(Debug, Args, Clone)]
pub struct CaptureArgs {
    /// Profile these processes (comma-separated PIDs) and all their threads.
    #[arg(short = 'p', long = "pid", value_delimiter = ',', value_name = "PID", value_parser = parse_id)]
    pub pids: Vec<u32>,

    /// Profile these threads only (comma-separated TIDs).
    #[arg(short = 't', long = "tid", value_delimiter = ',', value_name = "TID", value_parser = parse_id)]
    pub tids: Vec<u32>,

    /// Only processes in this cgroup and its descendants, joined or forked
    /// in during the capture too: a directory (cgroup v2, or a v1
    /// controller's) or a path as /proc/PID/cgroup shows it.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["unit", "container"])]
    pub cgroup: Option<String>,

    /// Only the processes of this systemd unit (its cgroup; a bare name
    /// gets .service).
    #[arg(long, value_name = "NAME", conflicts_with = "container")]
    pub unit: Option<String>,

    /// Only the processes of the running container whose ID starts with
    /// this (Docker, containerd, CRI-O, Podman; found in /proc/*/cgroup).
    #[arg(long, value_name = "ID")]
    pub container: Option<String>,

    /// Put each stack under a root frame for the cgroup its thread ran in:
    /// `[container ID]` for a container's, `[cgroup PATH]` for any other
    /// (cgroup v2, or the hierarchy of a v1 --cgroup), so one flamegraph
    /// shows which container or service burns the CPU.
    #[arg(long = "group-by", value_enum, value_name = "WHAT")]
    pub group_by: Option<GroupBy>,

    /// Stop after this many seconds (default: until Ctrl-C, or until every
    /// target has exited).
    #[arg(short = 'd', long = "duration", value_name = "SECONDS", value_parser = parse_duration, allow_negative_numbers = true)]
    pub duration: Option<Duration>,

    /// Output directory (default: ./fgbpf-<command>-<YYYYmmdd-HHMMSS>/).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Record user-space stacks only.
    #[arg(long, conflicts_with = "kernel_only")]
    pub user_only: bool,

    /// Record kernel stacks only.
    #[arg(long)]
    pub kernel_only: bool,

    /// Leave Python threads' interpreter frames out: CPython processes
    /// then show the evaluator (_PyEval_EvalFrameDefault), as native
    /// profilers do.
    #[arg(long)]
    pub no_python: bool,

    /// Leave HotSpot JVMs' Java frames unwalked: their threads then end at
    /// the first Java frame, `[unknown]` without a perf map.
    #[arg(long)]
    pub no_java: bool,

    /// Leave V8's JavaScript frames unnamed: Node.js threads then show
    /// V8's builtins, and JIT code `[unknown]` without a perf map.
    #[arg(long)]
    pub no_node: bool,

    /// Leave Ruby threads' VM frames out: Ruby processes then show the VM
    /// (rb_vm_exec), as native profilers do.
    #[arg(long)]
    pub no_ruby: bool,

    /// Leave PHP's interpreter frames out: PHP processes then show the
    /// executor (execute_ex), as native profilers do.
    #[arg(long)]
    pub no_php: bool,

    /// Leave Perl's interpreter frames out: Perl processes then show the
    /// runops loop (Perl_runops_standard), as native profilers do.
    #[arg(long)]
    pub no_perl: bool,

    /// Leave LuaJIT's Lua frames out: LuaJIT processes (luajit, nginx with
    /// Lua) then show the VM's and the traces' machine code, as native
    /// profilers do.
    #[arg(long)]
    pub no_luajit: bool,

    /// Leave the BEAM's (Erlang's, Elixir's) frames out: its JIT-compiled
    /// functions are then neither named from the JIT's own code map (only
    /// from a perf map, `+JPperf true`) nor their Erlang callers walked.
    #[arg(long)]
    pub no_beam: bool,

    /// Do not read Go programs' goroutines (`offcpu` and `wall` write
    /// their goroutine view, `goroutines.folded`, and the report their
    /// counts), nor tell on their stacks the goroutine that ran and its
    /// pprof labels.
    #[arg(long)]
    pub no_go: bool,

    /// Root each stack of a Go program at a frame of the goroutine it ran
    /// and its pprof labels, `[goroutine 18 route=/api]`, and each of an
    /// Erlang node at one of the Erlang process it ran,
    /// `[erlang_process <0.81.0>]` (pprof and OTLP output carry them as
    /// labels either way).
    #[arg(long)]
    pub label_frames: bool,

    /// Python, Ruby and PHP frames without their line, `handler (app.py)`
    /// rather than `handler (app.py:42)`, so that each function is one
    /// frame.
    #[arg(long)]
    pub no_py_lines: bool,

    /// Output formats besides report.txt, comma-separated: svg, folded,
    /// pprof (.pb.gz), speedscope (.speedscope.json).
    #[arg(
        long = "format",
        value_delimiter = ',',
        value_name = "FORMATS",
        default_value = "svg,folded"
    )]
    pub formats: Vec<Format>,

    #[command(flatten)]
    pub symbols: SymbolArgs,

    #[command(flatten)]
    pub otlp: OtlpArgs,

    /// Print nothing on stderr but errors (the summary is in report.txt,
    /// and with --json on stdout).
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// At the end, print the summary (totals, losses with their remedies,
    /// files written, the command's status, fgbpf's own CPU and memory) as
    /// one JSON object on stdout, for scripts.
    #[arg(long)]
    pub json: bool,

    /// Run the command as this user (a name or a UID), with that user's
    /// groups, HOME, USER and LOGNAME; without it the command runs as root.
    #[arg(long = "user", value_name = "NAME")]
    pub user: Option<String>,

    /// For kernels without their own BTF (no /sys/kernel/btf/vmlinux): a
    /// vmlinux BTF file of the running kernel (e.g. from BTFHub) to
    /// relocate the BPF programs against; raw tracepoints are then used.
    #[arg(long = "btf", value_name = "FILE")]
    pub btf: Option<PathBuf>,

    /// When -d ends the capture before the command ends, stop the command
    /// and the processes it started (SIGTERM, then SIGKILL after 2 s)
    /// instead of leaving it running.
    #[arg(long)]
    pub kill_at_end: bool,

    /// Start this command and profile it, its threads and its children
    /// until it exits; fgbpf then exits with its status. It runs as root
    /// unless --user is given; signals sent to fgbpf are passed on to it.
    #[arg(last = true, value_name = "COMMAND", conflicts_with = "pids")]
    pub command: Vec<String>,
}

/// Sizes of the kernel maps that hold what a capture gathers.
#[derive(Debug, Args, Clone)]
pub struct MapArgs {
    /// Entries of the kernel's stack map: distinct new user and kernel
    /// stacks per second (stacks move to fgbpf's memory every second).
    /// Default: 16384, or for on-CPU samples alone 8 per sample a second
    /// takes (at least 2048).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(64..=4_194_304))]
    pub max_stacks: Option<u32>,

    /// Rows of the kernel's unwind-table array (16 bytes each): every
    /// binary's .eh_frame rules, shared by the processes that map it. 0:
    /// walk user stacks by frame pointers only.
    #[arg(long, value_name = "N", default_value_t = crate::probe::DEFAULT_MAX_UNWIND_ROWS, value_parser = clap::value_parser!(u32).range(0..=67_108_864))]
    pub max_unwind_rows: u32,

    /// Entries of the counts map: distinct (thread, stacks, state) keys kept
    /// between two drains (it is drained every second). Default: 65536, or
    /// for on-CPU samples alone 4 per sample a second takes (at least
    /// 1024).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(64..=16_777_216))]
    pub max_entries: Option<u32>,

    /// Width of the time slices counts are kept in, in milliseconds
    /// (1 to 60000): timeline.html's cells, and the steps of --from/--to.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub slice: u32,
}

impl Default for MapArgs {
    fn default() -> Self {
        MapArgs {
            slice: 100,
            max_stacks: None,
            max_entries: None,
            max_unwind_rows: crate::probe::DEFAULT_MAX_UNWIND_ROWS,
        }
    }
}

/// How on-CPU samples are taken.
#[derive(Debug, Args, Clone)]
pub struct SamplingArgs {
    /// Samples per second on each CPU, 1 to 10000.
    #[arg(short = 'F', long = "frequency", value_name = "HZ", default_value = "99", value_parser = parse_frequency)]
    pub frequency: u64,

    /// Also count samples of the idle task.
    #[arg(long)]
    pub include_idle: bool,
}

impl Default for SamplingArgs {
    fn default() -> Self {
        SamplingArgs {
            frequency: 99,
            include_idle: false,
        }
    }
}

/// Which off-CPU intervals are recorded.
#[derive(Debug, Args, Clone, Default)]
pub struct BlockArgs {
    /// Record only intervals of at least this many microseconds.
    #[arg(long, value_name = "USECS")]
    pub min_block: Option<u64>,

    /// Record only intervals of at most this many microseconds.
    #[arg(long, value_name = "USECS")]
    pub max_block: Option<u64>,

    /// Record only these states, comma-separated: sleeping, uninterruptible,
    /// runqueue (or S, D, R). Default: all.
    #[arg(long = "state", value_name = "STATES", value_delimiter = ',', value_parser = parse_state)]
    pub states: Vec<String>,

    /// Record one context switch in N and scale times by N (for very busy
    /// hosts).
    #[arg(long = "sample", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub sample_every: Option<u32>,

    /// Also record who woke each wait (the waking thread and its stacks)
    /// and write offwake.svg/.folded: the blocked stack, `--`, then the
    /// waker's stack from its leaf down, as offwaketime draws it.
    #[arg(long)]
    pub wakers: bool,

    /// System-wide: also record kernel threads (kworker, ksoftirqd, ...),
    /// left out by default because they idle in their loops.
    #[arg(long)]
    pub kernel_threads: bool,

    /// System-wide: also draw threads that were blocked for the whole
    /// capture (idle daemons and pools), which are otherwise only counted.
    #[arg(long)]
    pub idle_threads: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct OncpuArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub maps: MapArgs,
    #[command(flatten)]
    pub roots: RootArgs,
}

#[derive(Debug, Args, Clone, Default)]
pub struct OffcpuArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub blocks: BlockArgs,
    #[command(flatten)]
    pub maps: MapArgs,
    #[command(flatten)]
    pub roots: RootArgs,
}

#[derive(Debug, Args, Clone, Default)]
pub struct WallArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub blocks: BlockArgs,
    #[command(flatten)]
    pub maps: MapArgs,
    #[command(flatten)]
    pub roots: RootArgs,
}

/// The root frames a capture's flamegraphs are drawn with. Without one,
/// a whole host's are one root per program, a `-p`/`-t`/command
/// capture's one per thread.
#[derive(Debug, Args, Clone, Default)]
pub struct RootArgs {
    /// One root frame per program (process name), every process of it
    /// merged, as perf's stackcollapse groups by command (the default
    /// without -p, -t or a command).
    #[arg(long, conflicts_with_all = ["per_process", "per_thread"])]
    pub per_program: bool,

    /// One root frame per process, its threads merged, in the
    /// flamegraphs and the report's table.
    #[arg(long, conflicts_with = "per_thread")]
    pub per_process: bool,

    /// One root frame per thread, in the flamegraphs and the report's
    /// table (the default with -p, -t or a command).
    #[arg(long)]
    pub per_thread: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct TopArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub blocks: BlockArgs,
    #[command(flatten)]
    pub maps: MapArgs,

    /// Seconds between refreshes, 1 to 60 (`+` and `-` change it).
    #[arg(long, value_name = "SECONDS", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub interval: u64,

    /// Start on the off-CPU side (`o` switches); without a terminal, the
    /// table printed each interval is then the off-CPU waits.
    #[arg(long)]
    pub off_cpu: bool,
}

#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// How long the demo workload runs, in seconds.
    #[arg(short = 'd', long = "duration", default_value = "5", value_parser = parse_duration)]
    pub duration: Duration,

    /// Output directory; earlier demo outputs in it are replaced.
    #[arg(short = 'o', long = "output", default_value = "fgbpf-demo")]
    pub output: PathBuf,
}

impl Default for CaptureArgs {
    fn default() -> Self {
        CaptureArgs {
            pids: Vec::new(),
            tids: Vec::new(),
            cgroup: None,
            unit: None,
            container: None,
            group_by: None,
            duration: None,
            output: None,
            user_only: false,
            kernel_only: false,
            no_python: false,
            no_java: false,
            no_node: false,
            no_ruby: false,
            no_php: false,
            no_perl: false,
            no_luajit: false,
            no_beam: false,
            no_go: false,
            label_frames: false,
            no_py_lines: false,
            formats: vec![Format::Svg, Format::Folded],
            symbols: SymbolArgs::default(),
            otlp: OtlpArgs::default(),
            quiet: false,
            json: false,
            user: None,
            btf: None,
            kill_at_end: false,
            command: Vec::new(),
        }
    }
}

/// A PID or TID; spaces around it are allowed (`-p "1, 2"`).
fn parse_id(s: &str) -> Result<u32, String> {
    let t = s.trim();
    match t.parse::<u32>() {
        Ok(0) | Err(_) => Err(format!("'{t}' is not a process or thread ID (a whole number above 0)")),
        Ok(id) => Ok(id),
    }
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if (1.0..=3600.0).contains(&secs) => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!("'{s}' is not an interval: give 1 to 3600 seconds")),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    // NaN fails `secs > 0.0` too.
    if secs.is_nan() || secs <= 0.0 || !secs.is_finite() {
        return Err(format!("the duration must be more than 0 seconds, not {s}"));
    }
    if secs > 7.0 * 24.0 * 3600.0 {
        return Err(format!(
            "{s} s is more than a week; omit -d and stop with Ctrl-C instead"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_state(s: &str) -> Result<String, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "sleeping" | "s" | "uninterruptible" | "d" | "runqueue" | "r" => {
            Ok(s.trim().to_ascii_lowercase())
        }
        _ => Err(format!(
            "unknown state '{s}': use sleeping, uninterruptible or runqueue (or S, D, R)"
        )),
    }
}

fn parse_frequency(s: &str) -> Result<u64, String> {
    let hz: i64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number of samples per second"))?;
    if hz <= 0 {
        return Err(format!("the frequency must be at least 1 Hz, not {s}"));
    }
    if hz as u64 > MAX_FREQUENCY {
        return Err(format!(
            "{hz} Hz is above the {MAX_FREQUENCY} Hz limit: faster timers would slow the host; 99 Hz is typical, 999 Hz for short captures"
        ));
    }
    Ok(hz as u64)
}

#[cfg(test)]
mod tests;
