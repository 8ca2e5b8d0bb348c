//! `fgbpf wall` against real BPF: on-CPU and off-CPU time in one unit.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use common::*;


/// Weight per thread frame, and per thread under a function with a leaf.
fn per_thread(
    stacks: &[(Vec<String>, u64)],
    func: &str,
    leaf: Option<&str>,
) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for (f, w) in stacks {
        let leaf_ok = match leaf {
            Some(l) => f.last().map(String::as_str) == Some(l),
            None => !f.last().unwrap().starts_with('['),
        };
        if f.iter().any(|x| x == func) && leaf_ok {
            *m.entry(f[1].clone()).or_default() += w;
        }
    }
    m
}

fn thread_named(m: &HashMap<String, u64>, name: &str) -> u64 {
    m.iter()
        .filter(|(k, _)| k.starts_with(&format!("{name}-")))
        .map(|(_, w)| *w)
        .sum()
}

/// `fgbpf wall -d 4` on the mixed workload with one thread per entry of
/// `busy`; returns the output directory and the wall stacks.
fn capture_mixed(test: &str, busy: &[&str]) -> (std::path::PathBuf, Vec<(Vec<String>, u64)>) {
    // It outlasts the capture however long attaching takes, so that every
    // thread lives through the whole window; killed at the end.
    let mut child = Command::new(workload("mixed"))
        .arg("60")
        .args(busy)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let dir = out_dir(test);
    let out = run(fgbpf()
        .args([
            "wall",
            "-F",
            "499",
            "-d",
            "4",
            "-p",
            &child.id().to_string(),
            "-o",
        ])
        .arg(&dir));
    child.kill().ok();
    child.wait().ok();
    assert_ok(&out);
    let stacks = read_folded(&dir.join("wall.folded"));
    (dir, stacks)
}


#[test]
fn a_thread_computing_30_ms_and_sleeping_70_splits_30_70() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let (dir, stacks) = capture_mixed("wall-30-70", &["30"]);
    for f in [
        "oncpu.svg",
        "oncpu.folded",
        "offcpu.svg",
        "offcpu.folded",
        "wall.svg",
        "wall.folded",
        "wall.slices",
        "timeline.html",
        "report.txt",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let sum = thread_named(&by_thread(&stacks), "mix30") as f64;
    let window = window_us(&dir);
    // As in several_mixes_each_sum_to_the_window: to the window's
    // millisecond, 0.5%.
    assert!(
        (sum - window).abs() <= 0.005 * window,
        "{sum} us in a {window} us window"
    );
    let on =
        thread_named(&per_thread(&stacks, "compute_phase", None), "mix30") as f64 * 100.0 / sum;
    let off = thread_named(
        &per_thread(&stacks, "sleep_phase", Some("[sleeping]")),
        "mix30",
    ) as f64
        * 100.0
        / sum;
    assert!(
        (on - 30.0).abs() <= 4.0,
        "{on:.1}% on CPU in compute_phase, expected 30%"
    );
    assert!(
        (off - 70.0).abs() <= 4.0,
        "{off:.1}% sleeping in sleep_phase, expected 70%"
    );
    // The combined view is one tree: the same main-loop frame holds both
    // kinds of time.
    let shared: Vec<_> = stacks
        .iter()
        .filter(|(f, _)| f.contains(&"compute_phase".to_string()))
        .collect();
    assert!(!shared.is_empty());
    let svg = std::fs::read_to_string(dir.join("wall.svg")).unwrap();
    assert!(
        svg.contains("each box warm if mostly on CPU (red user, orange kernel), blue if mostly waiting"),
        "colour key missing from the subtitle"
    );
    // Waiting-only frames are cool (blue dominates), computing ones warm.
    let fill_of = |name: &str| -> (u8, u8, u8) {
        let at = svg
            .find(&format!("<title>{name} ("))
            .unwrap_or_else(|| panic!("{name} not in SVG"));
        let rest = &svg[at..];
        let rgb = &rest[rest.find("fill=\"rgb(").unwrap() + 10..];
        let v: Vec<u8> = rgb[..rgb.find(')').unwrap()]
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect();
        (v[0], v[1], v[2])
    };
    let (r, _, b) = fill_of("sleep_phase");
    assert!(b > r, "sleep_phase is not cool: rgb({r},_,{b})");
    let (r, _, b) = fill_of("compute_phase");
    assert!(r > b, "compute_phase is not warm: rgb({r},_,{b})");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(
        report.contains("Time by thread") && report.contains("on-CPU%"),
        "{report}"
    );
}

#[test]
fn several_mixes_each_sum_to_the_window() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let (dir, stacks) = capture_mixed("wall-mixes", &["30", "60", "10"]);
    let window = window_us(&dir);
    let totals = by_thread(&stacks);
    // Every thread lived through the window: on-CPU time measured at the
    // scheduler's switches, like off-CPU time, makes each add up to it
    // (report.txt's duration is to the millisecond; the tolerance is 0.5%,
    // timer samples alone drifted 6% low on this VM).
    for (thread, &sum) in &totals {
        assert!(
            (sum as f64 - window).abs() <= 0.005 * window,
            "{thread}: {sum} us in a {window} us window"
        );
    }
    let computing = per_thread(&stacks, "compute_phase", None);
    let waiting_for_cpu = per_thread(&stacks, "compute_phase", Some("[runqueue]"));
    let sleep = per_thread(&stacks, "sleep_phase", Some("[sleeping]"));
    for busy in [30u64, 60, 10] {
        let name = format!("mix{busy}");
        let sum = thread_named(&totals, &name) as f64;
        let on = thread_named(&computing, &name) as f64 * 100.0 / sum;
        let rq = thread_named(&waiting_for_cpu, &name) as f64 * 100.0 / sum;
        let off = thread_named(&sleep, &name) as f64 * 100.0 / sum;
        // With three threads and fgbpf on two CPUs, a compute phase may
        // wait for a CPU: that is wall time in compute_phase too, shown
        // as [runqueue] above it.
        assert!(
            (on + rq - busy as f64).abs() <= 4.0,
            "{name}: {on:.1}% + {rq:.1}% in compute_phase, expected {busy}%"
        );
        assert!(
            (off - (100 - busy) as f64).abs() <= 4.0,
            "{name}: {off:.1}% sleeping, expected {}%",
            100 - busy
        );
    }
}

#[test]
fn per_process_merges_threads() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("wall-per-process");
    let out = run(fgbpf()
        .args(["wall", "-F", "199", "--per-process", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(workload("mixed"))
        .args(["1", "50", "20"]));
    assert_ok(&out);
    // The picture merges threads: one process root, then code.
    let drawn = svg_frames(&dir.join("wall.svg"));
    assert!(drawn.iter().any(|f| f.name.starts_with("mixed-")), "{drawn:?}");
    assert!(!drawn.iter().any(|f| f.name.starts_with("mix50-")), "a thread root is drawn: {drawn:?}");
    // The folded file keeps the threads, so every reader takes it, and
    // re-rendering draws it as the capture did.
    let stacks = read_folded(&dir.join("wall.folded"));
    assert!(stacks.iter().any(|(f, _)| f[1].starts_with("mix50-")), "{stacks:?}");
    let again = dir.join("again.svg");
    assert_ok(&run(fgbpf().arg("flamegraph").arg(dir.join("wall.folded")).arg("-o").arg(&again)));
    let redrawn = svg_frames(&again);
    assert!(!redrawn.iter().any(|f| f.name.starts_with("mix50-")), "re-rendered per thread");
    for flag in ["--per-process", "--per-thread"] {
        let out = dir.join(format!("again{flag}.svg"));
        assert_ok(&run(fgbpf().arg("flamegraph").arg(dir.join("wall.folded")).arg(flag).arg("-o").arg(&out)));
    }
    let threads = svg_frames(&dir.join("again--per-thread.svg"));
    assert!(threads.iter().any(|f| f.name.starts_with("mix50-")), "--per-thread keeps threads");
    // The report reads the process as a process, not as a function.
    let out = run(fgbpf().arg("report").arg(&dir));
    assert_ok(&out);
    let report = String::from_utf8_lossy(&out.stdout);
    let functions: String = report
        .lines()
        .skip_while(|l| !l.starts_with("Top functions by total"))
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!functions.contains("mixed-"), "{functions}");
    assert!(report.contains("Time by process"), "{report}");
    // The per-thread views keep their threads.
    let on = read_folded(&dir.join("oncpu.folded"));
    assert!(on.iter().any(|(f, _)| f[1].starts_with("mix50-")));
}

#[test]
fn each_frame_is_coloured_by_its_own_split() {
    if !require_root() {
        return;
    }
    let _g = serial();
    // gcc -O2: one thread always computing, three always asleep. Every
    // thread starts in glibc's start_thread: by name it is mostly waiting,
    // but the computing thread's start_thread is all on CPU.
    let mut child = Command::new(plain_workload("mixed"))
        .args(["8", "100", "0", "0", "0"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let dir = out_dir("wall-colours");
    let out = run(fgbpf()
        .args(["wall", "-F", "499", "-d", "2", "-p", &child.id().to_string(), "-o"])
        .arg(&dir));
    child.kill().ok();
    child.wait().ok();
    assert_ok(&out);
    let frames = svg_frames(&dir.join("wall.svg"));
    let under = |thread: &str| -> Vec<SvgFrame> {
        let root = frames
            .iter()
            .find(|f| f.name.starts_with(thread))
            .unwrap_or_else(|| panic!("no {thread} thread in {frames:?}"));
        frames
            .iter()
            .filter(|f| f.x >= root.x && f.x < root.x + root.w && f.name == "start_thread")
            .cloned()
            .collect()
    };
    let busy = under("mix100-");
    assert_eq!(busy.len(), 1, "{busy:?}");
    let (r, _, b) = busy[0].fill;
    assert!(r > b, "the busy thread's start_thread is drawn cool: {:?}", busy[0]);
    let idle = under("mix0-");
    let (r, _, b) = idle[0].fill;
    assert!(b > r, "a sleeping thread's start_thread is drawn warm: {:?}", idle[0]);
    let svg = std::fs::read_to_string(dir.join("wall.svg")).unwrap();
    assert!(svg.contains("each box warm if mostly on CPU"), "the subtitle explains the colours");
}

/// Issue 18: on a live capture of the demo, the per-thread table splits
/// each thread's wall time as the demo is built (ingest computes, compress
/// is busy a quarter of the time and sleeps the rest, idle-waiter sleeps), and the summary
/// starts with findings in words.
#[test]
fn the_demos_thread_table_has_the_right_split_and_the_summary_starts_with_findings() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("demo-table");
    let out = run(fgbpf().args(["demo", "-d", "3", "-o"]).arg(&dir));
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err
        .lines()
        .find(|l| !l.contains("recording"))
        .unwrap_or_default();
    assert!(
        first.starts_with("fgbpf: ") && first.contains("% of wall time in thread "),
        "the summary does not start with a finding: {err}"
    );
    let report = run(fgbpf().args(["report", "--json"]).arg(&dir));
    assert_ok(&report);
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let rows = v["thread_table"]["rows"].as_array().unwrap();
    let split = |name: &str, col: &str| {
        let r = rows
            .iter()
            .find(|r| r["thread"].as_str().unwrap().contains(name))
            .unwrap_or_else(|| panic!("no row for {name}: {v:#}"));
        r[col].as_f64().unwrap() * 100.0 / r["total"].as_f64().unwrap()
    };
    assert!(split("/ ingest-", "on_cpu") > 95.0, "{v:#}");
    // compress is busy 10 ms of wall time, then sleeps 30 ms: a quarter
    // of its time it runs or waits for a CPU (ingest keeps one busy, and
    // fgbpf and the machine's others take their share of the other: a
    // CI run had compress 19.9% on a CPU and 7.5% waiting for one), three
    // quarters it sleeps.
    let (on, waiting) = (split("/ compress-", "on_cpu"), split("/ compress-", "runqueue"));
    assert!((on + waiting - 25.0).abs() < 5.0, "compress on a CPU {on:.1}%, waiting for one {waiting:.1}%: {v:#}");
    assert!(on > 12.5, "compress on a CPU {on:.1}%, under half its busy time: {v:#}");
    let sleeping = split("/ compress-", "sleeping");
    assert!((sleeping - 75.0).abs() < 5.0, "compress sleeping {sleeping:.1}%: {v:#}");
    assert!(split("/ idle-waiter-", "sleeping") > 98.0, "{v:#}");
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(
        text.contains("sleeping: sleep in clock_nanosleep under fgbpf::demo::"),
        "{text}"
    );
    // Every finding names the demo's own code, and the main thread's wait
    // for its workers is whole from _start through main to the demo.
    let findings: Vec<&str> = err.lines().filter(|l| l.contains("% of wall time in thread ")).collect();
    assert!(!findings.is_empty() && findings.iter().all(|l| l.contains("fgbpf::demo::")), "{err}");
    let stacks = read_folded(&dir.join("wall.folded"));
    let main: Vec<(Vec<String>, u64)> = stacks
        .iter()
        .filter(|(f, _)| f.get(1).is_some_and(|t| t.starts_with("fgbpf-")) && f.last().is_some_and(|s| s == "[sleeping]"))
        .cloned()
        .collect();
    let whole = weight_in_order(&main, &["_start", "main", "fgbpf::demo::run"]);
    assert!(pct(whole, total(&main)) >= 99.0, "{whole} of {} us of the main thread's sleeps whole: {main:?}", total(&main));
}

/// Issue 58: the sessions of a server wait in one helper of their own,
/// `wait_event`, for two different things: a client's request and the row
/// lock (tests/workloads/hubs.c, built as users build). Named by that
/// helper alone the two read the same; the findings and the per-thread
/// table name each by the callers that tell it apart, the lock wait first;
/// the time under the lock's path within 5 points of the program's own
/// account of it (as a database's wait-event view gives it).
#[test]
fn waits_through_one_helper_are_told_apart_by_their_callers() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = out_dir("wall-hubs");
    let out = run(fgbpf().args(["wall", "-F", "99", "-o"]).arg(&dir).arg("--").arg(plain_workload("hubs")).arg("6"));
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let account: Vec<f64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("account "))
        .unwrap_or_else(|| panic!("the program's account: {stdout}"))
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let (lock_s, client_s, lived_s) = (account[0], account[1], account[2]);
    let report = run(fgbpf().args(["report", "--json"]).arg(&dir));
    assert_ok(&report);
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let first = &findings[0];
    assert_eq!(first["thread"], "session", "{findings:#?}");
    assert_eq!(first["site"], "waiting for events (poll/select) in poll under wait_event ← wait_for_lock", "{findings:#?}");
    // The program counts a lock wait from asking to holding: asleep in
    // poll, and also woken and waiting for a CPU, or polling again after
    // losing the token. fgbpf's time under wait_for_lock in every state
    // is that account; the finding is its sleeping part, to the
    // microsecond the weight of those stacks (those whose kernel stack
    // says the poll: a switch the kernel did not report has none).
    let stacks = read_folded(&dir.join("wall.folded"));
    let sessions: Vec<(Vec<String>, u64)> = stacks.iter().filter(|(f, _)| f[1].starts_with("session-")).cloned().collect();
    let under_lock = weight_with(&sessions, "wait_for_lock");
    let asleep: u64 = sessions
        .iter()
        .filter(|(f, _)| f.last().is_some_and(|l| l == "[sleeping]"))
        .filter(|(f, _)| weight_in_order(&[(f.clone(), 1)], &["wait_for_lock", "wait_event", "__GI___poll", "do_sys_poll_[k]"]) == 1)
        .map(|(_, w)| w)
        .sum();
    let theirs = lock_s / lived_s * 100.0;
    let ours = under_lock as f64 / (lived_s * 1e6) * 100.0;
    eprintln!(
        "lock waits: {ours:.1}% of the sessions' time (the program's account {theirs:.1}%), {:.1}% asleep; client waits {:.1}%",
        asleep as f64 / (lived_s * 1e6) * 100.0,
        client_s / lived_s * 100.0
    );
    assert!((ours - theirs).abs() <= 5.0, "lock waits {ours:.1}% of the sessions' time, the program says {theirs:.1}%");
    assert_eq!(first["weight"].as_u64().unwrap(), asleep, "the finding is the sessions' sleep under wait_event ← wait_for_lock");
    // The client's requests: the same helper, their own path.
    let rows = v["thread_table"]["rows"].as_array().unwrap();
    let client_path = "waiting for events (poll/select) in poll under wait_event ← read_client";
    let sessions: Vec<&serde_json::Value> = rows.iter().filter(|r| r["thread"].as_str().unwrap().contains("/ session-")).collect();
    assert_eq!(sessions.len(), 4, "{rows:#?}");
    for r in sessions {
        let sites: Vec<&str> = r["sites"].as_array().unwrap().iter().map(|s| s["site"].as_str().unwrap()).collect();
        assert!(sites.contains(&client_path) && sites.contains(&first["site"].as_str().unwrap()), "{sites:?}");
    }
}
