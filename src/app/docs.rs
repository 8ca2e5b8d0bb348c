//! `fgbpf completions SHELL` and `fgbpf man`: shell completions and the man
//! page, generated from the same clap definitions the parser uses, so they
//! can never disagree with it.

use std::io::Write;

use clap::CommandFactory;

use super::CliError;
use crate::cli::Cli;

pub fn completions(shell: clap_complete::Shell) -> Result<(), CliError> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "fgbpf", &mut out);
    super::post::print(&String::from_utf8_lossy(&out))
}

pub fn man() -> Result<(), CliError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .and_then(|_| out.flush())
        .map_err(|e| CliError::failed(format!("rendering the man page: {e}")))?;
    super::post::print(&String::from_utf8_lossy(&out))
}
