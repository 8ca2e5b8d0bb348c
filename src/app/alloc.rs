//! `fgbpf alloc`: sample the C library's allocations by bytes
//! (src/probe/alloc.rs) and write the four heap views, alloc.pb.gz and
//! `report.txt` (src/format/alloc.rs).

use super::record;
use super::recording::Recording;
use super::summary::Outcome;
use super::CliError;
use crate::cli::AllocArgs;

pub fn run(args: &AllocArgs) -> Result<Outcome, CliError> {
    record::run(Recording::alloc(args)?)
}
