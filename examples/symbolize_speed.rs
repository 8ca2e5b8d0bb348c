//! Speed of symbolizing a large capture: 100 000 distinct stacks of 20
//! frames over 50 processes of one binary (copies of this example, a large
//! DWARF-rich executable), symbolized after they have exited. Prints the
//! times; run by scripts/bench.sh:
//! `cargo run --release --example symbolize_speed` (as root).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fgbpf::profile::RawStack;
use fgbpf::profile::Unit;
use fgbpf::symbolize::{Options, Symbolizer};

fn main() {
    // Each copy started below is one of the symbolized processes.
    if std::env::var_os("FGBPF_BENCH_CHILD").is_some() {
        std::thread::sleep(Duration::from_secs(120));
        return;
    }
    const PROCESSES: usize = 50;
    const STACKS: usize = 100_000;
    const DEPTH: usize = 20;
    const HOT_OFFSETS: usize = 4000;
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<Child> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .env("FGBPF_BENCH_CHILD", "1")
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));

    // Executable mappings of each child: its own text and libc's.
    let text = |pid: u32| -> Vec<(u64, u64)> {
        std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .unwrap()
            .lines()
            .filter(|l| l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
            .filter(|l| l.contains('/'))
            .map(|l| {
                let (s, e) = l
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .split_once('-')
                    .unwrap();
                (
                    u64::from_str_radix(s, 16).unwrap(),
                    u64::from_str_radix(e, 16).unwrap(),
                )
            })
            .collect()
    };
    // The same hot offsets in every process (they run the same code),
    // relocated to each one's layout.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let ranges0 = text(children[0].id());
    let sizes: u64 = ranges0.iter().map(|(s, e)| e - s).sum();
    let hot: Vec<(usize, u64)> = (0..HOT_OFFSETS)
        .map(|_| {
            let mut off = rand() % sizes;
            let mut i = 0;
            while off >= ranges0[i].1 - ranges0[i].0 {
                off -= ranges0[i].1 - ranges0[i].0;
                i += 1;
            }
            (i, off)
        })
        .collect();
    let mut raw = Vec::with_capacity(STACKS);
    let per_pid: Vec<(u32, Vec<(u64, u64)>)> =
        children.iter().map(|c| (c.id(), text(c.id()))).collect();
    for n in 0..STACKS {
        let (pid, ranges) = &per_pid[n % PROCESSES];
        assert_eq!(ranges.len(), ranges0.len(), "children map the same files");
        let user = (0..DEPTH)
            .map(|_| {
                let (i, off) = hot[(rand() % HOT_OFFSETS as u64) as usize];
                ranges[i].0 + off
            })
            .collect();
        raw.push(RawStack {
            pid: *pid,
            tid: *pid,
            comm: "bench".into(),
            user,
            weight: 1,
            ..Default::default()
        });
    }

    let start = Instant::now();
    let mut s = Symbolizer::new(&Options::default());
    for (pid, _) in &per_pid {
        s.remember(*pid, 0, "bench");
    }
    let remembered = start.elapsed();
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    // from_raw takes the stacks it names: the second run's copy is made
    // before either is timed.
    let raw_again = raw.clone();
    let start = Instant::now();
    let profile = fgbpf::profile::build::from_raw(raw, Unit::Samples, &mut s);
    let first = start.elapsed();
    let start = Instant::now();
    let again = fgbpf::profile::build::from_raw(raw_again, Unit::Samples, &mut s);
    let second = start.elapsed();
    println!(
        "symbolize_speed: {STACKS} stacks x {DEPTH} frames, {PROCESSES} processes (exited), {HOT_OFFSETS} distinct offsets in {} mappings: remember {:.0} ms, profile {:.0} ms (binary parsed), again {:.0} ms; {} frames, {} stacks",
        ranges0.len(),
        remembered.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3,
        second.as_secs_f64() * 1e3,
        profile.frames().len(),
        profile.stacks().len()
    );
    assert_eq!(profile.stacks().len(), again.stacks().len());
}
