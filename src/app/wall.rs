//! `fgbpf wall`: on-CPU samples and off-CPU time over the same targets and
//! window, written as `oncpu.*`, `offcpu.*` and the combined wall-clock
//! view `wall.*`, in which both kinds of time share one unit and one tree.

use super::summary::Outcome;
use super::record::{self, Recording};
use super::CliError;
use crate::cli::WallArgs;

pub fn run(args: &WallArgs) -> Result<Outcome, CliError> {
    record::run(&Recording {
        capture: &args.capture,
        maps: &args.maps,
        sampling: Some(&args.sampling),
        blocks: Some(&args.blocks),
        per_process: args.per_process,
    })
}
