//! A system-wide capture starts in two stages (src/probe/staged.rs): it
//! samples by frame pointers at once, and the `.eh_frame` walker and the
//! runtimes' walkers join a moment later, loaded second. These tests start
//! a Python process first, then capture the whole machine, as a user on a
//! busy server would, and check that the walkers did join (the program
//! the sampler calls from then on), that what was recorded before is said,
//! and that the off-CPU switch-out path joins too.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PYTHON: &str = "/usr/bin/python3.11";

type Folded = Vec<(Vec<String>, u64)>;

fn start(name: &str) -> KillOnDrop {
    let mut child: Child = Command::new(PYTHON)
        .arg(Path::new(ROOT).join("tests/workloads/python").join(name))
        .arg("60")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "{name} did not start");
    KillOnDrop(child)
}

/// `fgbpf CMD -d 3` of the whole machine: its folded stacks of `pid` and
/// what it said.
fn system_wide(cmd: &str, pid: u32, test: &str) -> (Folded, String) {
    let dir = out_dir(test);
    let mut fg = fgbpf();
    fg.arg(cmd);
    if cmd == "oncpu" {
        fg.args(["-F", "499"]);
    }
    let out = run(fg.args(["-d", "3", "-o"]).arg(&dir));
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    let root = format!("-{pid}");
    let stacks = read_folded(&dir.join(format!("{cmd}.folded")))
        .into_iter()
        .filter(|(f, _)| f.first().is_some_and(|r| r.ends_with(&root)))
        .collect();
    (stacks, summary)
}

/// The summary's line for the staged start: how long after sampling began
/// the walkers joined, in ms.
fn joined_after(summary: &str) -> Option<u64> {
    let rest = summary.split("their walkers joined ").nth(1)?;
    rest.split(" ms after sampling began").next()?.parse().ok()
}

#[test]
fn a_system_wide_capture_names_python_once_its_walker_joins_and_says_what_came_before() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let python = start("busy.py");
    let pid = python.0.id();
    let (stacks, summary) = system_wide("oncpu", pid, "staged_python");
    drop(python);
    let all = total(&stacks);
    let named = pct(weight_in_order_prefixed(&stacks, &["outer (busy.py:", "inner (busy.py:"]), all);
    eprintln!("{named:.1}% of the Python process's {all} samples in outer;inner\n{summary}");
    assert!(all > 1000, "{all} samples of the busy Python process in 3 s at 499 Hz\n{summary}");
    assert!(named >= 90.0, "{named:.1}% of {all} samples in outer;inner\n{summary}");
    // The sampler ran before the walkers joined, at once: what it recorded
    // then is counted, in the summary and in the interpreter's line.
    let after = joined_after(&summary);
    assert!(after.is_some(), "the summary says when the runtimes' walkers joined\n{summary}");
    assert!(summary.contains("before then show the runtimes' native frames only"), "{summary}");
    let line = summary
        .lines()
        .find(|l| l.contains(&format!("Python: pid {pid} ")))
        .unwrap_or_else(|| panic!("no line for pid {pid}\n{summary}"));
    assert!(line.contains("taken before fgbpf was reading the interpreter"), "{line}");
}

#[test]
fn a_system_wide_off_cpu_capture_walks_python_at_switch_out_once_its_walker_joins() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let python = start("nap.py");
    let pid = python.0.id();
    let (stacks, summary) = system_wide("offcpu", pid, "staged_python_nap");
    drop(python);
    let sleeps: Folded = stacks.into_iter().filter(|(f, _)| f.iter().any(|x| x.contains("clock_nanosleep"))).collect();
    let all = total(&sleeps);
    let under = pct(weight_in_order_prefixed(&sleeps, &["nap (nap.py:", "__GI___clock_nanosleep"]), all);
    eprintln!("{under:.1}% of {all} us of sleeps under nap");
    assert!(all > 2_000_000, "the sleeping thread's off-CPU time: {all} us\n{summary}");
    // Sleeps of 20 ms: only those begun before the walkers joined lack it.
    assert!(under >= 90.0, "{under:.1}% of {all} us of sleeps under nap\n{summary}");
}
