//! `fgbpf events`: count stacks at tracepoints, uprobes and USDT probes
//! (src/probe/points.rs) and write `events.folded`, `events.svg` and
//! `report.txt`, one root frame per event.

use super::summary::Outcome;
use super::record;
use super::recording::Recording;
use super::CliError;
use crate::cli::EventsArgs;

pub fn run(args: &EventsArgs) -> Result<Outcome, CliError> {
    record::run(Recording::events(args)?)
}
