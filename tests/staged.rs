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

/// A system-wide capture of `pid` (`fgbpf CMD -d 3`): its stacks, what it
/// said, and its stacks from the moment fgbpf was reading the process.
struct Capture {
    stacks: Folded,
    summary: String,
    read: Folded,
    /// That moment, in s from the capture's time 0.
    from: f64,
}

/// `fgbpf CMD -d 3` of the whole machine into out_dir(test). fgbpf reads a
/// process's interpreter once the walkers have joined (the summary says
/// when, from the capture's time 0) and the binaries' tables are built (it
/// says how long that took); its stacks from the slice that begins one
/// sleep of nap.py (20 ms) after both are drawn again by `convert --from`.
fn system_wide(cmd: &str, pid: u32, test: &str) -> Capture {
    let dir = out_dir(test);
    let mut fg = fgbpf();
    fg.arg(cmd);
    if cmd == "oncpu" {
        fg.args(["-F", "499"]);
    }
    let out = run(fg.args(["-d", "3", "-o"]).arg(&dir));
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    let joined = joined_after(&summary).unwrap_or_else(|| panic!("the summary says when the walkers joined\n{summary}"));
    let built: u64 = number_between(&summary, " rows, built in ", " ms")
        .unwrap_or_else(|| panic!("the summary says how long the tables took\n{summary}"));
    let from = (joined + built + 20).div_ceil(100) as f64 / 10.0;
    let later = dir.with_extension("read.folded");
    let _ = std::fs::remove_file(&later);
    assert_ok(&run(fgbpf()
        .args(["convert", "--format", "folded", "--from", &from.to_string(), "-o"])
        .arg(&later)
        .arg(&dir)));
    let root = format!("-{pid}");
    let of_pid = |stacks: Folded| -> Folded {
        stacks.into_iter().filter(|(f, _)| f.first().is_some_and(|r| r.ends_with(&root))).collect()
    };
    Capture {
        stacks: of_pid(read_folded(&dir.join(format!("{cmd}.folded")))),
        read: of_pid(read_folded(&later)),
        summary,
        from,
    }
}

impl Capture {
    /// The least share of a steady workload's time (busy.py's CPU, nap.py's
    /// sleeps) the slice from [`Capture::from`] to the end of the 3 s holds:
    /// three quarters of its length's share. How soon the walkers join
    /// depends on the machine's load (the second load's verification is most
    /// of it); that they walk all that follows, and lose none of it, does
    /// not. A join later than 2.7 s leaves too little to test, and fails.
    fn tail_share(&self) -> f64 {
        assert!(self.from <= 2.7, "the walkers joined {} s into a 3 s capture\n{}", self.from, self.summary);
        0.75 * (3.0 - self.from) / 3.0
    }
}

/// The summary's line for the staged start: how long after the capture began
/// the walkers joined, in ms.
fn joined_after(summary: &str) -> Option<u64> {
    number_between(summary, "their walkers joined ", " ms after the capture began")
}

/// The summary's line for the Python process `pid`.
fn python_line(summary: &str, pid: u32) -> &str {
    summary
        .lines()
        .find(|l| l.contains(&format!("Python: pid {pid} ")))
        .unwrap_or_else(|| panic!("no line for pid {pid}\n{summary}"))
}

#[test]
fn a_system_wide_capture_names_python_once_its_walker_joins_and_says_what_came_before() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let python = start("busy.py");
    let pid = python.0.id();
    let c = system_wide("oncpu", pid, "staged_python");
    drop(python);
    let (all, summary) = (total(&c.stacks), &c.summary);
    assert!(all > 1000, "{all} samples of the busy Python process in 3 s at 499 Hz\n{summary}");
    // Every sample from then on is walked: under outer, and mostly in inner
    // (outer's own share, its clock reads, is 0.4-1.8% here).
    let read = total(&c.read);
    let walked = weight_in_order_prefixed(&c.read, &["<module> (busy.py:", "outer (busy.py:"]);
    let inner = pct(weight_in_order_prefixed(&c.read, &["outer (busy.py:", "inner (busy.py:"]), read);
    eprintln!("from {} s: {walked} of {read} samples under outer, {inner:.1}% in inner; {all} in all", c.from);
    assert!(read as f64 >= c.tail_share() * all as f64, "{read} of {all} samples from {} s", c.from);
    assert_eq!(walked, read, "samples from {} s not under outer\n{summary}", c.from);
    assert!(inner >= 90.0, "{inner:.1}% of the samples from {} s in outer;inner\n{summary}", c.from);
    // The sampler ran before the walkers joined, at once: what it recorded
    // then is counted, in the summary and in the interpreter's line.
    assert!(summary.contains("before then show the runtimes' native frames only"), "{summary}");
    let line = python_line(summary, pid);
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
    let c = system_wide("offcpu", pid, "staged_python_nap");
    drop(python);
    let sleeps = |stacks: &Folded| -> Folded {
        stacks
            .iter()
            .filter(|(f, _)| f.iter().any(|x| x.contains("clock_nanosleep")))
            .filter(|(f, _)| !f.iter().any(|x| x == "[blocked before capture]"))
            .cloned()
            .collect()
    };
    let (all, read) = (sleeps(&c.stacks), sleeps(&c.read));
    let everything = total(&all);
    assert!(everything > 2_000_000, "the sleeping thread's off-CPU time: {everything} us\n{}", c.summary);
    let under = |stacks: &Folded| weight_in_order_prefixed(stacks, &["nap (nap.py:", "__GI___clock_nanosleep"]);
    let (late, walked) = (total(&read), under(&read));
    eprintln!("from {} s: {walked} of {late} us of sleeps under nap; {everything} us in all", c.from);
    assert!(late as f64 >= c.tail_share() * everything as f64, "{late} of {everything} us from {} s", c.from);
    // Every sleep from then on is under nap; those before are native frames
    // only, and said to be.
    assert_eq!(walked, late, "sleeps from {} s without nap\n{}", c.from, c.summary);
    let unwalked = everything - under(&all);
    let line = python_line(&c.summary, pid);
    assert!(unwalked == 0 || line.contains("taken before fgbpf was reading the interpreter"), "{unwalked} us unwalked: {line}");
}
