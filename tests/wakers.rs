//! `--wakers`: who woke each wait, on a program built the way users build
//! (`gcc -O2`, every wait through glibc) and on its frame-pointer twin. Its
//! `wakeups` mode has a reader blocked in read() woken by a writer's
//! notify_reader(), a waiter on a condition variable signalled from
//! release_worker(), and threads sleeping in usleep() (woken by the timer
//! interrupt).

mod common;

use std::path::Path;

use common::*;

type Stacks = Vec<(Vec<String>, u64)>;

fn thread_stacks<'a>(stacks: &'a Stacks, thread: &str) -> Vec<&'a (Vec<String>, u64)> {
    stacks
        .iter()
        .filter(|(f, _)| f.get(1).is_some_and(|t| t.starts_with(&format!("{thread}-"))))
        .collect()
}

/// Weight of `thread`'s stacks whose blocked side holds `blocked` and
/// whose waker side holds `waker` (a waker frame, `_[w]`).
fn share(stacks: &Stacks, thread: &str, blocked: &str, waker: &str) -> (u64, u64) {
    let mine = thread_stacks(stacks, thread);
    let total: u64 = mine.iter().map(|(_, w)| w).sum();
    let hit: u64 = mine
        .iter()
        .filter(|(f, _)| {
            let Some(sep) = f.iter().position(|x| x == "--") else {
                return false;
            };
            f[..sep].iter().any(|x| x == blocked) && f[sep + 1..].iter().any(|x| x == waker)
        })
        .map(|(_, w)| w)
        .sum();
    (hit, total)
}

fn capture(bin: &Path, dir: &Path) -> Stacks {
    let out = run(fgbpf()
        .args(["offcpu", "--wakers", "-o"])
        .arg(dir)
        .arg("--")
        .arg(bin)
        .args(["wakeups", "3"]));
    assert_ok(&out);
    read_folded(&dir.join("offwake.folded"))
}

#[test]
fn waits_are_joined_with_the_stacks_that_ended_them() {
    if !require_root() {
        return;
    }
    let _g = serial();
    for (build, bin) in [("gcc -O2", plain_workload("plain")), ("frame pointers", workload("plain"))] {
        let dir = out_dir(&format!("wakers-{}", build.replace(' ', "-")));
        let stacks = capture(&bin, &dir);
        // A pipe: the reader blocked in wait_for_byte, woken by the writer
        // in notify_reader.
        // Each of the three threads waits most of the 3 s: at least half
        // of them off-CPU, whatever the start took.
        let (hit, total) = share(&stacks, "reader", "wait_for_byte", "notify_reader_[w]");
        assert!(total > 1_500_000, "{build}: {total} us off-CPU for the reader in 3 s");
        assert!(
            hit as f64 >= 0.8 * total as f64,
            "{build}: only {hit} of the reader's {total} us are under wait_for_byte -- notify_reader"
        );
        // A condition variable: the waiter is woken from release_worker.
        let (hit, total) = share(&stacks, "waiter", "wait_for_work", "release_worker_[w]");
        assert!(total > 1_500_000, "{build}: {total} us off-CPU for the waiter in 3 s");
        assert!(
            hit as f64 >= 0.8 * total as f64,
            "{build}: only {hit} of the waiter's {total} us show release_worker as the waker"
        );
        // A timer: usleep ends in the timer interrupt, named as such, not
        // as whatever task the interrupt happened to stop.
        let (hit, total) = share(&stacks, "napper", "nap_50ms", "[interrupt]_[w]");
        assert!(total > 1_500_000, "{build}: {total} us off-CPU for the napper in 3 s");
        assert!(
            hit as f64 >= 0.8 * total as f64,
            "{build}: only {hit} of the napper's {total} us are woken by [interrupt]"
        );
        let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
        assert!(report.contains("Top waits by waker"), "{report}");
        assert!(
            report.lines().any(|l| l.contains("wait_for_byte") && l.contains("writer in") && l.contains("notify_reader")),
            "{build}: no report line joins the reader and notify_reader:\n{report}"
        );
        // The off-CPU view is the same waits, summed over their wakers.
        let off = read_folded(&dir.join("offcpu.folded"));
        assert!(off.iter().all(|(f, _)| !f.iter().any(|x| x == "--")));
        let (woken, plain) = (total_of(&stacks, "reader"), total_of(&off, "reader"));
        assert_eq!(woken, plain, "{build}: the reader's time differs between the two views");
    }
}

fn total_of(stacks: &Stacks, thread: &str) -> u64 {
    thread_stacks(stacks, thread).iter().map(|(_, w)| w).sum()
}

#[test]
fn without_wakers_no_offwake_view_is_written() {
    if !require_root() {
        return;
    }
    let dir = out_dir("no-wakers");
    let out = run(fgbpf()
        .args(["offcpu", "-o"])
        .arg(&dir)
        .args(["--", "sleep", "0.2"]));
    assert_ok(&out);
    // The capture holds sleep's 200 ms wait (an empty one would write no
    // offwake view either).
    let slept = total(&read_folded(&dir.join("offcpu.folded")));
    assert!(slept >= 150_000, "{slept} us off-CPU recorded of sleep 0.2");
    assert!(!dir.join("offwake.folded").exists());
}
