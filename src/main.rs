use clap::Parser;

use fgbpf::cli::{Cli, Command};
use fgbpf::cmd;

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Oncpu(args) => cmd::oncpu::run(args).map(|_| ()),
        Command::Demo(args) => cmd::demo::run(args),
        Command::DemoWorkload { seconds } => {
            fgbpf::demo::run(*seconds);
            Ok(())
        }
    };
    if let Err(e) = result {
        eprintln!("fgbpf: error: {e}");
        std::process::exit(e.code);
    }
}
