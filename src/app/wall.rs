//! `fgbpf wall`: on-CPU samples and off-CPU time over the same targets and
//! window, written as `oncpu.*`, `offcpu.*` and the combined wall-clock
//! view `wall.*`, in which both kinds of time share one unit and one tree.

use super::summary::Outcome;
use super::record;
use super::recording::Recording;
use super::CliError;
use crate::cli::WallArgs;

pub fn run(args: &WallArgs) -> Result<Outcome, CliError> {
    record::run(Recording::wall(args)?)
}
