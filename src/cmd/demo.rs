//! `fgbpf demo`: profiles the built-in workload into `./fgbpf-demo/`.

use std::fs;

use super::{oncpu, CliError};
use crate::cli::{CaptureArgs, DemoArgs, OncpuArgs};

pub fn run(args: &DemoArgs) -> Result<(), CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find fgbpf's own binary: {e}")))?;
    // The demo is meant to be re-run: replace its own earlier outputs.
    if let Ok(entries) = fs::read_dir(&args.output) {
        for e in entries.flatten() {
            let _ = fs::remove_file(e.path());
        }
    }
    let oncpu_args = OncpuArgs {
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
        frequency: 499,
        include_idle: false,
        max_stacks: 16384,
        max_entries: 65536,
    };
    oncpu::run(&oncpu_args)?;
    eprintln!(
        "fgbpf: open {}/oncpu.svg in a browser",
        args.output.display()
    );
    Ok(())
}
