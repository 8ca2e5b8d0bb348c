//! `fgbpf oncpu`: sample on-CPU stacks and write `oncpu.folded`,
//! `oncpu.svg` and `report.txt`.

use super::summary::Outcome;
use super::record::{self, Recording};
use super::CliError;
use crate::cli::OncpuArgs;

pub fn run(args: &OncpuArgs) -> Result<Outcome, CliError> {
    record::run(&Recording {
        capture: &args.capture,
        maps: &args.maps,
        sampling: Some(&args.sampling),
        blocks: None,
        per_process: false,
    })
}
