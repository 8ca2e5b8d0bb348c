//! The `fgbpf` command: parses the command line and runs one subcommand
//! of [`fgbpf::app`], turning its error into one line and an exit code.

use clap::error::ErrorKind;
use clap::Parser;

use fgbpf::cli::{Cli, Command};
use fgbpf::app;

fn main() {
    // Blocks of 256 KB and more (the tables a capture's end builds and
    // frees) get mappings of their own, given back to the system when
    // freed. Left to itself glibc raises this threshold each time such a
    // block is freed, then serves the next ones from its heap, which it
    // keeps: memory the end no longer uses would stay resident.
    // SAFETY: sets an allocator parameter before any thread starts.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024) };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        Err(e) => {
            // One line, not clap's usage block: the message already names
            // the argument, and --help is one command away.
            let text = e.render().to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("fgbpf: error: {first} (see fgbpf --help)");
            std::process::exit(2);
        }
    };
    // A capture of `-- COMMAND` exits with the command's status, as perf
    // and strace do.
    let status = |o: app::summary::Outcome| match o.command_status {
        Some(code) if code != 0 => std::process::exit(code.clamp(1, 255)),
        _ => (),
    };
    let result = match &cli.command {
        Command::Oncpu(args) => app::oncpu::run(args).map(status),
        Command::Offcpu(args) => app::offcpu::run(args).map(status),
        Command::Events(args) => app::events::run(args).map(status),
        Command::Alloc(args) => app::alloc::run(args).map(status),
        Command::Wall(args) => app::wall::run(args).map(status),
        Command::Flight(args) => app::flight::run(args).map(|code| {
            if let Some(code) = code.filter(|&c| c != 0) {
                std::process::exit(code.clamp(1, 255))
            }
        }),
        Command::Dump(args) => app::dump::run(args),
        Command::Top(args) => app::top::run(args).map(|code| {
            if let Some(code) = code.filter(|&c| c != 0) {
                std::process::exit(code.clamp(1, 255))
            }
        }),
        Command::Demo(args) => app::demo::run(args),
        Command::DemoWorkload { seconds } => {
            fgbpf::demo::run(*seconds);
            Ok(())
        }
        Command::Report(args) => app::report::run(args),
        Command::Flamegraph(args) => app::flamegraph::run(args),
        Command::Diff(args) => app::diff::run(args),
        Command::Convert(args) => app::convert::run(args),
        Command::Completions { shell } => app::docs::completions(*shell),
        Command::Man => app::docs::man(),
    };
    if let Err(e) = result {
        match e.verdict {
            true => eprintln!("fgbpf: {e}"),
            false => eprintln!("fgbpf: error: {e}"),
        }
        std::process::exit(e.code);
    }
}
