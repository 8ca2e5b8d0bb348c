//! Waits that began before the capture (src/probe/seeds.rs): threads
//! already blocked when `fgbpf offcpu` starts are drawn with the user stack
//! they wait in, walked from the registers the kernel saved for them, as
//! a server's idle master and workers are met in an incident. Each is
//! checked against gdb's backtrace of the same thread, taken after the
//! capture (gdb stops the process; fgbpf must not have). The programs are
//! what users run: Debian's `sleep` and nginx (stripped, as shipped), and
//! a `gcc -O2` program.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::*;

/// A process started before the capture, blocked from its first moments.
fn started(cmd: &mut Command, ready_line: bool) -> KillOnDrop {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    if ready_line {
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
    }
    // Long enough to be blocked, whatever it did first.
    std::thread::sleep(std::time::Duration::from_millis(300));
    KillOnDrop(child)
}

/// gdb's backtrace of every thread of `pid` (`thread apply all bt`), each
/// innermost first, by function name.
fn gdb_threads(pid: u32) -> Vec<Vec<String>> {
    let out = Command::new("gdb")
        .args(["-p", &pid.to_string(), "-batch", "-ex", "thread apply all bt"])
        .output()
        .unwrap();
    let mut threads: Vec<Vec<String>> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(rest) = line.strip_prefix('#') else { continue };
        let (n, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let rest = rest.trim_start();
        // "0x... in NAME (...)" or "NAME (...) at FILE:LINE".
        let rest = rest.split_once(" in ").filter(|(a, _)| a.starts_with("0x")).map_or(rest, |(_, r)| r);
        let name = rest.split(" (").next().unwrap_or("").to_string();
        if n == "0" {
            threads.push(Vec::new());
        }
        if let Some(t) = threads.last_mut() {
            t.push(name);
        }
    }
    threads
}

/// The user frames of a `[blocked before capture]` stack, outermost
/// first, an inlined frame's marker taken off as gdb names it.
fn user_frames(frames: &[String]) -> Vec<String> {
    let at = frames.iter().position(|f| f == "[blocked before capture]").expect("a wait from before the capture");
    frames[at + 1..]
        .iter()
        .take_while(|f| !f.ends_with("_[k]") && !f.starts_with('['))
        .map(|f| f.strip_suffix("_[i]").unwrap_or(f).to_string())
        .collect()
}

/// `fgbpf offcpu -p PIDS -d 2`: the folded stacks and the summary.
fn capture(pids: &[u32], test: &str) -> (Vec<(Vec<String>, u64)>, String) {
    let dir = out_dir(test);
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let out = run(fgbpf().args(["offcpu", "-d", "2", "-p", &list.join(","), "-o"]).arg(&dir));
    assert_ok(&out);
    (read_folded(&dir.join("offcpu.folded")), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Each thread of `pid` that gdb shows: one stack of fgbpf's, blocked from
/// before the capture for all of it, whose user frames end with gdb's (gdb
/// stops at main; fgbpf goes on to `_start`, or `clone3` for a thread);
/// its first frame is one of `roots`.
fn check_against_gdb(stacks: &[(Vec<String>, u64)], pid: u32, roots: &[&str]) {
    let ours: Vec<(Vec<String>, u64)> = stacks
        .iter()
        .filter(|(f, _)| f.first().is_some_and(|p| p.ends_with(&format!("-{pid}"))))
        .map(|(f, w)| (user_frames(f), *w))
        .collect();
    let theirs = gdb_threads(pid);
    assert!(!theirs.is_empty(), "gdb read no thread of {pid}");
    for gdb in &theirs {
        let want: Vec<String> = gdb.iter().rev().cloned().collect();
        let found = ours.iter().find(|(f, _)| f.ends_with(&want));
        let Some((frames, us)) = found else {
            panic!("no stack of pid {pid} ends with gdb's {want:?}\nfgbpf's: {ours:?}");
        };
        eprintln!("pid {pid}: {} ({us} us); gdb: {}", frames.join(";"), want.join(";"));
        assert!(roots.contains(&frames[0].as_str()), "{frames:?} does not begin at {roots:?}");
        // Blocked through the 2 s capture.
        assert!(*us >= 1_900_000, "{us} us of {frames:?}");
    }
    assert_eq!(ours.len(), theirs.len(), "fgbpf's stacks of {pid}: {ours:?}");
}

#[test]
fn servers_blocked_before_the_capture_are_drawn_with_the_user_stacks_gdb_shows() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let plain = started(Command::new(plain_workload("plain")).arg("idle"), true);
    let conf_dir = out_dir("before_nginx_prefix");
    let nginx = nginx::Nginx(started(&mut nginx::master(&conf_dir, 1).0, false));
    let (stacks, summary) = capture(&[plain.id(), nginx.0.id()], "before_servers");
    eprintln!("{summary}");
    check_against_gdb(&stacks, plain.id(), &["_start", "clone3"]);
    check_against_gdb(&stacks, nginx.0.id(), &["_start"]);

    assert!(
        summary.contains("3 threads were blocked from before the capture ([blocked before capture]): 3 drawn with the user stack they wait in"),
        "{summary}"
    );
}

#[test]
fn a_stripped_sleep_is_walked_to_its_entry_point() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let sleep = started(Command::new("/usr/bin/sleep").arg("1000"), false);
    let (stacks, summary) = capture(&[sleep.id()], "before_sleep");
    // Debian's sleep is stripped: its own frames are named by offset, the
    // outermost its ELF entry point (_start), read from its header.
    let entry = Command::new("readelf").args(["-h", "/usr/bin/sleep"]).output().unwrap();
    let entry = String::from_utf8_lossy(&entry.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Entry point address:").map(|e| e.trim().to_string()))
        .expect("readelf gives the entry point");
    let frames = stacks.iter().map(|(f, _)| user_frames(f)).next().unwrap_or_else(|| panic!("no stack\n{summary}"));
    eprintln!("{}", frames.join(";"));
    assert_eq!(stacks.len(), 1, "{stacks:?}");
    assert_eq!(frames[0], format!("sleep+{entry}"), "{frames:?}");
    let in_order = ["__libc_start_main_impl", "__libc_start_call_main", "__GI___nanosleep", "__GI___clock_nanosleep"];
    assert!(weight_in_order(&[(frames.clone(), 1)], &in_order) == 1, "{frames:?}");
    assert!(summary.contains("1 drawn with the user stack they wait in"), "{summary}");
}

