//! `fgbpf flight`: the recent past kept, and written on SIGUSR1 as an
//! ordinary capture directory while recording goes on, or by a trigger.
//! The workloads (`gcc -O2`): spike.c burns 2 s in early_fn, then 5 s in
//! spike_fn at a random moment 10 to 14 s after its start; stall.c's
//! threads wait 5 ms at a time in a pipe read, but one that waits 2 s once,
//! 6 to 10 s after its start.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Per slice of `VIEW.slices`: the weight of stacks with `frame`, and of
/// all stacks.
fn slices_with(path: &Path, frame: &str) -> BTreeMap<u32, (u64, u64)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (spans, folded) = line.split_once(' ').expect("SPANS FOLDED-LINE");
        let has = folded.split(';').any(|f| f == frame || f.starts_with(&format!("{frame} ")));
        for span in spans.split(',') {
            let (slices, weight) = span.split_once(':').expect("FIRST[-LAST]:WEIGHT");
            let weight: u64 = weight.parse().unwrap();
            let (first, last) = match slices.split_once('-') {
                Some((a, b)) => (a.parse::<u32>().unwrap(), b.parse::<u32>().unwrap()),
                None => (slices.parse().unwrap(), slices.parse().unwrap()),
            };
            let n = u64::from(last - first + 1);
            for s in first..=last {
                let e = out.entry(s).or_default();
                e.1 += weight / n;
                if has {
                    e.0 += weight / n;
                }
            }
        }
    }
    out
}

/// The samples of early_fn (spike.c burns its first 2 s of wall time in
/// it) a recorder at 49 Hz can hold when it recorded `cpu` seconds of it:
/// the kernel's account of what the process ran, not its 2 s of wall time
/// (on a loaded host it gets less: 88 samples of a 98 that a fixed 2 s
/// expected), less 5 for the edges (0.1 s).
fn early_floor(cpu: f64) -> u64 {
    (49.0 * cpu - 5.0).max(0.0) as u64
}

/// The CPU time the kernel has given process `pid` so far (its stat's
/// utime and stime), in seconds: spike.c's before its spike is early_fn's.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the workload lives");
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    let ticks: u64 = after.split_whitespace().skip(11).take(2).map(|f| f.parse::<u64>().unwrap()).sum();
    // SAFETY: sysconf reads a constant.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// The dump directories in `dumps` whose last file is written.
fn dumps_in(dumps: &Path) -> Vec<PathBuf> {
    let mut done: Vec<PathBuf> = std::fs::read_dir(dumps)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.join("trigger.txt").is_file()).collect())
        .unwrap_or_default();
    done.sort();
    done
}

/// The one dump directory in `dumps`, once its last file is written.
fn wait_for_dump(dumps: &Path, limit: Duration) -> PathBuf {
    let since = Instant::now();
    loop {
        let done = dumps_in(dumps);
        if let [one] = &done[..] {
            return one.clone();
        }
        assert!(done.len() < 2, "one signal, one dump: {done:?}");
        assert!(since.elapsed() < limit, "no dump under {} after {limit:?}", dumps.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_dump_on_sigusr1_holds_the_spike_and_not_what_fell_before_the_window() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-spike");
    let bin = plain_workload("spike");
    let started = Instant::now();
    let mut load = KillOnDrop(Command::new(&bin).stdout(Stdio::piped()).spawn().unwrap());
    let pid = load.id().to_string();
    let keep = 20.0;
    let flight = spawn_attached(fgbpf().args(["flight", "-p", &pid, "--keep", "20s", "-F", "49", "--dumps"]).arg(&dumps));
    // "spike FROM TO", in seconds since the workload started.
    let line = first_line(&mut load.0);
    let times: Vec<f64> = line.split_whitespace().skip(1).map(|t| t.parse().unwrap()).collect();
    let (from, to) = (times[0], times[1]);
    // Asked 8 s after the spike: the window (the 20 s before the last
    // drain) then starts 3 to 7 s after early_fn ended.
    std::thread::sleep(Duration::from_secs_f64((to + 8.0 - started.elapsed().as_secs_f64()).max(0.0)));
    let asked = started.elapsed().as_secs_f64();
    flight.signal(libc::SIGUSR1);
    let dump = wait_for_dump(&dumps, Duration::from_secs(30));
    let stderr = stop(flight);
    assert!(stderr.contains("dump (asked by SIGUSR1): wrote the last"), "the dump is said");
    let why = std::fs::read_to_string(dump.join("trigger.txt")).unwrap();
    assert!(why.starts_with("asked by SIGUSR1, at "), "trigger.txt says who asked: {why}");
    let mode = std::fs::metadata(&dumps).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the dumps' directory fgbpf made is root's only");
    for file in ["oncpu.folded", "offcpu.folded", "wall.folded", "report.txt", "timeline.html", "wall.svg"] {
        assert!(dump.join(file).is_file(), "a dump is a capture directory: {file}");
    }
    let on = read_folded(&dump.join("oncpu.folded"));
    assert_eq!(weight_with(&on, "early_fn"), 0, "early_fn burned before the kept window");
    let per_slice = slices_with(&dump.join("oncpu.slices"), "spike_fn");
    let spiked: Vec<u32> = per_slice.iter().filter(|(_, w)| w.0 > 0).map(|(&s, _)| s).collect();
    let (lo, hi) = (spiked[0], *spiked.last().unwrap());
    let (spike, all) = per_slice
        .range(lo..=hi)
        .fold((0, 0), |(a, b), (_, w)| (a + w.0, b + w.1));
    eprintln!("spike {from:.2}-{to:.2} s, asked at {asked:.2} s; in the dump slices {lo}-{hi}, spike_fn {spike} of {all}");
    let seconds = f64::from(hi - lo + 1) * 0.1;
    assert!((4.5..=5.6).contains(&seconds), "the spike spans {seconds:.1} s of slices (want 5)");
    assert!(pct(spike, all) >= 90.0, "spike_fn {:.1}% of the spike's slices (want at least 90)", pct(spike, all));
    // The dump's time 0 is the start of the kept window: the 20 s before
    // the last drain (at most a second before the signal).
    let expected = from - (asked - keep);
    let at = f64::from(lo) * 0.1;
    assert!(
        (expected - 0.5..=expected + 1.6).contains(&at),
        "the spike starts {at:.1} s into the dump (want about {expected:.1})"
    );
    // The same range drawn again from the dump's slices.
    let range = dump.join("spike.folded");
    assert_ok(&run(fgbpf()
        .args(["convert", "--from", &format!("{at}"), "--to", &format!("{}", f64::from(hi + 1) * 0.1), "-o"])
        .arg(&range)
        .arg(dump.join("oncpu.folded"))));
    let part = read_folded(&range);
    assert!(share(&part, "spike_fn") >= 90.0, "convert --from/--to: spike_fn {:.1}%", share(&part, "spike_fn"));
    let timeline = std::fs::read_to_string(dump.join("timeline.html")).unwrap();
    assert!(timeline.contains("spike_fn"), "the timeline names the spike");
}

#[test]
fn a_process_above_the_cpu_threshold_asks_for_one_dump_by_itself() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-cpu");
    let bin = plain_workload("spike");
    let mut load = KillOnDrop(Command::new(&bin).stdout(Stdio::piped()).spawn().unwrap());
    let pid = load.id().to_string();
    let flight = spawn_attached(
        fgbpf()
            .args(["flight", "-p", &pid, "--keep", "30s", "-F", "49"])
            .args(["--cpu-above", "50", "--cpu-for", "3", "--after", "5", "--dumps"])
            .arg(&dumps),
    );
    let line = first_line(&mut load.0);
    eprintln!("workload: {line}");
    // Fired 3 s into the spike, written 5 s later; no second one within
    // the default 10-minute cool-down, though the process stays watched.
    let dump = wait_for_dump(&dumps, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(3));
    let stderr = stop(flight);
    let dirs = std::fs::read_dir(&dumps).unwrap().count();
    assert_eq!(dirs, 1, "one trigger, one dump");
    let trigger = std::fs::read_to_string(dump.join("trigger.txt")).unwrap();
    assert!(
        trigger.starts_with(&format!("cpu: pid {pid} (")) && trigger.contains("above 50% of a CPU for 3 s, at "),
        "trigger.txt says why: {trigger}"
    );
    assert!(stderr.contains("trigger cpu: pid"), "the trigger is said");
    // The whole spike is in it: 5 s at 49 Hz.
    let on = read_folded(&dump.join("oncpu.folded"));
    let spike = weight_with(&on, "spike_fn");
    assert!(spike >= 220, "spike_fn has {spike} samples in the dump (want about 245)");
}

/// Stops the recorder, which must end well; its stderr.
fn stop(flight: Attached) -> String {
    flight.signal(libc::SIGINT);
    let out = flight.finish_by(Instant::now(), Duration::from_secs(30));
    assert_ok(&out);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn one_long_wait_among_short_ones_asks_for_a_dump_naming_it_and_its_stack() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-wait");
    let bin = plain_workload("stall");
    let mut load = KillOnDrop(Command::new(&bin).stdout(Stdio::piped()).spawn().unwrap());
    let pid = load.id().to_string();
    let flight = spawn_attached(
        fgbpf()
            .args(["flight", "-p", &pid, "--keep", "30s", "--wait-above", "1s", "--after", "3", "--dumps"])
            .arg(&dumps),
    );
    let line = first_line(&mut load.0);
    eprintln!("workload: {line}");
    let dump = wait_for_dump(&dumps, Duration::from_secs(20));
    // Its 5 ms waits go on: none of them fires another.
    std::thread::sleep(Duration::from_secs(2));
    let stderr = stop(flight);
    assert_eq!(std::fs::read_dir(&dumps).unwrap().count(), 1, "one long wait, one dump");
    let trigger = std::fs::read_to_string(dump.join("trigger.txt")).unwrap();
    eprintln!("{trigger}");
    let head = "wait: thread ";
    let first = trigger.lines().next().unwrap();
    assert!(
        first.starts_with(head) && first.contains(&format!(" (stalled) of pid {pid} (stall-O2) waited ")),
        "trigger.txt names the thread: {first}"
    );
    let secs: f64 = first.split(" waited ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    assert!((1.95..=2.3).contains(&secs), "the wait lasted {secs} s (want 2)");
    assert!(stderr.contains("trigger wait: thread "), "the trigger is said");
    // Its stack: the pipe read under reader_loop, in the kernel's frames.
    let frames: Vec<&str> = trigger.lines().skip(2).map(str::trim).collect();
    assert!(frames.contains(&"reader_loop"), "the stack is named: {frames:?}");
    assert!(frames.iter().any(|f| f.ends_with("pipe_read_[k]")), "down to the pipe read: {frames:?}");
    // The dump holds that wait: one span of the thread, 2 s long.
    let tid = first[head.len()..].split(' ').next().unwrap();
    let slices = std::fs::read_to_string(dump.join("offcpu.slices")).unwrap();
    let longest = slices
        .lines()
        .filter(|l| l.contains(&format!(";stalled-{tid};")) && l.contains(";reader_loop;"))
        .flat_map(|l| l.split(' ').next().unwrap().split(','))
        .filter_map(|span| span.split_once(':').map(|(_, w)| w.parse::<u64>().unwrap()))
        .max()
        .unwrap_or(0);
    assert!((1_950_000..=2_300_000).contains(&longest), "its longest span in the dump: {longest} us (want 2 s)");
}

#[test]
fn a_process_started_by_name_asks_for_a_dump_by_itself() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-start");
    let bin = plain_workload("spike");
    // The whole host: the process is not there yet.
    let flight = spawn_attached(
        fgbpf()
            .args(["flight", "--keep", "20s", "-F", "49", "--on-start", "spike-O2", "--after", "4", "--dumps"])
            .arg(&dumps),
    );
    let load = KillOnDrop(Command::new(&bin).stdout(Stdio::null()).spawn().unwrap());
    let pid = load.id();
    let dump = wait_for_dump(&dumps, Duration::from_secs(20));
    stop(flight);
    let trigger = std::fs::read_to_string(dump.join("trigger.txt")).unwrap();
    assert!(trigger.starts_with(&format!("start: pid {pid} (spike-O2) started, at ")), "trigger.txt: {trigger}");
    // Written 4 s after the start: the 2 s the program burned first are in.
    let on = read_folded(&dump.join("oncpu.folded"));
    let cpu = cpu_seconds(pid);
    let floor = early_floor(cpu);
    let early = weight_with(&on, "early_fn");
    assert!(early >= floor, "early_fn has {early} samples in the dump (want {floor}: {cpu:.2} s of CPU at 49 Hz)");
}

/// `fgbpf dump --dumps DIR`, run as `uid` (0: root).
fn ask(dumps: &Path, uid: u32) -> std::process::Output {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid", &uid.to_string(), "--regid", &uid.to_string(), "--clear-groups"]);
    cmd.arg(env!("CARGO_BIN_EXE_fgbpf")).args(["dump", "--dumps"]).arg(dumps);
    cmd.output().expect("running setpriv (util-linux)")
}

#[test]
fn fgbpf_dump_asks_the_recorder_through_a_socket_only_root_may_use() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // Under /tmp: another user must reach the socket's directory for the
    // recorder's own check to be what refuses it.
    let dumps = std::env::temp_dir().join(format!("fgbpf-test-flight-ask-{}", std::process::id()));
    let bin = plain_workload("spike");
    let load = KillOnDrop(Command::new(&bin).stdout(Stdio::null()).spawn().unwrap());
    let pid = load.id().to_string();
    let flight = spawn_attached(fgbpf().args(["flight", "-p", &pid, "--keep", "20s", "--dumps"]).arg(&dumps));
    // What it ran before the recorder attached is not in the recording.
    let before = cpu_seconds(load.id());
    // early_fn burns the program's first 2 s.
    std::thread::sleep(Duration::from_secs(3));
    let socket = dumps.join("flight.sock");
    let mode = std::fs::symlink_metadata(&socket).expect("the recorder listens in --dumps").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the socket is root's only");
    let out = ask(&dumps, 0);
    assert_ok(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    let dir = PathBuf::from(said.trim_end());
    assert_eq!(dumps_in(&dumps), vec![dir.clone()], "fgbpf dump prints the dump it asked for, written when it returns");
    let why = std::fs::read_to_string(dir.join("trigger.txt")).unwrap();
    assert!(why.starts_with("asked by fgbpf dump, pid "), "trigger.txt says who asked: {why}");
    let early = weight_with(&read_folded(&dir.join("oncpu.folded")), "early_fn");
    let cpu = cpu_seconds(load.id()) - before;
    let floor = early_floor(cpu);
    assert!(early >= floor, "early_fn has {early} samples in the dump (want {floor}: {cpu:.2} s of CPU at 49 Hz)");
    // Another user: refused by the socket's mode, and by the recorder
    // when the mode lets it in.
    let nobody = ask(&dumps, 65534);
    assert_eq!(nobody.status.code(), Some(2), "{nobody:?}");
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("answers root only"), "{nobody:?}");
    std::fs::set_permissions(&dumps, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let nobody = ask(&dumps, 65534);
    assert_eq!(nobody.status.code(), Some(1), "{nobody:?}");
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("only root may ask"), "{nobody:?}");
    assert_eq!(dumps_in(&dumps).len(), 1, "no dump for another user");
    stop(flight);
    assert!(!socket.exists(), "the recorder removes its socket at its end");
    std::fs::remove_dir_all(&dumps).unwrap();
}

#[test]
fn two_dumps_asked_at_the_same_moment_write_two_directories() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-two");
    let bin = plain_workload("spike");
    let load = KillOnDrop(Command::new(&bin).stdout(Stdio::null()).spawn().unwrap());
    let pid = load.id().to_string();
    let flight = spawn_attached(fgbpf().args(["flight", "-p", &pid, "--keep", "20s", "--dumps"]).arg(&dumps));
    let before = cpu_seconds(load.id());
    std::thread::sleep(Duration::from_secs(3));
    flight.signal(libc::SIGUSR1);
    let out = ask(&dumps, 0);
    assert_ok(&out);
    let cpu = cpu_seconds(load.id()) - before;
    let floor = early_floor(cpu);
    let stderr = stop(flight);
    let done = dumps_in(&dumps);
    assert_eq!(done.len(), 2, "two asked, two dumps: {done:?}\n{stderr}");
    let mut whys: Vec<String> = done
        .iter()
        .map(|d| std::fs::read_to_string(d.join("trigger.txt")).unwrap())
        .map(|t| t.split(',').next().unwrap().to_string())
        .collect();
    whys.sort();
    assert_eq!(whys, ["asked by SIGUSR1", "asked by fgbpf dump"], "each says who asked");
    for d in &done {
        let early = weight_with(&read_folded(&d.join("oncpu.folded")), "early_fn");
        assert!(early >= floor, "{}: early_fn has {early} samples (want {floor}: {cpu:.2} s of CPU at 49 Hz)", d.display());
    }
}

/// A tmpfs mounted for one test, unmounted at its end.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_dump_on_a_full_disk_is_said_and_the_recorder_goes_on() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-full");
    std::fs::create_dir_all(&dumps).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=200k,mode=0700", "tmpfs"]).arg(&dumps).status();
    assert!(mounted.is_ok_and(|s| s.success()), "mounting a small tmpfs at {}", dumps.display());
    let _mount = Mounted(dumps.clone());
    let bin = plain_workload("spike");
    let load = KillOnDrop(Command::new(&bin).stdout(Stdio::null()).spawn().unwrap());
    let pid = load.id().to_string();
    let flight = spawn_attached(fgbpf().args(["flight", "-p", &pid, "--keep", "20s", "--dumps"]).arg(&dumps));
    std::thread::sleep(Duration::from_secs(3));
    // A dump is about 500 KB: it does not fit, and what it wrote goes.
    let full = ask(&dumps, 0);
    assert_eq!(full.status.code(), Some(1), "{full:?}");
    let said = String::from_utf8_lossy(&full.stderr);
    assert!(said.contains("could not dump") && said.contains("No space left on device"), "the error says why: {said}");
    let left: Vec<_> = std::fs::read_dir(&dumps).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left, ["flight.sock"], "the failed dump's files are removed");
    // Room again: the recorder, still running, writes the next one.
    let grown = Command::new("mount").args(["-o", "remount,size=16m"]).arg(&dumps).status();
    assert!(grown.is_ok_and(|s| s.success()), "growing the tmpfs");
    let out = ask(&dumps, 0);
    assert_ok(&out);
    let stderr = stop(flight);
    assert!(stderr.contains("could not write") && stderr.contains("recording goes on"), "the recorder says it: {stderr}");
    assert_eq!(dumps_in(&dumps).len(), 1, "the dump asked after is written");
}

#[test]
fn a_memory_ceiling_below_the_recorders_own_keeps_ten_seconds_and_says_so() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-ceiling");
    let bin = plain_workload("spike");
    let load = KillOnDrop(Command::new(&bin).stdout(Stdio::null()).spawn().unwrap());
    let pid = load.id().to_string();
    // fgbpf itself needs more than 32 MB: the ceiling cuts the window to
    // its floor, 10 s, and early_fn (the workload's first 2 s) goes.
    let args = ["flight", "-p", &pid, "--keep", "60s", "--max-memory", "32", "--dumps"];
    let flight = spawn_attached(fgbpf().args(args).arg(&dumps));
    std::thread::sleep(Duration::from_secs(24));
    let out = ask(&dumps, 0);
    assert_ok(&out);
    let stderr = stop(flight);
    let dump = wait_for_dump(&dumps, Duration::from_secs(5));
    assert!(
        stderr.contains("memory: even the last 10 s leave fgbpf above --max-memory 32 MB; raise it"),
        "the log says the ceiling is too low: {stderr}"
    );
    let wrote = stderr.split("wrote the last ").nth(1).and_then(|t| t.split(' ').next()).expect("the dump is said");
    let seconds: f64 = wrote.parse().unwrap();
    assert!((9.5..=11.0).contains(&seconds), "the dump holds {seconds} s (want the 10 s floor)");
    let why = std::fs::read_to_string(dump.join("trigger.txt")).unwrap();
    assert!(
        why.contains("this dump holds the last 10 s, not --keep 60 s: fgbpf's memory ceiling (--max-memory 32 MB"),
        "the dump says what the ceiling dropped: {why}"
    );
    let on = read_folded(&dump.join("oncpu.folded"));
    assert_eq!(weight_with(&on, "early_fn"), 0, "early_fn fell before the cut");
    // And what came after the cut is kept: spike_fn burns 5 s from 10-14 s
    // after the start, so the last 10 s before the dump at ~24 s (ending
    // at the last drain, up to 1 s earlier) hold 1 s of it at least: 49
    // samples at 49 Hz, 40 allowing for the edges.
    let spike = weight_with(&on, "spike_fn");
    assert!(spike >= 40, "spike_fn has {spike} samples in the dump's 10 s (want 40 at least)");
    assert!(stderr.contains("memory: the ceiling (--max-memory 32 MB) cut the kept window"), "the end says it: {stderr}");
}

#[test]
fn an_exited_process_keeps_its_names_when_the_recorder_forgets() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dumps = out_dir("flight-exited");
    let bin = plain_workload("spike");
    let flight = spawn_attached(fgbpf().args(["flight", "--keep", "60s", "--dumps"]).arg(&dumps));
    // spike.c burns early_fn (called by main) for its first 2 s; killed at
    // 3 s, it exits, and its stacks stay in the window through the
    // recorder's forgetting (every 10 s) until the dump.
    let load = KillOnDrop(Command::new(&bin).stdout(Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_secs(3));
    // Started while the recorder ran: all it ran of early_fn.
    let cpu = cpu_seconds(load.id());
    drop(load);
    std::thread::sleep(Duration::from_secs(12));
    let out = ask(&dumps, 0);
    assert_ok(&out);
    stop(flight);
    let dump = wait_for_dump(&dumps, Duration::from_secs(5));
    let on = read_folded(&dump.join("oncpu.folded"));
    let early = weight_with(&on, "early_fn");
    let floor = early_floor(cpu);
    assert!(early >= floor, "early_fn has {early} samples in the dump (want {floor}: {cpu:.2} s of CPU at 49 Hz)");
    // Walked past early_fn (all but a process's first few samples, taken
    // before its unwind tables were placed): every caller named. Kernel
    // frames (a sample in an interrupt's softirq) are not callers.
    let user = |f: &Vec<String>| f.iter().filter(|x| !x.ends_with("_[k]")).count();
    let walked: Vec<&(Vec<String>, u64)> =
        on.iter().filter(|(f, _)| f.iter().any(|x| x == "early_fn") && user(f) > 3).collect();
    let weight: u64 = walked.iter().map(|(_, w)| w).sum();
    // The rest were walked by frame pointers before the process's tables
    // were placed: a gcc -O2 leaf's walk ends at the leaf, `early_fn`
    // alone, and the report says so for the process. How many is a time
    // (how long placing takes), not asserted here: 14 to 28 of ~98 (0.3 to
    // 0.6 s at 49 Hz) in a debug build on 2026-11-28, on main and with
    // walks by file alike; a bound of 25 failed 1 run in 4 on main.
    // Placing tables before a process's first sample is issue 63's.
    let leaf_only: u64 = on.iter().filter(|(f, _)| f.iter().filter(|x| !x.ends_with("_[k]")).count() == 3 && f[2] == "early_fn").map(|(_, w)| w).sum();
    let report = std::fs::read_to_string(dump.join("report.txt")).unwrap();
    eprintln!("early_fn: {weight} of {early} walked past it, {leaf_only} by frame pointers to the leaf only");
    assert_eq!(weight + leaf_only, early, "early_fn's samples: walked past it or stopped at it, nothing else");
    assert!(weight > 0, "none of early_fn's samples walked past it: {report}");
    let said = report.lines().any(|l| l.contains("(spike-O2): ") && l.contains("by frame pointers only (its tables were not built yet)"));
    assert!(leaf_only == 0 || said, "the report does not say spike-O2's walks by frame pointers: {report}");
    for (frames, _) in walked {
        assert!(
            frames.iter().any(|x| x == "main") && !frames.iter().any(|x| x.contains("[unknown]")),
            "the exited process's callers are named: {frames:?}"
        );
    }
}
