//! `fgbpf dump`: asks the `fgbpf flight` listening in `--dumps` for a dump
//! of its kept window, waits for it, and prints its directory.

use super::flight::control;
use super::CliError;
use crate::cli::DumpArgs;

pub fn run(args: &DumpArgs) -> Result<(), CliError> {
    let dir = control::ask(&args.dumps)?;
    println!("{}", dir.display());
    Ok(())
}
