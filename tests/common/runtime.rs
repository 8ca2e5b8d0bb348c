//! The harness of the runtime tests (tests/python.rs, ruby.rs, php.rs,
//! node.rs, java.rs, go.rs): a workload started and waited for until it
//! says that it is ready; fgbpf capturing it while the runtime's own
//! profiler (py-spy, rbspy, excimer, `node --cpu-prof`, JFR, Go's pprof)
//! records the same process at the same time; and the shares of named
//! functions compared between the two, printed as a table and judged
//! with stated tolerances. What is particular to a runtime (its command,
//! its profiler's command and output format, how its frames are named)
//! stays in its own file.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::{assert_ok, capture_pid, fgbpf, out_dir, pct, read_folded, run, spawn_attached, total, weight_in_order_by, KillOnDrop};

/// Stacks as (frames root first, weight).
pub type Folded = Vec<(Vec<String>, u64)>;

/// How long a workload may take to say that it is ready: its start-up and
/// warm-up (a JVM's, 100000 goroutines') on a loaded machine, or an
/// emulated guest's.
pub const READY_LIMIT: Duration = Duration::from_secs(300);

/// Starts `cmd` with its stdout piped and returns once `ready` accepts a
/// line it says (`Some`), with that answer: lines are read by a thread,
/// so that the wait has a limit, which then drains the pipe until the
/// workload ends. `what` names the workload in failures; `missing` is
/// said when it cannot be started (what to install, and how).
pub fn start_until<T>(
    cmd: &mut Command,
    what: &str,
    missing: &str,
    limit: Duration,
    mut ready: impl FnMut(&str) -> Option<T>,
) -> (KillOnDrop, T) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("{missing}: {e}"));
    let out = child.stdout.take().unwrap();
    let child = KillOnDrop(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + limit;
    let mut said = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                if let Some(answer) = ready(&line) {
                    return (child, answer);
                }
                said.push(line);
            }
            Err(RecvTimeoutError::Timeout) => panic!("{what} did not say ready in {limit:?}: {said:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("{what} ended before saying ready: {said:?}"),
        }
    }
}

/// Starts `cmd` and returns once its first line says "ready", as the
/// runtime tests' scripts do once past start-up, in the loop measured.
pub fn start_ready(cmd: &mut Command, what: &str, missing: &str) -> KillOnDrop {
    start_until(cmd, what, missing, READY_LIMIT, |line| {
        assert_eq!(line.trim(), "ready", "{what} did not start");
        Some(())
    })
    .0
}

/// What [`capture_ended`] left.
pub struct Captured {
    pub pid: u32,
    pub dir: PathBuf,
    /// The folded stacks of the capture's kind (`oncpu.folded`, ...).
    pub stacks: Folded,
    pub summary: String,
}

/// `fgbpf KIND -d SECONDS -p PID -o DIR` (on-CPU at 499 Hz; DIR:
/// `out_dir(test)`) on the workload, which must succeed; then the workload
/// is ended, and the capture read.
pub fn capture_ended(workload: KillOnDrop, kind: &str, seconds: &str, test: &str) -> Captured {
    let pid = workload.id();
    let (dir, summary) = capture_pid(kind, pid, seconds, test);
    drop(workload);
    let stacks = read_folded(&dir.join(format!("{kind}.folded")));
    Captured { pid, dir, stacks, summary }
}

/// `fgbpf ARGS -d SECONDS -p PID -o DIR` (DIR: `out_dir(test)`), which
/// must succeed: DIR and fgbpf's output.
pub fn capture_for(args: &[&str], pid: u32, seconds: &str, test: &str) -> (PathBuf, Output) {
    let dir = out_dir(test);
    let out = run(fgbpf().args(args).args(["-d", seconds, "-p", &pid.to_string(), "-o"]).arg(&dir));
    assert_ok(&out);
    (dir, out)
}

/// Waits for the workload to end by itself, failing the test if it has
/// not `limit` later.
pub fn wait_exit(workload: &mut KillOnDrop, limit: Duration) -> ExitStatus {
    let since = Instant::now();
    loop {
        if let Some(status) = workload.0.try_wait().unwrap() {
            return status;
        }
        assert!(since.elapsed() < limit, "the workload did not end in {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A reference profiler's run on the workload: how it starts, how its end
/// is known, and its samples read as folded stacks.
pub struct Reference {
    name: String,
    start: Start,
    end: End,
    read: Box<dyn Fn() -> Folded>,
}

enum Start {
    /// Started with the workload.
    WithWorkload,
    /// A profiler process to spawn, then spawned.
    Spawn(Command),
    Running(KillOnDrop),
    /// A command run to its end, which must succeed.
    Run(Command),
}

/// When a reference's recording is complete.
pub enum End {
    /// The profiler process it spawned has ended, successfully.
    Spawned,
    /// The workload has ended by itself (within the limit), as in-process
    /// profilers write their profile at exit; and successfully if asked.
    Exit { limit: Duration, success: bool },
    /// `path` is written (not empty) within `limit`, then `settle` more.
    File { path: PathBuf, limit: Duration, settle: Duration },
}

impl Reference {
    /// A profiler process (py-spy, rbspy) spawned on the workload, with
    /// its output to null; its end is its exit, which must be a success.
    pub fn process(name: &str, mut cmd: Command, read: impl Fn() -> Folded + 'static) -> Reference {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        Reference { name: name.into(), start: Start::Spawn(cmd), end: End::Spawned, read: Box::new(read) }
    }

    /// A sampler inside the workload (excimer, `node --cpu-prof`, Go's
    /// CPU profile), started with it.
    pub fn in_workload(name: &str, end: End, read: impl Fn() -> Folded + 'static) -> Reference {
        Reference { name: name.into(), start: Start::WithWorkload, end, read: Box::new(read) }
    }

    /// A recording started by a command that must succeed (`jcmd PID
    /// JFR.start`).
    pub fn started_by(name: &str, cmd: Command, end: End, read: impl Fn() -> Folded + 'static) -> Reference {
        Reference { name: name.into(), start: Start::Run(cmd), end, read: Box::new(read) }
    }

    fn begin(&mut self) -> Result<(), String> {
        match &mut self.start {
            Start::WithWorkload | Start::Running(_) => Ok(()),
            Start::Spawn(cmd) => {
                let child = cmd.spawn().map_err(|e| format!("running {}: {e}", self.name))?;
                self.start = Start::Running(KillOnDrop(child));
                Ok(())
            }
            Start::Run(cmd) => {
                let out = cmd.output().map_err(|e| format!("running {cmd:?}: {e}"))?;
                let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                out.status.success().then_some(()).ok_or_else(|| format!("{cmd:?}: {said}"))
            }
        }
    }

    fn finish(&mut self, workload: &mut KillOnDrop) -> Result<(), String> {
        match &self.end {
            End::Spawned => {
                let Start::Running(child) = &mut self.start else { panic!("{} was not started", self.name) };
                let status = child.0.wait().unwrap();
                status.success().then_some(()).ok_or_else(|| format!("{} failed: {status}", self.name))
            }
            End::Exit { limit, success } => {
                let status = wait_exit(workload, *limit);
                (status.success() || !success).then_some(()).ok_or_else(|| format!("the workload of {}: {status}", self.name))
            }
            End::File { path, limit, settle } => {
                let deadline = Instant::now() + *limit;
                while std::fs::metadata(path).map_or(true, |m| m.len() == 0) {
                    if Instant::now() >= deadline {
                        return Err(format!("{} wrote no {}", self.name, path.display()));
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                std::thread::sleep(*settle);
                Ok(())
            }
        }
    }
}

/// How fgbpf's capture and the reference's recording share the time.
pub enum Window<'a> {
    /// `fgbpf -d SECONDS`: the reference starts before it and is waited
    /// for after it (a reference that outlasts it by a second, or one in
    /// the workload itself).
    Seconds(&'a str),
    /// `fgbpf -d SECONDS` first, until attached; then the reference,
    /// recording as many seconds: both sample the same seconds, within
    /// the reference's own start-up (perf's is ~0.2 s here). For a
    /// reference that ends when it has recorded (perf's exit, ~1 s after
    /// its last sample, would lengthen fgbpf's window by as much).
    Together(&'a str),
    /// fgbpf first, until attached; the reference started then, and
    /// fgbpf stopped (Ctrl-C) once the reference is complete: the
    /// reference's window lies inside fgbpf's, however long either takes
    /// to start (seconds in an emulated guest).
    AroundReference,
}

/// What a capture beside a reference left: fgbpf's output directory, its
/// summary, and the reference's stacks.
pub struct Beside {
    pub dir: PathBuf,
    pub summary: String,
    pub theirs: Folded,
}

/// `fgbpf ARGS -p PID -o DIR` (DIR: `out_dir(test)`) on the workload while
/// `reference` records it, as `window` says; fgbpf and the reference must
/// both succeed. fgbpf is stopped whatever becomes of the reference.
pub fn capture_beside(workload: &mut KillOnDrop, args: &[&str], window: Window, test: &str, mut reference: Reference) -> Beside {
    let (dir, out, recorded) = match window {
        Window::Seconds(seconds) => {
            let started = reference.begin();
            let (dir, out) = capture_for(args, workload.id(), seconds, test);
            (dir, out, started.and_then(|()| reference.finish(workload)))
        }
        Window::Together(seconds) => {
            let dir = out_dir(test);
            let capture = spawn_attached(fgbpf().args(args).args(["-d", seconds, "-p", &workload.id().to_string(), "-o"]).arg(&dir));
            let recorded = reference.begin().and_then(|()| reference.finish(workload));
            let out = capture.finish();
            assert_ok(&out);
            (dir, out, recorded)
        }
        Window::AroundReference => {
            let dir = out_dir(test);
            let capture = spawn_attached(fgbpf().args(args).args(["-p", &workload.id().to_string(), "-o"]).arg(&dir));
            let recorded = reference.begin().and_then(|()| reference.finish(workload));
            capture.signal(libc::SIGINT);
            let out = capture.finish();
            assert_ok(&out);
            (dir, out, recorded)
        }
    };
    if let Err(e) = recorded {
        panic!("{e}");
    }
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    Beside { dir, summary, theirs: (reference.read)() }
}

/// A script that exits before fgbpf's first drain of the counts (every
/// second), profiled from its first instruction (`fgbpf oncpu -F 499 -o
/// DIR -- COMMAND`): none of its frames is left as `gone` says (the start
/// of the frame fgbpf writes for a process gone before its code was read),
/// and of the samples running the script, found by its frames (those with
/// a frame of `file`: not by a native frame, which needs the unwind tables
/// of a binary that may not be built yet then), at least 100, 90% have
/// `path` in order, each frame matched by `is`.
pub fn short_script_keeps_names(test: &str, command: &[&OsStr], file: &str, gone: &str, path: &[&str], is: impl Fn(&str, &str) -> bool) {
    let dir = out_dir(test);
    let out = run(fgbpf().args(["oncpu", "-F", "499", "-o"]).arg(&dir).arg("--").args(command));
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let unnamed = weight_in_order_by(&stacks, &[gone], prefixed);
    assert_eq!(unnamed, 0, "frames of the script unnamed in {} samples\n{summary}", total(&stacks));
    let marker = format!(" ({file}:");
    let script: Folded = stacks.iter().filter(|(f, _)| f.iter().any(|x| x.contains(&marker))).cloned().collect();
    let (all, ran) = (total(&stacks), total(&script));
    let named = weight_in_order_by(&script, path, &is);
    eprintln!("the script's frames in order in {named} of the {ran} samples running it, {all} in all");
    let others = || {
        let mut o: Vec<_> = script.iter().filter(|s| weight_in_order_by(std::slice::from_ref(*s), path, &is) == 0).collect();
        o.sort_by_key(|(_, w)| std::cmp::Reverse(*w));
        o.iter().take(5).map(|(f, w)| format!("{} {w}", f.join(";"))).collect::<Vec<_>>().join("\n")
    };
    assert!(ran >= 100, "{ran} of {all} samples running the script\n{summary}");
    assert!(
        pct(named, ran) >= 90.0,
        "the script's frames in order in {:.1}% of the {ran} samples running it ({all} in all); others:\n{}\n{summary}",
        pct(named, ran),
        others()
    );
}

/// Folded text as profilers other than fgbpf write it (`a;b;c COUNT`),
/// leniently: lines that are not so and empty frames are passed over, and
/// a missing file reads as no samples (which no share test passes).
pub fn read_collapsed(path: &Path) -> Folded {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (frames, n) = l.rsplit_once(' ')?;
            Some((frames.split(';').filter(|f| !f.is_empty()).map(str::to_string).collect(), n.parse().ok()?))
        })
        .collect()
}

/// A frame `name (where)`, then anything (a tier's suffix), matched by
/// `wanted`: `name@where` (the start of where: a file, `file:line`) or
/// `name` alone.
pub fn frame_at(frame: &str, wanted: &str) -> bool {
    let (name, place) = wanted.split_once('@').unwrap_or((wanted, ""));
    frame
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix(" ("))
        .is_some_and(|rest| rest.starts_with(place))
}

/// An interpreter frame fgbpf walked, `name (file:line)_[p]` (Ruby, PHP),
/// matched as [`frame_at`] does.
pub fn walked_at(frame: &str, wanted: &str) -> bool {
    frame.strip_suffix("_[p]").is_some_and(|f| frame_at(f, wanted))
}

/// A frame equal to `wanted`.
pub fn exactly(frame: &str, wanted: &str) -> bool {
    frame == wanted
}

/// A frame starting with `wanted` (`"inner (busy.py:"` for any line).
pub fn prefixed(frame: &str, wanted: &str) -> bool {
    frame.starts_with(wanted)
}

/// The share (in percent) of `stacks`' weight whose frames include `path`
/// in this order, root first, each matched by `is(frame, wanted)`.
pub fn share_in_order(stacks: &Folded, path: &[&str], is: impl Fn(&str, &str) -> bool) -> f64 {
    pct(weight_in_order_by(stacks, path, is), total(stacks))
}

/// The stacks of the threads whose label (the second frame) `pick` takes.
pub fn of_threads(stacks: &Folded, pick: impl Fn(&str) -> bool) -> Folded {
    stacks.iter().filter(|(f, _)| f.get(1).is_some_and(|t| pick(t))).cloned().collect()
}

/// One side of a comparison: its name in the table, its stacks, and how a
/// frame of it is matched to a function of the table (`is(frame, name)`).
pub struct Side<'a> {
    pub name: &'a str,
    pub stacks: &'a Folded,
    pub is: &'a dyn Fn(&str, &str) -> bool,
}

/// What a share is a share of.
#[derive(Clone, Copy, PartialEq)]
pub enum Base {
    /// All the side's weight.
    All,
    /// The weight of the functions compared, together.
    Compared,
}

/// How near fgbpf's share must be to the reference's.
#[derive(Clone, Copy, Debug)]
pub enum Within {
    /// This many percentage points.
    Points(f64),
    /// This many standard deviations of the difference between two
    /// independent samplings of the reference's share, with both sides'
    /// sample counts.
    Sigmas(f64),
}

/// One function's shares: fgbpf's and the reference's (weights and
/// percentages), and the known answer if there is one.
#[derive(Debug)]
pub struct Row {
    pub function: String,
    pub ours_weight: u64,
    pub theirs_weight: u64,
    pub ours: f64,
    pub theirs: f64,
    pub known: Option<f64>,
}

/// Shares of named functions in fgbpf's stacks and a reference's.
pub struct Comparison {
    pub rows: Vec<Row>,
    /// The weight each side's shares are of (fgbpf's, the reference's).
    pub bases: (u64, u64),
    names: (String, String),
    table: String,
}

/// Measures each function's share on both sides (the weight of the
/// stacks with a frame of it, of `base`) and prints the table, before any
/// check: a miss in one row shows where its share went.
pub fn compare(title: &str, ours: Side, theirs: Side, functions: &[(&str, Option<f64>)], base: Base) -> Comparison {
    let weight = |side: &Side, function: &str| -> u64 {
        side.stacks.iter().filter(|(f, _)| f.iter().any(|x| (side.is)(x, function))).map(|(_, w)| w).sum()
    };
    let weights: Vec<(u64, u64)> = functions.iter().map(|(f, _)| (weight(&ours, f), weight(&theirs, f))).collect();
    let bases = match base {
        Base::All => (total(ours.stacks), total(theirs.stacks)),
        Base::Compared => weights.iter().fold((0, 0), |(a, b), (x, y)| (a + x, b + y)),
    };
    let rows: Vec<Row> = functions
        .iter()
        .zip(&weights)
        .map(|((function, known), &(a, b))| Row {
            function: function.to_string(),
            ours_weight: a,
            theirs_weight: b,
            ours: pct(a, bases.0),
            theirs: pct(b, bases.1),
            known: *known,
        })
        .collect();
    let of = if base == Base::All { "all samples" } else { "the functions compared" };
    let width = rows.iter().map(|r| r.function.len()).max().unwrap_or(0).max(8);
    let mut table = format!(
        "{title}: shares of {of}, {} {} and {} {}\n  {:width$}  {:>16}  {:>16}  known\n",
        ours.name, bases.0, theirs.name, bases.1, "function", ours.name, theirs.name
    );
    for r in &rows {
        let known = r.known.map_or("-".to_string(), |k| format!("{k}%"));
        let (a, b) = (format!("{:.1}% ({})", r.ours, r.ours_weight), format!("{:.1}% ({})", r.theirs, r.theirs_weight));
        table.push_str(&format!("  {:width$}  {a:>16}  {b:>16}  {known}\n", r.function));
    }
    if rows.iter().all(|r| r.known.is_some()) && !rows.is_empty() {
        let worst = |f: &dyn Fn(&Row) -> f64| rows.iter().map(|r| (f(r) - r.known.unwrap()).abs()).fold(0.0, f64::max);
        let (a, b) = (worst(&|r| r.ours), worst(&|r| r.theirs));
        table.push_str(&format!("  worst error against the known answer: {} {a:.1} points, {} {b:.1}\n", ours.name, theirs.name));
    }
    eprint!("{table}");
    Comparison { rows, bases, names: (ours.name.to_string(), theirs.name.to_string()), table }
}

impl Comparison {
    /// The table as printed.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The row of `function`.
    pub fn row(&self, function: &str) -> &Row {
        self.rows.iter().find(|r| r.function == function).unwrap_or_else(|| panic!("no row {function}"))
    }

    /// Every row's fgbpf share within `points` of its known answer.
    pub fn assert_near_known(&self, points: f64, context: &str) {
        for r in &self.rows {
            let known = r.known.unwrap_or_else(|| panic!("{}: no known answer", r.function));
            assert!(
                (r.ours - known).abs() <= points,
                "{}: {} {:.1}%, off the known {known}% by more than {points} points\n{}{context}",
                r.function,
                self.names.0,
                r.ours,
                self.table
            );
        }
    }

    /// Every row's fgbpf share near the reference's, as `within` says.
    pub fn assert_near_reference(&self, within: Within, context: &str) {
        for r in &self.rows {
            let limit = match within {
                Within::Points(p) => p,
                Within::Sigmas(n) => {
                    let p = r.theirs / 100.0;
                    let (a, b) = (self.bases.0.max(1) as f64, self.bases.1.max(1) as f64);
                    n * 100.0 * (p * (1.0 - p) * (1.0 / a + 1.0 / b)).sqrt()
                }
            };
            assert!(
                (r.ours - r.theirs).abs() <= limit,
                "{}: {} {:.1}% against {}'s {:.1}% on the same process (want within {within:?}: {limit:.1} points)\n{}{context}",
                r.function,
                self.names.0,
                r.ours,
                self.names.1,
                r.theirs,
                self.table
            );
        }
    }
}

/// The reader of a profile written by a process: a closure that keeps
/// `path` for [`Reference`]s.
pub fn reading(path: &Path, read: fn(&Path) -> Folded) -> impl Fn() -> Folded + 'static {
    let path = path.to_path_buf();
    move || read(&path)
}
