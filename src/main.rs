use clap::error::ErrorKind;
use clap::Parser;

use fgbpf::cli::{Cli, Command};
use fgbpf::cmd;

fn main() {
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
    let result = match &cli.command {
        Command::Oncpu(args) => cmd::oncpu::run(args).map(|_| ()),
        Command::Offcpu(args) => cmd::offcpu::run(args).map(|_| ()),
        Command::Wall(args) => cmd::wall::run(args).map(|_| ()),
        Command::Demo(args) => cmd::demo::run(args),
        Command::DemoWorkload { seconds } => {
            fgbpf::demo::run(*seconds);
            Ok(())
        }
        Command::Report(args) => cmd::report::run(args),
        Command::Flamegraph(args) => cmd::flamegraph::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Convert(args) => cmd::convert::run(args),
    };
    if let Err(e) = result {
        eprintln!("fgbpf: error: {e}");
        std::process::exit(e.code);
    }
}
