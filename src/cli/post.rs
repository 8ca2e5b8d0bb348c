//! The arguments of the commands that work on profiles already on disk:
//! `report`, `flamegraph`, `diff` and `convert`, and the time range the
//! first three and `convert` can draw from a capture.

use std::path::PathBuf;

use clap::Args;

/// `fgbpf report`: the hotspots of a profile already on disk.
#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// A .folded file, or a capture directory: then its main view is read,
    /// wall.folded, else oncpu.folded, else offcpu.folded (else its only
    /// .folded file). Files named offcpu* or wall* count microseconds,
    /// others samples.
    #[arg(value_name = "INPUT")]
    pub input: PathBuf,

    /// Functions in each top list; each listed function shows its heaviest
    /// callees.
    #[arg(long, value_name = "N", default_value = "20", value_parser = clap::value_parser!(u64).range(1..))]
    pub top: u64,

    /// Print the report as JSON (schema: docs/report.schema.json).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub range: RangeArgs,

    /// Rank inlined functions (`_[i]`) on their own; by default their time
    /// is the time of the function they were inlined into.
    #[arg(long)]
    pub inlines: bool,

    /// List runtime plumbing (thread start, closures, the interpreter loop,
    /// syscall entry) and frames that pass all their time to one callee in
    /// "by total" too.
    #[arg(long)]
    pub all_frames: bool,
}

/// `fgbpf flamegraph`: re-render folded stacks.
#[derive(Debug, Args, Clone)]
pub struct FlamegraphArgs {
    /// Folded stacks, from fgbpf or another tool (stackcollapse-perf.pl,
    /// inferno, bcc -f), or a capture directory (its main view).
    #[arg(value_name = "INPUT.folded")]
    pub input: PathBuf,

    /// The SVG file to write.
    #[arg(short = 'o', long = "output", value_name = "OUT.svg")]
    pub output: PathBuf,

    /// Title (default: the kind of profile and the input's file name).
    #[arg(long, value_name = "T")]
    pub title: Option<String>,

    /// Omit frames narrower than this percentage of the total.
    #[arg(long, value_name = "PCT", default_value = "0.1", value_parser = parse_percent)]
    pub min_width: f64,

    /// Icicle layout: roots at the top, callees below.
    #[arg(long)]
    pub inverted: bool,

    /// One tower per thread (fgbpf's files only; the default for them,
    /// unless their capture drew them otherwise).
    #[arg(long, conflicts_with_all = ["per_process", "per_program"])]
    pub per_thread: bool,

    /// Merge the threads of each process (fgbpf's files only: lines that
    /// start PROCESS-PID;THREAD-TID;).
    #[arg(long, conflicts_with = "per_program")]
    pub per_process: bool,

    /// Merge every process of each program (process name) under one root,
    /// as a whole-host capture draws it (fgbpf's files only).
    #[arg(long)]
    pub per_program: bool,

    /// Keep only stacks whose line (frames joined by `;`, as in the file,
    /// without the count) matches this regex.
    #[arg(long, value_name = "REGEX")]
    pub grep: Option<String>,

    /// Drop stacks whose line matches this regex.
    #[arg(long, value_name = "REGEX")]
    pub exclude: Option<String>,

    #[command(flatten)]
    pub range: RangeArgs,
}

/// `fgbpf diff`: compare two profiles of the same workload.
#[derive(Debug, Args, Clone)]
pub struct DiffArgs {
    /// The baseline: a folded file, or a capture directory (its main view).
    #[arg(value_name = "BEFORE.folded")]
    pub before: PathBuf,

    /// The profile to compare with it, of the same kind (on-CPU with
    /// on-CPU, off-CPU with off-CPU).
    #[arg(value_name = "AFTER.folded")]
    pub after: PathBuf,

    /// Directory for diff.svg (AFTER's widths), diff-before.svg (BEFORE's
    /// widths) and regressions.txt; created if missing. Optional with
    /// --fail-above or --json.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Scale BEFORE to AFTER's total before comparing (in diff-before.svg,
    /// AFTER to BEFORE's), so that a longer or busier run is not all red.
    #[arg(long)]
    pub normalize: bool,

    /// List in regressions.txt the functions whose share of the total
    /// changed by more than this many percentage points.
    #[arg(long, value_name = "PCT", default_value = "5", value_parser = parse_percent)]
    pub threshold: f64,

    /// A CI gate: exit 1 when any function's share of the total (or of the
    /// self time) grew by more than PCT points, listing them on stderr;
    /// exit 2 when the two profiles cannot be compared.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub fail_above: Option<f64>,

    /// Print the comparison as JSON on stdout (schema:
    /// docs/diff.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `fgbpf convert`: folded stacks to another tool's format.
#[derive(Debug, Args, Clone)]
pub struct ConvertArgs {
    /// The profile to convert: a folded file (fgbpf's, perf's via
    /// stackcollapse, bpftrace's), or a capture directory.
    #[arg(value_name = "INPUT.folded")]
    pub input: PathBuf,

    /// The file to write: OUT.pb.gz for pprof, OUT.speedscope.json (or
    /// .json) for speedscope, OUT.folded for folded stacks.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,

    /// The format to write, when OUT's name does not say it.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Target>,

    #[command(flatten)]
    pub range: RangeArgs,
}

/// What `fgbpf convert` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    Folded,
    Pprof,
    Speedscope,
}

/// A range of a capture's time, drawn from the `.slices` file a capture
/// writes beside each `.folded` file.
#[derive(Debug, Args, Clone, Default)]
pub struct RangeArgs {
    /// Only what happened from S seconds into the capture (fractions
    /// allowed; needs the capture's VIEW.slices beside VIEW.folded).
    #[arg(long, value_name = "S", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub from: Option<f64>,

    /// Only what happened up to S seconds into the capture.
    #[arg(long, value_name = "S", value_parser = parse_seconds, allow_negative_numbers = true)]
    pub to: Option<f64>,
}

impl RangeArgs {
    pub fn is_set(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds (0 or more)")),
    }
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let pct: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage"))?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(format!("{s} is not a percentage between 0 and 100"));
    }
    Ok(pct)
}

