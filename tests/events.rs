//! `fgbpf events` against real BPF: a tracepoint, a uprobe and a USDT
//! probe, each hit a known number of times.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Stacks' weight whose frames hold `frames` in order (not necessarily
/// adjacent).
fn weight_through(stacks: &[(Vec<String>, u64)], frames: &[&str]) -> u64 {
    stacks
        .iter()
        .filter(|(f, _)| {
            let mut at = 0;
            for want in frames {
                match f[at..].iter().position(|x| x.starts_with(want)) {
                    Some(i) => at += i + 1,
                    None => return false,
                }
            }
            true
        })
        .map(|(_, w)| w)
        .sum()
}

/// The hits fgbpf's summary says it counted for `event`.
fn hits_said(stderr: &str, event: &str) -> u64 {
    let line = stderr.lines().find(|l| l.contains("events: ")).unwrap_or_else(|| panic!("no events line in {stderr}"));
    let after = line.split(&format!("{event}: ")).nth(1).unwrap_or_else(|| panic!("{event} not in {line}"));
    after.split_whitespace().next().unwrap().parse().unwrap()
}

/// Waits for a line starting with `word` on a workload's stdout.
fn wait_for(out: &mut BufReader<ChildStdout>, word: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the workload ended before saying {word:?}");
        if line.starts_with(word) {
            return;
        }
    }
}

fn spawn_piped(cmd: &mut Command) -> (Child, BufReader<ChildStdout>) {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

#[test]
fn exec_tracepoint_counts_each_execve_of_a_shell_loop_exactly() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("events-exec");
    let out = run(fgbpf()
        .args(["events", "-e", "sched:sched_process_exec", "-o"])
        .arg(&dir)
        .args(["--", "sh", "-c", "for i in $(seq 1000); do /bin/true; done"]));
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stacks = read_folded(&dir.join("events.folded"));
    // Every stack is under the event's root frame, then the process.
    assert!(stacks.iter().all(|(f, _)| f[0] == "[sched:sched_process_exec]"), "{stacks:?}");
    let of_true: u64 = stacks.iter().filter(|(f, _)| f[1].starts_with("true-")).map(|(_, w)| w).sum();
    assert_eq!(of_true, 1000, "execs of /bin/true");
    // The rest is the loop's one `seq`; the summary says every hit.
    assert_eq!(total(&stacks), 1001, "{stacks:?}");
    assert_eq!(hits_said(&stderr, "sched:sched_process_exec"), 1001);
    // Each was caught in execve: the kernel's frames of the call, under the
    // new image's entry (the shell's frames are gone at this tracepoint).
    let in_execve = weight_through(&stacks, &["_start", "__x64_sys_execve_[k]", "bprm_execve_[k]"]);
    assert_eq!(in_execve, 1001, "stacks through execve");
}

/// `fgbpf events -e u:calls:target` (with `extra` options) on the calls
/// workload while it makes `a` calls from caller_a and `b` from caller_b
/// (caller_a passing 0..a, caller_b three times 0..b): the stacks and
/// the hits the summary said.
fn calls_captured(a: u64, b: u64, extra: &[&str], name: &str) -> (Vec<(Vec<String>, u64)>, u64) {
    let bin = plain_workload("calls");
    let (mut child, mut out) = spawn_piped(Command::new(&bin).args([a.to_string(), b.to_string()]));
    wait_for(&mut out, "ready");
    let dir = out_dir(name);
    let event = format!("u:{}:target", bin.display());
    let capture = spawn_attached(fgbpf()
        .args(["events", "-e", &event])
        .args(extra)
        .args(["-p", &child.id().to_string(), "-d", "30", "-o"])
        .arg(&dir));
    let since = Instant::now();
    child.stdin.as_mut().unwrap().write_all(b"go").unwrap();
    wait_for(&mut out, "done");
    capture.signal(libc::SIGINT);
    let res = capture.finish_by(since, Duration::from_secs(60));
    drop(child.stdin.take());
    child.wait().ok();
    assert_ok(&res);
    (read_folded(&dir.join("events.folded")), hits_said(&String::from_utf8_lossy(&res.stderr), &event))
}

#[test]
fn uprobe_counts_each_call_split_by_caller() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (a, b) = (200_000u64, 100_000u64);
    let (stacks, said) = calls_captured(a, b, &[], "events-uprobe");
    let (got_a, got_b) = (weight_through(&stacks, &["main", "caller_a", "target"]), weight_through(&stacks, &["main", "caller_b", "target"]));
    eprintln!("caller_a {got_a} of {a}, caller_b {got_b} of {b}, total {}", total(&stacks));
    for (got, want, who) in [(got_a, a, "caller_a"), (got_b, b, "caller_b")] {
        assert!(got.abs_diff(want) * 100 <= want, "{who}: {got} calls counted, {want} made");
    }
    assert_eq!(total(&stacks), got_a + got_b, "stacks not under either caller: {stacks:?}");
    assert_eq!(said, total(&stacks));
}

#[test]
fn weight_by_an_argument_sums_it_per_caller() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (a, b) = (20_000u64, 10_000u64);
    let (stacks, said) = calls_captured(a, b, &["--weight", "arg1"], "events-weight");
    let got_a = weight_through(&stacks, &["main", "caller_a", "target"]);
    let got_b = weight_through(&stacks, &["main", "caller_b", "target"]);
    assert_eq!((got_a, got_b), (a * (a - 1) / 2, 3 * b * (b - 1) / 2), "weights under caller_a and caller_b");
    // The summary still counts hits.
    assert_eq!(said, a + b);
    // A tracepoint's fields are not read: refused, saying so.
    let refused = run(fgbpf().args(["events", "-e", "sched:sched_process_exec", "--weight", "arg1", "-d", "1"]));
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("tracepoint"));
}

#[test]
fn usdt_function_entry_matches_bpftrace_on_the_same_process() {
    if !require_root() {
        return;
    }
    let python = std::path::Path::new("/usr/bin/python3.11");
    let bpftrace = on_path("bpftrace").expect("bpftrace is not installed: run scripts/test.sh, which installs it");
    assert!(python.exists(), "no /usr/bin/python3.11 (Debian's python3.11): run scripts/test.sh, which installs it");
    let _serial = serial();
    let n = 20_000u64;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/workloads/python/calls.py");
    let (mut child, mut out) = spawn_piped(Command::new(python).args([script, &n.to_string()]));
    wait_for(&mut out, "ready");
    let pid = child.id();
    let probe = "usdt:/usr/bin/python3.11:python:function__entry";
    let mut bt = Command::new(bpftrace)
        .args(["-e", &format!("{probe} /pid == {pid}/ {{ @ = count(); }}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut bt_out = BufReader::new(bt.stdout.take().unwrap());
    wait_for(&mut bt_out, "Attaching");
    let dir = out_dir("events-usdt");
    let capture = spawn_attached(fgbpf()
        .args(["events", "-e", probe, "-p", &pid.to_string(), "-d", "60", "-o"])
        .arg(&dir));
    // bpftrace says "Attaching" before its probes are in: both are in
    // long before this.
    std::thread::sleep(Duration::from_secs(1));
    let since = Instant::now();
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    wait_for(&mut out, "done");
    capture.signal(libc::SIGINT);
    // SAFETY: a plain syscall to this test's own child.
    unsafe { libc::kill(bt.id() as i32, libc::SIGINT) };
    let res = capture.finish_by(since, Duration::from_secs(60));
    let mut bt_text = String::new();
    std::io::Read::read_to_string(&mut bt_out, &mut bt_text).unwrap();
    bt.wait().ok();
    drop(child.stdin.take());
    child.wait().ok();
    assert_ok(&res);
    let bt_count: u64 = bt_text
        .lines()
        .find_map(|l| l.strip_prefix("@: "))
        .unwrap_or_else(|| panic!("no count from bpftrace: {bt_text:?}"))
        .trim()
        .parse()
        .unwrap();
    let stacks = read_folded(&dir.join("events.folded"));
    let ours = total(&stacks);
    eprintln!("fgbpf {ours}, bpftrace {bt_count}");
    assert_eq!(ours, bt_count, "fgbpf's count against bpftrace's");
    assert_eq!(hits_said(&String::from_utf8_lossy(&res.stderr), probe), ours);
    // Each leaf() entry under its caller, named by the Python walker.
    for outer in ["outer_a", "outer_b"] {
        let got = weight_through(&stacks, &[outer, "leaf (calls.py"]);
        assert_eq!(got, n, "leaf() entries under {outer}: {stacks:?}");
    }
}
