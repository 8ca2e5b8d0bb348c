//! Command-line definitions. Parsing only: checks that need the system
//! (do these processes exist, can that directory be written) live in
//! [`crate::cmd`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Highest sampling rate accepted: beyond it the timer interrupts alone
/// take a noticeable share of every CPU.
pub const MAX_FREQUENCY: u64 = 10_000;

#[derive(Debug, Parser)]
#[command(
    name = "fgbpf",
    version,
    about = "eBPF profiler: on-CPU flamegraphs from kernel-aggregated stack samples",
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
    /// Profile the built-in demo workload and write its outputs to ./fgbpf-demo/.
    Demo(DemoArgs),
    /// The demo workload itself (run by `fgbpf demo`).
    #[command(hide = true, name = "demo-workload")]
    DemoWorkload {
        #[arg(long, default_value = "5")]
        seconds: f64,
    },
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

#[derive(Debug, Args, Clone)]
pub struct CaptureArgs {
    /// Profile these processes (comma-separated PIDs) and all their threads.
    #[arg(short = 'p', long = "pid", value_delimiter = ',', value_name = "PID")]
    pub pids: Vec<u32>,

    /// Profile these threads only (comma-separated TIDs).
    #[arg(short = 't', long = "tid", value_delimiter = ',', value_name = "TID")]
    pub tids: Vec<u32>,

    /// Stop after this many seconds (default: until Ctrl-C, or until every
    /// target has exited).
    #[arg(short = 'd', long = "duration", value_name = "SECONDS", value_parser = parse_duration)]
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

    /// Output formats besides report.txt, comma-separated: svg, folded,
    /// pprof (.pb.gz), speedscope (.speedscope.json).
    #[arg(
        long = "format",
        value_delimiter = ',',
        value_name = "FORMATS",
        default_value = "svg,folded"
    )]
    pub formats: Vec<Format>,

    /// Start this command and profile it, its threads and its children
    /// until it exits.
    #[arg(last = true, value_name = "COMMAND", conflicts_with = "pids")]
    pub command: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct OncpuArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,

    /// Samples per second on each CPU.
    #[arg(short = 'F', long = "frequency", value_name = "HZ", default_value = "99", value_parser = parse_frequency)]
    pub frequency: u64,

    /// Also count samples of the idle task.
    #[arg(long)]
    pub include_idle: bool,

    /// Entries of the stack map: distinct user and kernel stacks kept.
    #[arg(long, value_name = "N", default_value = "16384", value_parser = clap::value_parser!(u32).range(64..=4_194_304))]
    pub max_stacks: u32,

    /// Entries of the counts map: distinct (thread, stack) pairs kept.
    #[arg(long, value_name = "N", default_value = "65536", value_parser = clap::value_parser!(u32).range(64..=16_777_216))]
    pub max_entries: u32,
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
            duration: None,
            output: None,
            user_only: false,
            kernel_only: false,
            formats: vec![Format::Svg, Format::Folded],
            command: Vec::new(),
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(secs > 0.0) || !secs.is_finite() {
        return Err(format!("the duration must be more than 0 seconds, not {s}"));
    }
    if secs > 7.0 * 24.0 * 3600.0 {
        return Err(format!(
            "{s} s is more than a week; omit -d and stop with Ctrl-C instead"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
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
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("fgbpf").chain(args.iter().copied()))
    }

    #[test]
    fn oncpu_defaults_and_lists() {
        let Command::Oncpu(a) = parse(&["oncpu", "-p", "1,2", "-t", "3"]).unwrap().command else {
            panic!()
        };
        assert_eq!(a.frequency, 99);
        assert_eq!(a.capture.pids, vec![1, 2]);
        assert_eq!(a.capture.tids, vec![3]);
        assert_eq!(a.capture.duration, None);
        assert!(a.capture.command.is_empty());
    }

    #[test]
    fn command_after_double_dash() {
        let Command::Oncpu(a) = parse(&["oncpu", "-F", "999", "-d", "2.5", "--", "ls", "-l"])
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(a.capture.command, vec!["ls", "-l"]);
        assert_eq!(a.capture.duration, Some(Duration::from_millis(2500)));
        assert_eq!(a.frequency, 999);
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            &["oncpu", "-F", "0"][..],
            &["oncpu", "-F", "-5"],
            &["oncpu", "-F", "100000"],
            &["oncpu", "-d", "0"],
            &["oncpu", "-d", "-1"],
            &["oncpu", "-d", "nan"],
            &["oncpu", "--user-only", "--kernel-only"],
            &["oncpu", "-p", "1", "--", "ls"],
            &["oncpu", "-p", "x"],
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
        let err = parse(&["oncpu", "-F", "100000"]).unwrap_err().to_string();
        assert!(err.contains("10000 Hz"), "{err}");
    }
}
