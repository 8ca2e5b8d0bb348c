//! `fgbpf events`'s options: the events to count stacks at, beside the
//! capture commands' targets, maps and root frames; and its `--help`
//! text, which says what an event costs.

use clap::Args;

use super::{CaptureArgs, MapArgs, RootArgs};

/// `fgbpf events --help`'s text.
pub(super) const EVENTS_ABOUT: &str = "Count stacks at tracepoints, uprobes, uretprobes or USDT probes: every hit is counted with its thread's user stack (walked as the capture commands walk it: .eh_frame tables, frame pointers, the runtimes' frames) and, at a tracepoint, its kernel stack. Each event's stacks sit under a root frame naming it. Outputs, targets and options are the capture commands'; the files are events.folded, events.svg, events.pb.gz (with --format pprof) and report.txt, weights in hits.\n\nCost, measured on this project's 2-CPU VM (scripts/bench/events_cost.py, docs/commands.md): the BPF program takes about 1 us per hit at a uprobe of a steady process and 2.8 us at a tracepoint (it also takes the kernel stack); a process's first hits, before its tables are read (an exec), up to ~40 us. A uprobe or USDT probe adds a breakpoint trap on every call of the probed function, in every process that runs it (only in the target with a single -p): about 12 us per call here (bpftrace's count() pays the same), so a function called 100,000 times a second costs more than a CPU. A tracepoint adds no trap. Hits that could not be stored in full (a map full) are counted and told in the summary with the option that raises the limit.";

/// `fgbpf events`: what to count stacks at.
#[derive(Debug, Args, Clone, Default)]
pub struct EventsArgs {
    /// An event to count: CATEGORY:NAME (a tracepoint, e.g. sched:sched_process_exec),
    /// u:PATH:SYMBOL (a uprobe), uret:PATH:SYMBOL (a uretprobe) or
    /// usdt:PATH:PROVIDER:NAME (a USDT probe; its semaphore is set while attached).
    /// Give several -e to count several at once.
    #[arg(short = 'e', long = "event", value_name = "EVENT", required = true)]
    pub events: Vec<String>,
    /// Weigh each hit by the probe's argument N instead of 1 (argN, N from
    /// 1; a uretprobe's return value whatever N; uprobes and USDT probes
    /// only): e.g. the bytes asked of a function taking a size.
    #[arg(long, value_name = "argN")]
    pub weight: Option<String>,
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub maps: MapArgs,
    #[command(flatten)]
    pub roots: RootArgs,
}
