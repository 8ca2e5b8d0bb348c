//! Storms at default sizes: a program that forks 9,000 short children and
//! starts 70,000 short threads, one after another, then at once has a late
//! child burn a second of CPU in `late_work` and a late thread nap 50 x
//! 20 ms in `late_nap` (tests/workloads/churn.c, `storm`), built with the
//! machine's `gcc -O2` and captured with `fgbpf wall -F 199` at default
//! map sizes. The storm must cost nothing of the work that follows it.
//! And process identity: a PID given again within a capture is two
//! processes, each named from its own binary.

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
    assert!(report.contains("\nlost: none\n"), "{report}");
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
