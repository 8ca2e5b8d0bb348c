//! `fgbpf offcpu`: measure where threads wait and why, and write
//! `offcpu.folded` (microseconds), `offcpu.svg` and `report.txt`.

use super::summary::Outcome;
use super::record;
use super::recording::Recording;
use super::CliError;
use crate::cli::OffcpuArgs;

pub fn run(args: &OffcpuArgs) -> Result<Outcome, CliError> {
    record::run(Recording::offcpu(args)?)
}
