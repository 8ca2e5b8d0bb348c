//! Whole user stacks on software built the way users build it: a plain
//! `gcc -O2` program calling glibc, and Debian's own python3.11, neither
//! with frame pointers. fgbpf walks them with unwind tables compiled from
//! `.eh_frame`; `perf record --call-graph dwarf` on the same process is
//! the anchor.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// Starts `bin args` and gives it a moment to reach its steady state.
/// Its run is a minute, so that it outlasts the test's captures however
/// long attaching takes (3.7 s in an emulated guest); killed when the test
/// ends, however it ends.
fn start(bin: &std::path::Path, args: &[&str]) -> KillOnDrop {
    let child = KillOnDrop(Command::new(bin).args(args).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    child
}

fn capture(cmd: &str, pid: u32, seconds: &str, test: &str) -> (std::path::PathBuf, String) {
    let dir = out_dir(test);
    let mut fg = fgbpf();
    fg.arg(cmd);
    if cmd == "oncpu" {
        fg.args(["-F", "999"]);
    }
    let out = run(fg.args(["-d", seconds, "-p", &pid.to_string(), "-o"]).arg(&dir));
    assert_ok(&out);
    (dir, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn plain_gcc_split_reaches_main_with_the_right_shares() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let child = start(&plain_workload("plain"), &["split", "60"]);
    let (dir, stderr) = capture("oncpu", child.id(), "4", "plain_split");
    drop(child);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let all = total(&stacks);
    assert!(all > 2000, "too few samples: {all}");
    for (f, want) in [("work_fifty", 50.0), ("work_thirty", 30.0), ("work_twenty", 20.0)] {
        let got = share(&stacks, f);
        assert!((got - want).abs() <= 3.0, "{f}: {got:.1}% instead of {want}%");
        // The shared leaf keeps its caller.
        let under = pct(weight_in_order(&stacks, &["main", f, "spin"]), all);
        assert!(under >= want - 3.0, "main;{f};spin: {under:.1}%");
    }
    let main = pct(weight_with(&stacks, "main"), all);
    assert!(main >= 99.0, "main on {main:.1}% of samples");
    assert!(stderr.contains("unwound"), "the summary says how stacks were unwound: {stderr}");
}

#[test]
fn plain_gcc_ten_deep_chain_is_whole() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let child = start(&plain_workload("plain"), &["deep", "60"]);
    let (dir, _) = capture("oncpu", child.id(), "3", "plain_deep");
    drop(child);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let chain = [
        "main", "level1", "level2", "level3", "level4", "level5", "level6", "level7", "level8",
        "level9", "level10", "bottom", "spin",
    ];
    let whole = pct(weight_in_order(&stacks, &chain), total(&stacks));
    assert!(whole >= 95.0, "whole chain on {whole:.1}% of samples: {stacks:?}");
}

#[test]
fn plain_gcc_waits_in_glibc_keep_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let child = start(&plain_workload("plain"), &["waits", "60"]);
    let (dir, _) = capture("offcpu", child.id(), "3", "plain_waits");
    drop(child);
    let stacks = read_folded(&dir.join("offcpu.folded"));
    let of_thread = |name: &str| -> Vec<(Vec<String>, u64)> {
        stacks
            .iter()
            .filter(|(f, _)| f.get(1).is_some_and(|t| t.starts_with(&format!("{name}-"))))
            .cloned()
            .collect()
    };
    for (thread, caller) in [("napper", "nap_50ms"), ("reader", "wait_for_byte")] {
        let mine = of_thread(thread);
        let all = total(&mine);
        assert!(all > 1_000_000, "{thread}: only {all} us off-CPU");
        let with = pct(weight_in_order(&mine, &["main", caller]), all)
            .max(pct(weight_in_order(&mine, &["start_thread", caller]), all));
        assert!(with >= 95.0, "{thread}: {caller} on {with:.1}% of its off-CPU time: {mine:?}");
    }
}

#[test]
fn debian_python_reaches_main() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let python = std::path::Path::new("/usr/bin/python3.11");
    assert!(python.exists(), "Debian's python3.11 is installed (scripts/test.sh installs it)");
    let script = "import time\ndef inner(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\ndef outer():\n    t = time.time() + 6\n    while time.time() < t:\n        inner(10000)\nouter()\n";
    let child = Command::new(python)
        .args(["-c", script])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let (dir, _) = capture("oncpu", child.id(), "3", "python_main");
    drop(child);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let all = total(&stacks);
    let main = stacks
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == "Py_BytesMain" || x == "main"))
        .map(|(_, w)| w)
        .sum();
    let got = pct(main, all);
    assert!(got >= 95.0, "python3.11: main on {got:.1}% of {all} samples");
}

/// `perf record --call-graph dwarf` on a process for 4 s, beside fgbpf:
/// the field's reference for native stacks.
struct PerfDwarf {
    child: std::process::Child,
    data: std::path::PathBuf,
}

impl PerfDwarf {
    fn start(pid: u32, name: &str) -> PerfDwarf {
        let data = out_dir(name).with_extension("data");
        let child = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-F", "499", "--call-graph", "dwarf", "-p", &pid.to_string(), "-o"])
            .arg(&data)
            .args(["--", "sleep", "4"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("perf is installed (scripts/test.sh installs linux-perf)");
        PerfDwarf { child, data }
    }

    /// Waits for the recording to end; its samples (function names, leaf
    /// first).
    fn samples(self) -> Vec<Vec<String>> {
        let out = self.child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "perf record failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let script = Command::new("perf").args(["script", "-F", "ip,sym", "-i"]).arg(&self.data).output().unwrap();
        perf_samples(&String::from_utf8_lossy(&script.stdout))
    }
}

/// Samples of `perf script` output as lists of function names, leaf first.
fn perf_samples(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        // "ADDR SYMBOL+0xOFF (DSO)"
        let mut parts = line.splitn(2, ' ');
        let (Some(_addr), Some(rest)) = (parts.next(), parts.next()) else {
            continue;
        };
        let sym = rest.split(" (").next().unwrap_or(rest);
        let sym = sym.split("+0x").next().unwrap_or(sym);
        cur.push(sym.to_string());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn plain_gcc_split_agrees_with_perf_dwarf_on_the_same_process() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let child = start(&plain_workload("plain"), &["split", "60"]);
    let perf = PerfDwarf::start(child.id(), "perf_anchor");
    let (dir, _) = capture("oncpu", child.id(), "4", "perf_anchor_fgbpf");
    let samples = perf.samples();
    drop(child);
    assert!(samples.len() > 500, "perf recorded only {} samples", samples.len());
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let ours_total = total(&stacks);
    for f in ["main", "work_fifty", "work_thirty", "work_twenty", "spin"] {
        let theirs = pct(samples.iter().filter(|s| s.iter().any(|x| x == f)).count() as u64, samples.len() as u64);
        let ours = pct(weight_with(&stacks, f), ours_total);
        eprintln!("{f}: fgbpf {ours:.1}%, perf --call-graph dwarf {theirs:.1}%");
        assert!((ours - theirs).abs() <= 5.0, "{f}: fgbpf {ours:.1}% vs perf {theirs:.1}%");
    }
}

/// Share of the weight whose stack starts at a thread's true root: `_start`
/// for the main thread, the clone entry for the others.
fn rooted(stacks: &[(Vec<String>, u64)]) -> f64 {
    let roots = ["_start", "clone3", "clone", "__clone3", "__clone"];
    let ok = stacks
        .iter()
        .filter(|(f, _)| f.get(2).is_some_and(|r| roots.contains(&r.as_str())))
        .map(|(_, w)| w)
        .sum();
    pct(ok, total(stacks))
}

#[test]
fn debian_redis_under_load_is_walked_to_its_roots() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let server = std::path::Path::new("/usr/bin/redis-server");
    assert!(server.exists(), "Debian's redis-server is installed (scripts/test.sh installs it)");
    let port = 20000 + (std::process::id() % 20000);
    let port = port.to_string();
    let redis = KillOnDrop(Command::new(server)
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap());
    std::thread::sleep(Duration::from_millis(500));
    let load = KillOnDrop(Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port, "-n", "2000000", "-c", "8", "-q", "-t", "set,get,lpush"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-benchmark comes with redis-tools"));
    std::thread::sleep(Duration::from_millis(300));
    let (dir, _) = capture("oncpu", redis.id(), "3", "redis_roots");
    drop(load);
    drop(redis);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let all = total(&stacks);
    assert!(all > 500, "redis-server got only {all} samples");
    let got = rooted(&stacks);
    assert!(got >= 95.0, "redis-server: {got:.1}% of samples walked to their thread's root");
    let main_thread: Vec<_> = stacks
        .iter()
        .filter(|(f, _)| f.get(2).is_some_and(|r| r == "_start"))
        .cloned()
        .collect();
    let main = pct(weight_with(&main_thread, "main"), total(&main_thread));
    assert!(main >= 99.0, "redis-server main thread: main on {main:.1}%");
}

#[test]
fn a_rust_binary_built_by_cargo_is_walked_to_its_roots() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // fgbpf itself, as cargo built it for this test run: no frame pointers,
    // and (in a debug build) an executable segment that does not start on
    // a page, so its mapping starts below it.
    let input = out_dir("rust_roots_input").with_extension("folded");
    let mut text = String::new();
    for i in 0..150_000u64 {
        text.push_str(&format!("p-1;t-{};a{};b{};c{} {}\n", i % 7, i % 13, i % 101, i, 1 + i % 5));
    }
    std::fs::write(&input, text).unwrap();
    let dir = out_dir("rust_roots");
    let out = run(fgbpf()
        .args(["oncpu", "-F", "499", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_fgbpf"))
        .arg("report")
        .arg(&input));
    assert_ok(&out);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    assert!(total(&stacks) > 100, "only {} samples", total(&stacks));
    let got = rooted(&stacks);
    assert!(got >= 95.0, "{got:.1}% of fgbpf's own samples walked to their thread's root");
}

/// A signal handler's samples keep the code the signal interrupted: the
/// walker follows the kernel's signal frame (glibc's `__restore_rt`,
/// marked by its CFI), as perf's DWARF unwinder does on the same process
/// at the same time.
#[test]
fn plain_gcc_signal_handler_keeps_the_code_it_interrupted() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let child = start(&plain_workload("plain"), &["signal", "60"]);
    let perf = PerfDwarf::start(child.id(), "perf_signal");
    let (dir, summary) = capture("oncpu", child.id(), "4", "signal_fgbpf");
    // perf's stacks are leaf first.
    let theirs: Vec<Vec<String>> = perf.samples().into_iter().filter(|s| s.iter().any(|f| f == "in_handler")).collect();
    drop(child);
    let theirs_whole = theirs.iter().filter(|s| s.iter().any(|f| f == "interrupted") && s.iter().any(|f| f == "main")).count();
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let handler: Vec<&(Vec<String>, u64)> = stacks.iter().filter(|(f, _)| f.iter().any(|x| x == "in_handler")).collect();
    let all: u64 = handler.iter().map(|(_, w)| w).sum();
    // Root first: main, the interrupted code, the signal frame, the handler.
    let whole = weight_in_order_by(&stacks, &["main", "[signal]", "in_handler"], |f, w| f == w);
    let from_loop = weight_in_order_by(&stacks, &["main", "interrupted", "[signal]", "in_handler"], |f, w| f == w);
    eprintln!(
        "fgbpf: {whole} of {all} handler samples under main and [signal] ({from_loop} under interrupted); perf --call-graph dwarf: {theirs_whole} of {} under interrupted and main",
        theirs.len()
    );
    assert!(all >= 30 && theirs.len() >= 30, "too few samples in the handler: fgbpf {all}, perf {}\n{summary}", theirs.len());
    assert!(whole * 100 >= all * 95, "{whole} of {all} handler samples reach main through the signal frame:\n{handler:?}");
    // The workload's loop is `interrupted` but for its clock reads: perf's
    // DWARF unwinder sees 95% of the handler's samples interrupt it, and
    // fgbpf must see as many, within 3 points.
    assert!(theirs_whole * 100 >= theirs.len() * 95, "perf: {theirs_whole} of {}", theirs.len());
    let (ours_pct, theirs_pct) = (pct(from_loop, all), pct(theirs_whole as u64, theirs.len() as u64));
    assert!(
        ours_pct >= theirs_pct - 3.0,
        "{from_loop} of {all} handler samples interrupted `interrupted` ({ours_pct:.1}%), perf {theirs_pct:.1}%:\n{handler:?}"
    );
    // No walk stops at the signal frame's rule (a CI run cut 1 of 4,000
    // samples elsewhere, at code without rows: counted, not this test's).
    assert!(!summary.contains("a rule the walker does not follow"), "{summary}");
}

/// Each way a walk is cut short, on a `gcc -O2` program made to meet it
/// (tests/workloads/cuts.c), is told in the summary with its real cause:
/// the 127-frame limit (200 frames of recursion), a CFA rule the walker
/// does not follow (gcc's stack-realigning prologue, whose body's CFA is a
/// DWARF expression), a failed read of the stack (the page holding a
/// caller's return address dropped, as a swapped-out page is), and code
/// with neither an unwind row nor a frame pointer (assembly without CFI),
/// located in the binary, not called JIT code.
#[test]
fn each_reason_a_walk_is_cut_short_is_said_as_it_is() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let bin = plain_workload("cuts");
    let cases = [
        ("depth", "cut_deep", "cut short at the 127-frame limit"),
        ("realign", "cut_realigned", "cut short at an unwind rule the walker does not follow"),
        ("fault", "cut_paged", "cut short by a read of the stack that failed"),
        (
            "bare",
            "cut_bare",
            "cut short at code with neither an unwind row nor a frame pointer (in code of cuts-O2 no unwind row covers",
        ),
    ];
    for (mode, leaf, said) in cases {
        let dir = out_dir(&format!("cuts-{mode}"));
        let out = run(fgbpf()
            .args(["oncpu", "-F", "499", "--format", "folded", "-o"])
            .arg(&dir)
            .arg("--")
            .arg(&bin)
            .args([mode, "1.5"]));
        assert_ok(&out);
        let stacks = read_folded(&dir.join("oncpu.folded"));
        let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
        // The busy function is where nearly every sample is (the rest:
        // the program's start and the clock it reads).
        let busy = share(&stacks, leaf);
        assert!(busy >= 90.0, "{mode}: {leaf} in {busy:.1}% of samples: {stacks:?}");
        let line = report
            .lines()
            .map(str::trim_start)
            .find(|l| l.starts_with("pid ") && l.contains("(cuts-O2)"))
            .unwrap_or_else(|| panic!("{mode}: no line on the process's walks in the report:\n{report}"));
        eprintln!("{mode}: {line}");
        let cut: f64 = number_between(line, ": ", "% ").unwrap_or_else(|| panic!("{mode}: no share in {line}"));
        assert!(line.contains(said), "{mode}: the cause is not said as it is: {line}");
        assert!(
            cut >= busy - 1.0,
            "{mode}: {cut}% cut short, but {busy:.1}% of samples were in {leaf}: {line}"
        );
        if mode == "depth" {
            // Cut at the limit: each stack holds the 127 frames it kept,
            // the recursion's (the thread's frame and its process's above).
            let deepest = stacks.iter().map(|(f, _)| f.iter().filter(|x| *x == "cut_deep").count()).max();
            assert!(deepest >= Some(120), "{mode}: {deepest:?} frames of cut_deep at most");
        }
    }
}
