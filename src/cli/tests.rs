//! Tests of the command-line parser (src/cli.rs).

use super::*;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("fgbpf").chain(args.iter().copied()))
}

#[test]
fn oncpu_defaults_and_lists() {
    let Command::Oncpu(a) = parse(&["oncpu", "-p", "1,2", "-t", "3"]).unwrap().command else {
        panic!()
    };
    assert_eq!(a.sampling.frequency, 99);
    assert_eq!(a.capture.pids, vec![1, 2]);
    assert_eq!(a.capture.tids, vec![3]);
    assert_eq!(a.capture.duration, None);
    assert!(a.capture.command.is_empty());
}

#[test]
fn command_after_double_dash() {
    let Command::Oncpu(a) = parse(&["oncpu", "-F", "999", "-d", "2.5", "--", "ls", "-l"])
        .unwrap()
        .command
    else {
        panic!()
    };
    assert_eq!(a.capture.command, vec!["ls", "-l"]);
    assert_eq!(a.capture.duration, Some(Duration::from_millis(2500)));
    assert_eq!(a.sampling.frequency, 999);
}

#[test]
fn bad_values_are_refused() {
    for bad in [
        &["oncpu", "-F", "0"][..],
        &["oncpu", "-F", "-5"],
        &["oncpu", "-F", "100000"],
        &["oncpu", "-d", "0"],
        &["oncpu", "-d", "-1"],
        &["oncpu", "-d", "nan"],
        &["oncpu", "--user-only", "--kernel-only"],
        &["oncpu", "-p", "1", "--", "ls"],
        &["oncpu", "-p", "x"],
        &["offcpu", "--state", "zombie"],
        &["offcpu", "--sample", "0"],
        &["wall", "--per-thread", "--per-process"],
        &["wall", "--per-program", "--per-thread"],
        &["oncpu", "--per-program", "--per-process"],
        &["offcpu", "--per-process", "--per-thread"],
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
    let err = parse(&["oncpu", "-F", "100000"]).unwrap_err().to_string();
    assert!(err.contains("10000 Hz"), "{err}");
}
