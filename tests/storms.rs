//! Storms at default sizes: a program that forks 9,000 short children and
//! starts 70,000 short threads, one after another, then at once has a late
//! child burn a second of CPU in `late_work` and a late thread nap 50 x
//! 20 ms in `late_nap` (tests/workloads/churn.c, `storm`), built with the
//! machine's `gcc -O2` and captured with `fgbpf wall -F 199` at default
//! map sizes. The storm must cost nothing of the work that follows it.
//! And process identity: a PID given again within a capture is two
//! processes, each named from its own binary; thousands of processes that
//! each live a millisecond are named and walked whole.

mod common;

use common::*;

#[test]
fn a_fork_and_thread_storm_costs_nothing_of_the_work_after_it() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("storm");
    let out = run(fgbpf()
        .args(["wall", "-F", "199", "--format", "folded", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(plain_workload("churn"))
        .args(["storm", "9000", "70000"]));
    assert_ok(&out);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert_nothing_lost_by_fgbpf(&report);
    // The kernel's account of the late child's CPU time, which it prints.
    let said = String::from_utf8_lossy(&out.stdout);
    let cpu: f64 = said
        .lines()
        .find_map(|l| l.strip_prefix("late_work cpu "))
        .unwrap_or_else(|| panic!("the late child said no CPU time: {said}"))
        .trim()
        .parse()
        .unwrap();
    let on = read_folded(&dir.join("oncpu.folded"));
    let samples = weight_with(&on, "late_work") as f64;
    eprintln!("late_work: {samples} samples of {:.0} expected ({cpu:.3} s of CPU at 199 Hz)", cpu * 199.0);
    assert!(cpu > 0.5, "the late child ran {cpu} s");
    assert!(samples >= 0.9 * cpu * 199.0, "{samples} samples in late_work for {cpu:.3} s of CPU");
    // Its naps: 50 x 20 ms, each a little longer than asked.
    let wall = read_folded(&dir.join("wall.folded"));
    let naps = weight_with(&wall, "late_nap") as f64;
    eprintln!("late_nap: {:.3} s", naps / 1e6);
    assert!(naps >= 0.95e6, "{naps} us in late_nap of its 1 s of naps");
    // A thread created and not yet run waits for a CPU: no finding puts it
    // asleep at its birth.
    let findings = report
        .split("\n\n")
        .find(|s| s.starts_with("Findings"))
        .unwrap_or_else(|| panic!("no findings: {report}"));
    assert!(!findings.contains("ret_from_fork"), "{findings}");
}

/// A PID the kernel gives again within one capture is another process: a
/// `gcc -O2` program burns 0.6 s in `shortlived_burn` and exits, and the
/// next process on its PID (clone3's set_tid places it there, as pid_max
/// wrapping does on a busy host) runs another program, burning 0.6 s in
/// plain's `deep` chain. Each is named by its own executable and its
/// frames come from its own binary.
#[test]
fn a_pid_given_again_within_a_capture_is_two_processes_each_named_from_its_own_binary() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("reuse");
    let (first, second) = (plain_workload("shortlived"), plain_workload("plain"));
    let out = run(fgbpf()
        .args(["oncpu", "-F", "499", "--format", "folded", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(plain_workload("reuse"))
        .arg(&first)
        .arg("0.6")
        .arg("--")
        .arg(&second)
        .args(["deep", "0.6"]));
    assert_ok(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    let pid_of = |which: &str| -> u32 {
        number_between(&said, &format!("{which} "), "\n").unwrap_or_else(|| panic!("no {which} PID in {said}"))
    };
    let pid = pid_of("first");
    assert_eq!(pid_of("second"), pid, "the second program was not started on the first's PID");
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let process = |name: &str| format!("{name}-{pid}");
    let (a, b) = (process("shortlived-O2"), process("plain-O2"));
    let of = |p: &str| -> Vec<(Vec<String>, u64)> { stacks.iter().filter(|(f, _)| f[0] == p).cloned().collect() };
    let (of_a, of_b) = (of(&a), of(&b));
    // Each burns 0.6 s of CPU, ~300 samples at 499 Hz: 150 is a floor for
    // "it was recorded under its own name", not a measure of loss.
    assert!(total(&of_a) >= 150 && total(&of_b) >= 150, "{a}: {}, {b}: {} samples", total(&of_a), total(&of_b));
    // Nothing of one is drawn under the other, and each one's busy code
    // is named from its own binary, whole to main.
    for (name, theirs, own_fn, other_fn) in [(&a, &of_a, "shortlived_burn", "level1"), (&b, &of_b, "level10", "shortlived_burn")] {
        let foreign: u64 = theirs
            .iter()
            .filter(|(f, _)| f.iter().any(|x| x == other_fn || x.starts_with("plain-O2+0x") || x.starts_with("shortlived-O2+0x")))
            .map(|(_, w)| w)
            .sum();
        assert_eq!(foreign, 0, "{name} holds frames of the other process or unnamed ones: {theirs:?}");
        let whole = weight_in_order(theirs, &["main", own_fn]);
        eprintln!("{name}: {whole} of {} samples in {own_fn} under main", total(theirs));
        assert!(pct(whole, total(theirs)) >= 95.0, "{name}: {whole} of {} in {own_fn} under main: {theirs:?}", total(theirs));
    }
    // No stack with either busy function under a third name.
    for busy in ["shortlived_burn", "level10"] {
        let elsewhere: u64 = stacks
            .iter()
            .filter(|(f, _)| f.iter().any(|x| x == busy) && f[0] != a && f[0] != b)
            .map(|(_, w)| w)
            .sum();
        assert_eq!(elsewhere, 0, "{busy} drawn under another process");
    }
}

/// Thousands of processes that each live about a millisecond, started one
/// after another (tests/workloads/blink.c, gcc -O2: an exec, about 1 ms of
/// CPU in `blink_burn`, an exit), under a whole-host `fgbpf oncpu -F 999`:
/// each is gone before its /proc/PID/maps could be read, and its frames
/// are named and walked by the files its code comes from, which the
/// kernel tells the walker at the sample (src/bpf/files.bpf.h).
#[test]
fn processes_that_live_a_millisecond_are_named_and_walked_whole() {
    if !require_root() {
        return;
    }
    let _g = serial();
    let dir = out_dir("blink");
    let blink = plain_workload("blink");
    let capture = spawn_attached(fgbpf().args(["oncpu", "-F", "999", "-d", "60", "--format", "folded", "-o"]).arg(&dir));
    // A whole-host capture samples from its attach by frame pointers, and
    // its walkers join tens of milliseconds later (a staged start, tested
    // and counted in tests/staged.rs): the storm begins after that.
    std::thread::sleep(std::time::Duration::from_secs(1));
    // The spawner is a process of the storm's binary, read when it starts:
    // its tables are built and placed in one turn of the capture, and the
    // storm begins half a second later, as a server forks its workers once
    // started. A binary's processes in that turn (30-80 ms here in a debug
    // build, ~0.3 s in a CI run: the storm's first 50-160 children when it
    // began at once) are walked by frame pointers, which the summary counts
    // ("by frame pointers only (tables not built yet)").
    let spawner = std::process::Command::new(&blink).args(["spawn", "3000", "500"]).output().expect("running blink");
    capture.signal(libc::SIGINT);
    let out = capture.finish();
    assert_ok(&out);
    let said = String::from_utf8_lossy(&spawner.stdout);
    assert!(spawner.status.success(), "blink: {said}");
    let cpu: f64 = number_between(&said, "children cpu ", "\n").unwrap_or_else(|| panic!("no CPU time said: {said}"));
    let stacks = read_folded(&dir.join("oncpu.folded"));
    // The children, not the spawner: each is its own process, `blink-O2-PID`.
    let spawner_root = format!("blink-O2-{}", number_between::<u32>(&said, "spawner ", "\n").unwrap_or(0));
    let children: Vec<(Vec<String>, u64)> = stacks
        .iter()
        .filter(|(f, _)| f[0].starts_with("blink-O2-") && f[0] != spawner_root)
        .cloned()
        .collect();
    let all = total(&children);
    let unnamed: Vec<&(Vec<String>, u64)> = children
        .iter()
        .filter(|(f, _)| f.iter().skip(1).any(|x| x.contains("[unknown]") || x.contains("+0x")))
        .collect();
    let unnamed_w: u64 = unnamed.iter().map(|(_, w)| w).sum();
    let busy = weight_with(&children, "blink_burn");
    let whole = weight_in_order(&children, &["main", "blink_burn"]);
    eprintln!(
        "{all} samples in the children ({:.0} expected from {cpu:.3} s of CPU at 999 Hz), {unnamed_w} with a frame unnamed, {whole} of {busy} in blink_burn whole to main",
        cpu * 999.0
    );
    for (f, w) in unnamed.iter().take(20) {
        eprintln!("unnamed: {w} {}", f.join(";"));
    }
    // ~4,300 samples expected: the sampling error is ~1.5%; fewer than
    // 90% would be samples lost, not chance.
    assert!(all as f64 >= 0.9 * cpu * 999.0, "{all} samples for {cpu:.3} s of CPU");
    assert!(pct(all - unnamed_w, all) >= 99.0, "{unnamed_w} of {all} samples with a frame unnamed");
    assert!(busy > 0 && pct(whole, busy) >= 95.0, "{whole} of {busy} samples in blink_burn whole to main");
}
