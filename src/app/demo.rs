//! `fgbpf demo`: profiles the built-in workload with `fgbpf wall` into
//! `./fgbpf-demo/`: CPU, off-CPU and wall-clock flamegraphs and a report.

use std::fs;

use crate::format::outputs::output_names;
use super::{wall, CliError};
use crate::format::sidecar;
use crate::cli::{CaptureArgs, DemoArgs, SamplingArgs, WallArgs};

pub fn run(args: &DemoArgs) -> Result<(), CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find fgbpf's own binary: {e}")))?;
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
    // The demo is meant to be re-run: replace its own earlier outputs, by
    // their exact names and only where they are plain files. Nothing else
    // in the directory is touched, whatever it is.
    let mut names = output_names(&["oncpu", "offcpu", "wall"], &wall_args.capture.formats);
    names.push(sidecar::FILE.to_string());
    for name in &names {
        let path = args.output.join(name);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
            fs::remove_file(&path).map_err(|e| {
                CliError::usage(format!("cannot replace {}: {e}", path.display()))
            })?;
        }
    }
    wall::run(&wall_args)?;
    eprintln!(
        "fgbpf: open {dir}/wall.svg (and oncpu.svg, offcpu.svg) in a browser; the numbers are in {dir}/report.txt",
        dir = args.output.display()
    );
    Ok(())
}
