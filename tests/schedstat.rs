//! fgbpf's off-CPU accounting against the kernel's own: every thread's
//! run-queue time and off-CPU time over the capture's window, beside what
//! /proc/TID/schedstat says of the same thread over the same window (its
//! run time and run-queue delay, read every few milliseconds while the
//! capture runs and taken at the window's edges, which `--json` gives on
//! the same clock). The whole system, with a crowd of CPU-bound threads
//! (run-queue time by preemption) and a pipe reader (woken a thousand
//! times a second: run-queue time after wakeups) as controls.

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

/// CLOCK_MONOTONIC in nanoseconds: the clock of `--json`'s window.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid pointer to a stack value.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One reading of a thread's schedstat: (time, run ns, run-queue ns).
type Reading = (u64, u64, u64);

/// Reads every thread's schedstat, over and over, until `stop`.
fn sample(stop: &AtomicBool, into: &Mutex<HashMap<u32, Vec<Reading>>>) {
    while !stop.load(Ordering::Relaxed) {
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else { continue };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
                let at = monotonic_ns();
                let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else { continue };
                let v: Vec<u64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
                if v.len() >= 2 {
                    into.lock().unwrap().entry(tid).or_default().push((at, v[0], v[1]));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A thread's (run, run-queue) nanoseconds at `t`, between the readings
/// around it; `None` outside them.
fn at(readings: &[Reading], t: u64) -> Option<(f64, f64)> {
    let i = readings.iter().position(|r| r.0 >= t)?;
    if i == 0 {
        return None;
    }
    let ((t0, r0, q0), (t1, r1, q1)) = (readings[i - 1], readings[i]);
    let f = (t - t0) as f64 / (t1 - t0).max(1) as f64;
    Some((r0 as f64 + (r1 as f64 - r0 as f64) * f, q0 as f64 + (q1 as f64 - q0 as f64) * f))
}

#[test]
fn every_threads_run_queue_and_off_cpu_time_is_the_kernels() {
    if !require_root() {
        return;
    }
    let _g = serial();
    // Controls: three CPU-bound threads on one CPU, and a pipe's reader.
    let mut crowd = Command::new(workload("crowd")).args(["60", "3"]).spawn().unwrap();
    let mut piper = Command::new(workload("piper")).arg("60").stdout(Stdio::piped()).spawn().unwrap();
    let reader: u32 = first_line(&mut piper).trim().parse().unwrap();
    let readings = Arc::new(Mutex::new(HashMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, readings) = (stop.clone(), readings.clone());
        std::thread::spawn(move || sample(&stop, &readings))
    };
    let dir = out_dir("schedstat");
    let out = run(fgbpf().args(["offcpu", "-d", "3", "--json", "--format", "folded", "-o"]).arg(&dir));
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let crowd_tids: Vec<u32> = std::fs::read_dir(format!("/proc/{}/task", crowd.id()))
        .unwrap()
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse().ok())
        .collect();
    for c in [&mut crowd, &mut piper] {
        c.kill().ok();
        c.wait().ok();
    }
    assert_ok(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let window = &json["window_monotonic_ns"];
    let (a, b) = (window[0].as_u64().unwrap(), window[1].as_u64().unwrap());
    // fgbpf's account per thread (the thread frame is `comm-TID`): its
    // run-queue time and its off-CPU time, in ns.
    let mut ours: HashMap<u32, (f64, f64)> = HashMap::new();
    for (frames, us) in read_folded(&dir.join("offcpu.folded")) {
        let tid: u32 = frames[1].rsplit('-').next().unwrap().parse().unwrap();
        let e = ours.entry(tid).or_default();
        if frames.last().map(String::as_str) == Some("[runqueue]") {
            e.0 += us as f64 * 1e3;
        }
        e.1 += us as f64 * 1e3;
    }
    let readings = readings.lock().unwrap();
    let mut checked = Vec::new();
    let mut wrong = Vec::new();
    for (&tid, &(rq, off)) in &ours {
        let r = &readings[&tid];
        let (Some((run0, q0)), Some((run1, q1))) = (at(r, a), at(r, b)) else {
            // Born or gone inside the window: its edges are its own.
            continue;
        };
        let (k_rq, k_off) = (q1 - q0, (b - a) as f64 - (run1 - run0));
        // 10 ms, or 5%: the readings are 2 ms apart plus the time to read
        // them all, and interpolated at the window's edges.
        let near = |x: f64, k: f64| (x - k).abs() <= (0.05 * k).max(10e6);
        let line = format!(
            "tid {tid}: run-queue {:.1} ms (kernel {:.1}), off-CPU {:.1} ms (kernel {:.1})",
            rq / 1e6,
            k_rq / 1e6,
            off / 1e6,
            k_off / 1e6
        );
        if !near(rq, k_rq) || !near(off, k_off) {
            wrong.push(line.clone());
        }
        checked.push((tid, k_rq, line));
    }
    let text = checked.iter().map(|c| c.2.as_str()).collect::<Vec<_>>().join("\n");
    eprintln!("{text}");
    assert!(wrong.is_empty(), "not the kernel's account:\n{}", wrong.join("\n"));
    // The controls were checked, and had run-queue time to check.
    // Three threads on one CPU for 3 s: about 6 s of waiting in all.
    let crowd_rq: f64 = checked.iter().filter(|c| crowd_tids.contains(&c.0)).map(|c| c.1).sum();
    assert!(crowd_rq > 3e9, "the crowd's threads waited {:.0} ms for a CPU in all:\n{text}", crowd_rq / 1e6);
    assert!(checked.iter().any(|c| c.0 == reader), "the pipe's reader was not checked:\n{text}");
}
