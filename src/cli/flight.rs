//! `fgbpf flight`'s options: the flight recorder keeps the recent past of
//! the capture commands' recording and writes it out on demand.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{BlockArgs, CaptureArgs, MapArgs, SamplingArgs};

/// The capture commands' options; sampling at 49 Hz by default instead of
/// 99, for a recorder that runs for weeks.
#[derive(Debug, Args, Clone)]
#[command(mut_arg("frequency", |a| a.default_value("49")))]
pub struct FlightArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub blocks: BlockArgs,
    #[command(flatten)]
    pub maps: MapArgs,

    /// How much of the recent past is kept, and written by a dump: e.g.
    /// 10m, 90s, 1h (10 s to 24 h). Older time is forgotten.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_keep)]
    pub keep: Duration,

    /// fgbpf's own memory ceiling, in MB (resident, dumps included): when
    /// the kept past and what a dump needs on top of it would pass it, the
    /// oldest of the past is dropped before --keep is up, and the dumps
    /// and the log say how much is kept.
    #[arg(long, value_name = "MB", default_value_t = 200, value_parser = clap::value_parser!(u64).range(32..=1_000_000))]
    pub max_memory: u64,

    /// The directory dumps are written in, one capture directory each
    /// (made readable by root only when fgbpf creates it).
    #[arg(long, value_name = "DIR", default_value = "fgbpf-dumps")]
    pub dumps: PathBuf,

    /// At most this many dumps kept: past it, the oldest dump this
    /// recorder wrote is removed.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_dumps: u32,

    /// Dump by itself when one process uses more than PCT percent of a CPU
    /// (100: a whole CPU) for --cpu-for seconds.
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cpu_above: Option<u32>,

    /// How long a process stays above --cpu-above before the dump is
    /// asked for, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub cpu_for: u64,

    /// Dump by itself when a process of this name starts (its name as ps
    /// shows it, up to 15 characters; repeat for more names).
    #[arg(long, value_name = "NAME")]
    pub on_start: Vec<String>,

    /// Dump by itself when one thread's wait off the CPU lasts this long:
    /// e.g. 2s, 500ms (1 ms to 1 h), any thread of the targets (scope it
    /// with -p or --cgroup: on a whole host, idle threads wait for long).
    #[arg(long, value_name = "DURATION", value_parser = parse_wait)]
    pub wait_above: Option<Duration>,

    /// How long after a trigger fires its dump is written, in seconds: the
    /// dump then holds what led to it and this much of what followed.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub after: u64,

    /// The least time between two dumps of one trigger: e.g. 10m (10 s to
    /// 24 h).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_keep)]
    pub cooldown: Duration,
}

/// `fgbpf dump`: asks a running `fgbpf flight` for a dump.
#[derive(Debug, Args, Clone)]
pub struct DumpArgs {
    /// The recorder's --dumps directory, where it listens.
    #[arg(long, value_name = "DIR", default_value = "fgbpf-dumps")]
    pub dumps: PathBuf,
}

/// A wait's length of 1 ms to 1 h (`--wait-above`): a number with `ms`,
/// `s` or `m` (seconds without one).
fn parse_wait(s: &str) -> Result<Duration, String> {
    let secs = seconds(s, &[("ms", 0.001), ("s", 1.0), ("m", 60.0)], "2s or 500ms")?;
    if !(0.001..=3600.0).contains(&secs) {
        return Err(format!("--wait-above {s}: give between 1 ms and 1 h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration of 10 s to 24 h (`--keep`, `--cooldown`): a number with `s`, `m` or `h` (seconds
/// without one).
pub(super) fn parse_keep(s: &str) -> Result<Duration, String> {
    let secs = seconds(s, &[("s", 1.0), ("m", 60.0), ("h", 3600.0)], "10m, 90s or 1h")?;
    if !(10.0..=86_400.0).contains(&secs) {
        return Err(format!("--keep {s}: keep between 10 s and 24 h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The seconds `s` stands for: a finite number, followed by the first of
/// `units` (suffix, seconds each) it ends with, or none (seconds).
fn seconds(s: &str, units: &[(&str, f64)], example: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, unit) = units
        .iter()
        .find_map(|&(suffix, secs)| t.strip_suffix(suffix).map(|n| (n, secs)))
        .unwrap_or((t, 1.0));
    number
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .map(|n| n * unit)
        .ok_or_else(|| format!("'{s}' is not a duration: write e.g. {example}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_lengths_take_ms_s_and_m() {
        assert_eq!(parse_wait("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_wait("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_wait("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_wait("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_wait("0.5ms").is_err(), "under 1 ms");
        assert!(parse_wait("2h").is_err(), "h is not a unit here");
        assert!(parse_wait("nan").is_err());
    }

    #[test]
    fn kept_durations_take_s_m_and_h_only() {
        assert_eq!(parse_keep("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_keep("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_keep("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_keep("30"), Ok(Duration::from_secs(30)));
        assert!(parse_keep("15000ms").is_err(), "ms is not a unit here");
        assert!(parse_keep("5s").is_err(), "under 10 s");
    }
}
