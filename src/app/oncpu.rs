//! `fgbpf oncpu`: sample on-CPU stacks and write `oncpu.folded`,
//! `oncpu.svg` and `report.txt`.

use super::summary::Outcome;
use super::record;
use super::recording::Recording;
use super::CliError;
use crate::cli::OncpuArgs;

pub fn run(args: &OncpuArgs) -> Result<Outcome, CliError> {
    record::run(Recording::oncpu(args)?)
}
