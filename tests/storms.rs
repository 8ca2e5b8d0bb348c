//! Storms at default sizes: a program that forks 9,000 short children and
//! starts 70,000 short threads, one after another, then at once has a late
//! child burn a second of CPU in `late_work` and a late thread nap 50 x
//! 20 ms in `late_nap` (tests/workloads/churn.c, `storm`), built with the
//! machine's `gcc -O2` and captured with `fgbpf wall -F 199` at default
//! map sizes. The storm must cost nothing of the work that follows it.

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
