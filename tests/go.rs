//! The goroutine view of Go programs: `fgbpf offcpu` and `fgbpf wall` on
//! a Go process also read its goroutines (`goroutines.folded`, and a
//! snapshot in report.txt), with Go's own wait reasons. The workloads are
//! tests/workloads/go/*.go, built with the machine's `go` (Debian's
//! golang-go) as users build: `go build -o OUT FILE.go`, default flags.
//! Go's own profiles (net/http/pprof, debug=1 text; its CPU profile read
//! by `go tool pprof -raw`) are the anchor. On-CPU samples carry their
//! goroutine and its pprof labels in fgbpf's pprof output.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::go::*;
use common::runtime::*;
use common::*;
use common::pprof_raw::{raw_samples, RawSample};
use pprof::{parse_pprof_debug1, pprof_goroutines_with, pprof_main_funcs};

/// Go's own profiles in their text form, read.
#[path = "go/pprof.rs"]
mod pprof;

/// How many goroutines of each kind tests/workloads/go/waits.go starts
/// (its constants `waiters`, `nappers`, `lockers`).
const WAITERS: u64 = 4;
const NAPPERS: u64 = 2;
const LOCKERS: u64 = 3;

/// The wait reason of a goroutine blocked in sync.Mutex.Lock, as the
/// runtime spells it: "semacquire" up to Go 1.19 (seen in 1.19.8's
/// goroutine dump: `goroutine 27 [semacquire]:`); Go 1.20 gave the sync
/// primitives their own reasons ("sync.Mutex.Lock").
fn mutex_wait_reason() -> &'static str {
    if go_minor() <= 19 {
        "semacquire"
    } else {
        "sync.Mutex.Lock"
    }
}

/// A Go workload started by [`start_go`]: killed and reaped when dropped.
struct GoProcess {
    child: KillOnDrop,
    /// `http://HOST:PORT` of its net/http/pprof server, when it has one.
    pprof: Option<String>,
}

impl GoProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Starts `bin args` and returns once it says "ready PID", waiting up to
/// 60 s (a loaded machine with two CPUs starts 100000 goroutines slowly).
/// Before it, a workload serving pprof says "pprof http://HOST:PORT".
fn start_go(bin: &Path, args: &[&str]) -> GoProcess {
    let what = format!("{} {args:?}", bin.display());
    let mut pprof = None;
    let ready = |line: &str| {
        if let Some(addr) = line.strip_prefix("pprof ") {
            pprof = Some(addr.trim().to_string());
        }
        line.strip_prefix("ready ").map(|pid| pid.trim().parse::<u32>().ok())
    };
    let starting = format!("starting {}", bin.display());
    let (child, pid) = start_until(Command::new(bin).args(args), &what, &starting, Duration::from_secs(60), ready);
    assert_eq!(pid, Some(child.id()), "{what} said ready with another pid");
    GoProcess { child, pprof }
}

/// The goroutine section of report.txt for one process.
#[derive(Debug)]
struct Snapshot {
    /// Goroutines at the last read.
    total: u64,
    /// The `by state:` line, after its label.
    by_state: String,
    /// Its top stacks: count, frames (root first), state.
    top: Vec<(u64, Vec<String>, String)>,
}

/// Reads the section `Goroutines of PROCNAME (pid PID): N at the last
/// read (...)`, `  by state: ...`, `  top stacks by count:`, then lines
/// `  COUNT  ROOTFUNC;...;LEAFFUNC [STATE]` (COUNT right-aligned).
fn goroutine_snapshot(report: &str, pid: u32) -> Snapshot {
    let of_pid = format!(" (pid {pid}): ");
    let mut lines = report
        .lines()
        .skip_while(|l| !(l.starts_with("Goroutines of ") && l.contains(&of_pid)));
    let head = lines
        .next()
        .unwrap_or_else(|| panic!("report.txt has no goroutine section for pid {pid}:\n{report}"));
    let total = head
        .split_once(&of_pid)
        .and_then(|(_, rest)| rest.split_once(" at the last read").map(|(n, _)| n))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("bad goroutine section head {head:?}"));
    let by_state = lines
        .next()
        .and_then(|l| l.strip_prefix("  by state: "))
        .unwrap_or_else(|| panic!("no `  by state:` line after {head:?}:\n{report}"))
        .to_string();
    let title = lines.next().unwrap_or_default();
    assert_eq!(title.trim_end(), "  top stacks by count:", "after the by state line:\n{report}");
    let mut top = Vec::new();
    for line in lines {
        let Some((count, stack)) = line.trim_start().split_once("  ") else { break };
        let Ok(count) = count.parse::<u64>() else { break };
        let (frames, state) = stack
            .rsplit_once(" [")
            .and_then(|(frames, state)| Some((frames, state.strip_suffix(']')?)))
            .unwrap_or_else(|| panic!("no [STATE] at the end of {line:?}"));
        top.push((count, frames.split(';').map(String::from).collect(), state.to_string()));
    }
    assert!(!top.is_empty(), "no top stacks under {head:?}:\n{report}");
    Snapshot { total, by_state, top }
}

impl Snapshot {
    /// Goroutines whose stack has `func`, by the top stacks.
    fn with(&self, func: &str) -> u64 {
        self.top
            .iter()
            .filter(|(_, frames, _)| frames.iter().any(|f| f == func))
            .map(|(count, _, _)| count)
            .sum()
    }
}

/// goroutines.folded of `pid`, each line checked for its shape:
/// `PROCNAME-PID;goroutines;ROOT;...;LEAF;[STATE] WEIGHT`.
fn read_goroutines(dir: &Path, pid: u32) -> Folded {
    let path = dir.join("goroutines.folded");
    assert!(path.exists(), "no goroutines.folded in {}", dir.display());
    let stacks = read_folded(&path);
    assert!(!stacks.is_empty(), "goroutines.folded is empty");
    let root = format!("-{pid}");
    for (frames, _) in &stacks {
        assert!(frames.len() >= 4, "too short a goroutine stack: {frames:?}");
        assert!(frames[0].ends_with(&root), "root of {frames:?} is not PROCNAME-{pid}");
        assert_eq!(frames[1], "goroutines", "{frames:?}");
        let state = frames.last().unwrap();
        assert!(state.starts_with('[') && state.ends_with(']'), "no [STATE] leaf in {frames:?}");
    }
    stacks
}

/// The state pseudo-frame of a goroutine stack, without its brackets.
fn state_of(frames: &[String]) -> &str {
    let leaf = frames.last().map(String::as_str).unwrap_or_default();
    leaf.trim_start_matches('[').trim_end_matches(']')
}

/// Of the weight of the stacks with `func`: all of it, and the part in
/// `state`.
fn weight_in_state(stacks: &Folded, func: &str, state: &str) -> (u64, u64) {
    let with: Vec<_> = stacks.iter().filter(|(f, _)| f.iter().any(|x| x == func)).collect();
    let all: u64 = with.iter().map(|(_, w)| w).sum();
    let in_state: u64 = with.iter().filter(|(f, _)| state_of(f) == state).map(|(_, w)| w).sum();
    (all, in_state)
}

/// The summary's `fgbpf: own use: X s CPU, ...` line.
fn own_use(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.contains("own use:"))
        .unwrap_or("(no own use line)")
}

/// The `by state:` line as state → goroutines (`4 chan receive, 2 sleep`).
fn by_state(line: &str) -> std::collections::HashMap<String, u64> {
    line.split(", ")
        .filter_map(|item| {
            let (n, state) = item.trim().split_once(' ')?;
            Some((state.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// The stacks with `func`, to show in a failure.
fn with_func(stacks: &Folded, func: &str) -> Folded {
    stacks.iter().filter(|(f, _)| f.iter().any(|x| x == func)).cloned().collect()
}

/// tests/workloads/go/PROGRAM.go built (with `flags`) and started (with
/// `args`), recorded by `fgbpf KIND -p PID -d SECS -o DIR` (DIR:
/// `out_dir(name)`), then stopped: its PID, DIR and fgbpf's output,
/// checked to have succeeded.
fn capture_go(
    program: &str,
    flags: &[&str],
    args: &[&str],
    (kind, secs, name): (&str, &str, &str),
) -> (u32, PathBuf, std::process::Output) {
    let go = start_go(&go_build(program, flags), args);
    let pid = go.pid();
    let (dir, out) = capture_for(&[kind], pid, secs, name);
    drop(go);
    (pid, dir, out)
}

#[test]
fn goroutine_waits_are_under_their_functions_with_go_s_wait_reason() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let mutex = mutex_wait_reason();
    let (pid, dir, _) = capture_go("waits", &[], &[], ("offcpu", "3", "go_waits"));
    let stacks = read_goroutines(&dir, pid);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let snapshot = goroutine_snapshot(&report, pid);
    eprintln!("{} goroutines at the last read; by state: {}", snapshot.total, snapshot.by_state);
    let states = by_state(&snapshot.by_state);
    // Each kind waits where it waits the whole window (the nappers wake
    // for microseconds every 50 ms), and the view covers the window: each
    // read weighs the time since the one before.
    for (func, state, n) in [
        ("main.waiter", "chan receive", WAITERS),
        ("main.napper", "sleep", NAPPERS),
        ("main.locker", mutex, LOCKERS),
    ] {
        let (all, in_state) = weight_in_state(&stacks, func, state);
        let window = 3_000_000 * n;
        eprintln!(
            "{func}: {in_state} of {all} us in [{state}] ({:.1}%); {:.1}% of {n} goroutines x 3 s",
            pct(in_state, all),
            pct(all, window)
        );
        assert!(
            in_state * 10 >= all * 9,
            "{func}: {in_state} of {all} us in [{state}]:\n{:?}",
            with_func(&stacks, func)
        );
        assert!(
            all * 10 >= window * 8,
            "{func}: {all} us of goroutine time; {n} goroutines for 3 s are {window} us:\n{:?}",
            with_func(&stacks, func)
        );
        assert!(states.contains_key(state), "no {state} in the by state line {:?}", snapshot.by_state);
    }
    // The lockers never get the lock; the waiters, and the main goroutine
    // between ticks, are in a channel receive.
    assert_eq!(states.get(mutex), Some(&LOCKERS), "by state: {}", snapshot.by_state);
    assert!(states.get("chan receive").is_some_and(|&n| n >= WAITERS), "by state: {}", snapshot.by_state);
    assert_eq!(snapshot.with("main.locker"), LOCKERS, "{snapshot:?}");
}

#[test]
fn goroutine_snapshot_matches_pprof_goroutine_profile() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let waits = start_go(&go_build("waits", &[]), &["-pprof", "127.0.0.1:0", "-block"]);
    let pid = waits.pid();
    let base = waits.pprof.clone().expect("waits -pprof says where it serves before ready");
    let dir = out_dir("go_pprof");
    let capture = spawn_attached(fgbpf().args(["offcpu", "-p", &pid.to_string(), "-d", "3", "-o"]).arg(&dir));
    // Go's own view of the same goroutines, inside the capture.
    std::thread::sleep(Duration::from_secs(1));
    let goroutine_text = http_get(&base, "/debug/pprof/goroutine?debug=1");
    let block_text = http_get(&base, "/debug/pprof/block?debug=1");
    let out = capture.finish();
    drop(waits);
    assert_ok(&out);
    let _ = std::fs::write(dir.join("pprof-goroutine.txt"), &goroutine_text);
    let _ = std::fs::write(dir.join("pprof-block.txt"), &block_text);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let snapshot = goroutine_snapshot(&report, pid);
    // Goroutines by function: pprof's profile also has its HTTP handler's
    // and the listener's, with no main.* function; compared only the
    // kinds that wait for good (waiters, lockers) or nearly (nappers).
    let goroutines = parse_pprof_debug1(&goroutine_text);
    for (func, n) in [("main.waiter", WAITERS), ("main.napper", NAPPERS), ("main.locker", LOCKERS)] {
        let go = pprof_goroutines_with(&goroutines, func);
        assert_eq!(go, n, "goroutines with {func} in pprof's goroutine profile:\n{goroutine_text}");
        assert_eq!(
            snapshot.with(func),
            go,
            "goroutines with {func}: fgbpf's snapshot {:?}\npprof's goroutine profile:\n{goroutine_text}",
            snapshot.top
        );
    }
    // Block: what Go recorded waiting (the waits that ended: main.ticks'
    // receives, main.main's wait for the holder) waits in fgbpf's view.
    let blocked = pprof_main_funcs(&parse_pprof_debug1(&block_text));
    assert!(blocked.contains("main.ticks"), "no main.ticks in the block profile:\n{block_text}");
    let stacks = read_goroutines(&dir, pid);
    let waiting: BTreeSet<String> = stacks
        .iter()
        .filter(|(f, _)| !["running", "runnable"].contains(&state_of(f)))
        .flat_map(|(f, _)| f.iter())
        .filter(|x| x.starts_with("main."))
        .cloned()
        .collect();
    let missing: Vec<&String> = blocked.difference(&waiting).collect();
    assert!(
        missing.is_empty(),
        "{missing:?} block in pprof's block profile, not waiting in goroutines.folded ({waiting:?}):\n{block_text}"
    );
}

#[test]
fn a_hundred_thousand_parked_goroutines_are_all_read() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    const N: u64 = 100_000;
    let count = N.to_string();
    let (pid, dir, out) = capture_go("many", &[], &[count.as_str()], ("offcpu", "3", "go_many"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("fgbpf on {N} goroutines: {}", own_use(&stderr));
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let snapshot = goroutine_snapshot(&report, pid);
    // The parked ones, the main goroutine and the runtime's own.
    assert!(snapshot.total >= N, "{} goroutines at the last read, of {N} parked and more", snapshot.total);
    let parked = snapshot
        .top
        .iter()
        .filter(|(_, frames, _)| frames.iter().any(|f| f == "main.parked"))
        .max_by_key(|(count, _, _)| *count)
        .unwrap_or_else(|| panic!("no stack with main.parked in {:?}", snapshot.top));
    assert_eq!(parked.0, N, "the stack of main.parked: {parked:?}");
    assert_eq!(parked.2, "chan receive", "the stack of main.parked: {parked:?}");
}

#[test]
fn go_stacks_are_walked_whole_with_its_debug_frame() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (pid, dir, out) = capture_go("waits", &[], &[], ("wall", "2", "go_whole"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Go writes no .eh_frame: its compressed .debug_frame gives the rows.
    assert!(!stderr.contains("no unwind table for"), "{stderr}");
    // The spinner's samples reach its goroutine's root, runtime.goexit
    // (frames 0 and 1 are the process and the thread).
    let on = read_folded(&dir.join("oncpu.folded"));
    let spin: Vec<_> = on.iter().filter(|(f, _)| f.iter().any(|x| x == "main.spinner")).collect();
    let all: u64 = spin.iter().map(|(_, w)| w).sum();
    let whole: u64 = spin.iter().filter(|(f, _)| f.get(2).is_some_and(|r| r == "runtime.goexit")).map(|(_, w)| w).sum();
    assert!(all >= 50, "{all} samples of main.spinner:\n{on:?}");
    assert!(whole * 100 >= all * 95, "{whole} of {all} samples of main.spinner under runtime.goexit:\n{spin:?}");
    // No walk of the process is reported cut short.
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let cut = format!("pid {pid} (");
    assert!(
        !report.lines().any(|l| l.contains(&cut) && l.contains("cut short")),
        "walks of the Go process cut short:\n{report}"
    );
    // This program is linked with the C library (net uses cgo): g is in
    // its TLS block, and its threads' stacks carry their goroutine too.
    let go = format!("Go: pid {pid} (");
    assert!(
        stderr.lines().any(|l| l.contains(&go) && !l.contains(" 0.0% of its time with the goroutine") && l.contains("with the goroutine it ran")),
        "{stderr}"
    );
}

#[test]
fn binary_without_symbols_says_so_and_keeps_its_cpu_profile() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    // No .symtab, no DWARF (.gopclntab stays: Go needs it for its own
    // tracebacks).
    let (pid, dir, out) = capture_go("waits", &["-ldflags=-s -w"], &[], ("wall", "2", "go_stripped"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("goroutines") && l.contains("-s -w"))
        .collect();
    assert_eq!(said.len(), 1, "one line on the goroutines of a binary built with -s -w:\n{stderr}");
    assert!(!dir.join("goroutines.folded").exists(), "goroutines.folded of a binary without symbols");
    for f in ["wall.folded", "oncpu.folded", "offcpu.folded", "report.txt"] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    // The spinner's CPU is still there (named or not): it burns the 2 s,
    // ~198 samples at 99 Hz on an idle machine, fewer when other work shares
    // the CPUs (the count against the kernel's CPU time is tests/oncpu.rs's
    // `command_is_profiled_from_its_start_until_it_exits`); 50, all the
    // program's, say its profile is kept.
    let on = read_folded(&dir.join("oncpu.folded"));
    assert!(total(&on) >= 50, "{} on-CPU samples of the spinner's 2 s", total(&on));
    assert!(on.iter().all(|(f, _)| f[0].ends_with(&format!("-{pid}"))), "only the program's samples: {on:?}");
}

/// A profile's samples as Go's own reader prints them.
fn pprof_raw(path: &Path) -> Vec<RawSample> {
    let out = go_command(&go_dir().join("cache"))
        .args(["tool", "pprof", "-raw"])
        .arg(path)
        .output()
        .expect(NEEDS_GO);
    assert!(out.status.success(), "go tool pprof -raw {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    raw_samples(&String::from_utf8_lossy(&out.stdout))
}

/// The samples' functions as folded stacks, root first.
fn funcs_folded(samples: &[RawSample]) -> Folded {
    samples.iter().map(|s| (s.funcs.iter().rev().cloned().collect(), s.count)).collect()
}

/// Of the samples under `func`: their weight, the weight labelled
/// route=/api, and the distinct `goroutine` labels.
fn labelled(samples: &[RawSample], func: &str) -> (u64, u64, BTreeSet<String>) {
    let under: Vec<&RawSample> = samples.iter().filter(|s| s.funcs.iter().any(|f| f == func)).collect();
    let label = |s: &RawSample, k: &str| s.labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    (
        under.iter().map(|s| s.count).sum(),
        under.iter().filter(|s| label(s, "route").as_deref() == Some("/api")).map(|s| s.count).sum(),
        under.iter().filter_map(|s| label(s, "goroutine")).collect(),
    )
}

#[test]
fn a_labelled_goroutine_s_samples_carry_its_labels_in_pprof_output() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    labels_agree_with_go_s_own_profile(&go_build("labels", &[]), "go_labels");
}

/// Go 1.24 keeps a goroutine's labels as a sorted list, not a map: the
/// same program built by Debian 13's Go 1.24, as its users build it.
#[test]
fn go_1_24_labelled_goroutine_s_samples_carry_its_labels_in_pprof_output() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let bin = go_build_by(&go_1_24(), &go_dir().join("go1.24"), "labels", &[]);
    labels_agree_with_go_s_own_profile(&bin, "go124_labels");
}

/// burn() runs under pprof.Do(ctx, pprof.Labels("route", "/api")), spin()
/// in a goroutine without labels; Go's own CPU profiler samples the same
/// process over the same 3 s.
fn labels_agree_with_go_s_own_profile(bin: &Path, test: &str) {
    let theirs_file = out_dir_of(test).with_extension("go.prof");
    let _ = std::fs::remove_file(&theirs_file);
    let mut go = start_go(bin, &["-cpuprofile", theirs_file.to_str().unwrap(), "-seconds", "3"]);
    let pid = go.pid().to_string();
    // Go writes its profile when it stops it, 3 s after "ready".
    let end = End::File { path: theirs_file.clone(), limit: Duration::from_secs(20), settle: Duration::from_millis(300) };
    let reference = Reference::in_workload("Go's own", end, reading(&theirs_file, |p| funcs_folded(&pprof_raw(p))));
    let args = ["oncpu", "-F", "499", "--format", "pprof,folded"];
    let got = capture_beside(&mut go.child, &args, Window::Seconds("3"), test, reference);
    drop(go);
    let (dir, summary) = (got.dir, got.summary);
    let ours = pprof_raw(&dir.join("oncpu.pb.gz"));
    let theirs = pprof_raw(&theirs_file);
    let (burn, burn_api, burn_ids) = labelled(&ours, "main.burn");
    let (spin, spin_api, spin_ids) = labelled(&ours, "main.spin");
    let (go_burn, go_burn_api, _) = labelled(&theirs, "main.burn");
    let (go_spin, go_spin_api, _) = labelled(&theirs, "main.spin");
    eprintln!(
        "fgbpf: main.burn {burn_api} of {burn} samples route=/api, goroutines {burn_ids:?}; main.spin {spin_api} of {spin}, goroutines {spin_ids:?}\n\
         Go's own: main.burn {go_burn_api} of {go_burn} route=/api; main.spin {go_spin_api} of {go_spin}"
    );
    assert!(burn > 300 && spin > 300, "too few samples of the two goroutines\n{summary}");
    // Every sample of the labelled goroutine carries its label, as in Go's
    // own profile, and one goroutine id; the other none of it.
    assert!(burn_api * 100 >= burn * 99, "{burn_api} of {burn} main.burn samples labelled route=/api\n{summary}");
    assert_eq!(spin_api, 0, "main.spin samples labelled route=/api\n{summary}");
    assert!(go_burn > 50 && go_burn_api * 100 >= go_burn * 99 && go_spin_api == 0, "Go's own profile disagrees");
    // The two goroutines' shares of their CPU, as Go's own profile saw
    // them in the same seconds: within three standard deviations of two
    // independent samplings of the same share (Go's at 100 Hz, ours at 499).
    let ours_folded = funcs_folded(&ours);
    let fg = Side { name: "fgbpf", stacks: &ours_folded, is: &exactly };
    let go = Side { name: "Go's own", stacks: &got.theirs, is: &exactly };
    let cmp = compare("labels.go's two goroutines", fg, go, &[("main.burn", None), ("main.spin", None)], Base::Compared);
    cmp.assert_near_reference(Within::Sigmas(3.0), &summary);
    assert_eq!(burn_ids.len(), 1, "main.burn under goroutines {burn_ids:?}");
    assert_eq!(spin_ids.len(), 1, "main.spin under goroutines {spin_ids:?}");
    assert_ne!(burn_ids, spin_ids, "two goroutines with one id");
    // The summary tells how many of the program's samples carry their
    // goroutine.
    assert!(summary.lines().any(|l| l.contains(&format!("Go: pid {pid} ")) && l.contains("with the goroutine it ran")), "{summary}");
    // Folded output shows no labels unless asked for.
    let folded = std::fs::read_to_string(dir.join("oncpu.folded")).unwrap();
    assert!(!folded.contains("route=/api"), "labels in oncpu.folded without --label-frames");
}
