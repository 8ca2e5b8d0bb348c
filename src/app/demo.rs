//! `fgbpf demo`: profiles the built-in workload with `fgbpf wall` into
//! `./fgbpf-demo/`: CPU, off-CPU and wall-clock flamegraphs and a report.

use std::fs;

use super::{wall, CliError};
use crate::cli::{CaptureArgs, DemoArgs, SamplingArgs, WallArgs};

pub fn run(args: &DemoArgs) -> Result<(), CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find fgbpf's own binary: {e}")))?;
    // The demo is meant to be re-run: replace its own earlier outputs.
    if let Ok(entries) = fs::read_dir(&args.output) {
        for e in entries.flatten() {
            let _ = fs::remove_file(e.path());
        }
    }
    let wall_args = WallArgs {
        capture: CaptureArgs {
            output: Some(args.output.clone()),
            command: vec![
                exe.display().to_string(),
                "demo-workload".into(),
                "--seconds".into(),
                args.duration.as_secs_f64().to_string(),
            ],
            ..Default::default()
        },
        sampling: SamplingArgs {
            frequency: 499,
            include_idle: false,
        },
        ..Default::default()
    };
    wall::run(&wall_args)?;
    eprintln!(
        "fgbpf: open {dir}/wall.svg (and oncpu.svg, offcpu.svg) in a browser; the numbers are in {dir}/report.txt",
        dir = args.output.display()
    );
    Ok(())
}
