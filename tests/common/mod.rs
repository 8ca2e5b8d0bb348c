//! Helpers for tests that run the real fgbpf binary against workloads
//! with known answers (built here with clang and frame pointers).
#![allow(dead_code)]

pub mod browser;
pub mod go;
pub mod jdk;
pub mod nginx;
pub mod pprof_raw;
pub mod roots;
pub mod ruby;
pub mod runtime;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// True when the test may load BPF programs. Under CI a non-root run is a
/// failure, never a silent skip.
pub fn require_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if in_ci() {
        panic!("CI is set but the tests are not running as root: BPF capture tests need root");
    }
    // Built as root (see build.rs) but run as another user.
    panic!("this test loads BPF programs: run it as root (sudo scripts/test.sh)");
}

/// Whether the tests run under CI, as build.rs decides too: CI set at all.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Captures that measure shares of CPU or sample counts: on two CPUs, two
/// of them side by side (or their workloads) disturb each other's answers.
/// Tests of one binary take this lock; binaries run one after another.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn fgbpf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fgbpf"))
}

/// Where scripts/test.sh keeps the tools and runtimes the tests check
/// against (FGBPF_CONSUMERS, else target/consumers).
pub fn consumers_dir() -> PathBuf {
    std::env::var_os("FGBPF_CONSUMERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/consumers"))
}

/// The file `name` is on PATH, if any.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Compiles `tests/workloads/NAME.c` once per test run with frame pointers
/// kept everywhere (clang) and returns the binary's path: the controlled
/// case, next to [`plain_workload`].
pub fn workload(name: &str) -> PathBuf {
    // clang keeps the frame pointer in leaf functions too; gcc 12 does not.
    build(
        name,
        name,
        "clang",
        &["-O1", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-pthread"],
    )
}

/// Compiles `tests/workloads/NAME.c` the way users' programs are built:
/// the machine's default `gcc -O2`, no frame-pointer flags.
pub fn plain_workload(name: &str) -> PathBuf {
    build(name, &format!("{name}-O2"), "gcc", &["-O2", "-pthread"])
}

/// tests/workloads/NAME.c built by `compiler` with `flags` into
/// `bin_name`, once per test binary.
pub fn build(name: &str, bin_name: &str, compiler: &str, flags: &[&str]) -> PathBuf {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workloads");
    let bin = out_dir.join(bin_name);
    let mut built = BUILT.lock().unwrap();
    let key = bin_name.to_string();
    if !built.contains(&key) {
        std::fs::create_dir_all(&out_dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/workloads")
            .join(format!("{name}.c"));
        let status = Command::new(compiler)
            .args(flags)
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .status()
            .unwrap_or_else(|e| panic!("running {compiler} (scripts/setup.sh installs it): {e}"));
        assert!(status.success(), "compiling {}", src.display());
        built.push(key);
    }
    bin
}

/// A fresh, not yet existing output directory for one test.
pub fn out_dir(test: &str) -> PathBuf {
    let dir = out_dir_of(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    dir
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("running fgbpf");
    eprintln!(
        "--- stderr of {cmd:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A capture started by [`spawn_attached`], past its "attached in" line.
pub struct Attached {
    child: Child,
    /// fgbpf's stderr up to and including the attached line.
    head: String,
    rest: JoinHandle<String>,
    stdout: JoinHandle<Vec<u8>>,
}

/// Starts the capture `cmd` and returns once fgbpf says that it is
/// attached, however long attaching takes (0.2-0.6 s here, up to 4 s in an
/// emulated guest): what a test does from here on happens inside the
/// capture. Workloads started before it should outlast any attach and
/// begin what is measured when the test tells them, from here. If fgbpf
/// ends without attaching, this returns at its end; [`Attached::finish`]
/// gives the output to check.
pub fn spawn_attached(cmd: &mut Command) -> Attached {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running fgbpf");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        head.push_str(&line);
        if line.contains("attached in") {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        rest
    });
    let mut out = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = out.read_to_end(&mut bytes);
        bytes
    });
    Attached { child, head, rest, stdout }
}

impl Attached {
    /// Sends `sig` to fgbpf (not yet reaped, so the PID is still its).
    pub fn signal(&self, sig: i32) {
        // SAFETY: a plain syscall to this test's own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for fgbpf to end and returns its output, stderr whole.
    pub fn finish(mut self) -> Output {
        let status = self.child.wait().expect("waiting for fgbpf");
        self.output(status)
    }

    /// As [`Attached::finish`], failing the test (and killing fgbpf) if
    /// fgbpf has not ended `limit` after `since`.
    pub fn finish_by(mut self, since: Instant, limit: Duration) -> Output {
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for fgbpf") {
                return self.output(status);
            }
            if since.elapsed() > limit {
                let _ = self.child.kill();
                let status = self.child.wait().expect("waiting for fgbpf");
                let out = self.output(status);
                panic!(
                    "fgbpf was still running {limit:?} later: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn output(self, status: std::process::ExitStatus) -> Output {
        let stderr = self.head + &self.rest.join().unwrap();
        eprintln!("--- stderr of fgbpf:\n{stderr}");
        Output { status, stdout: self.stdout.join().unwrap(), stderr: stderr.into_bytes() }
    }
}

/// A workload killed (and reaped) when the test ends, however it ends:
/// long-running workloads outlast any attach and the test's own checks.
pub struct KillOnDrop(pub Child);

impl KillOnDrop {
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Sends `sig` to the workload (not yet reaped, so the PID is still its).
    pub fn signal(&self, sig: i32) {
        // SAFETY: a plain syscall to this test's own child.
        unsafe { libc::kill(self.0.id() as i32, sig) };
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "fgbpf failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts that a capture's account of its losses (the summary on stderr,
/// or report.txt) lists none of fgbpf's own: every `lost` line is `lost:
/// none` or the waits whose switch-in the kernel reported neither through
/// `sched_switch` nor as an arrival in the scheduler's record (measured on
/// this machine's kernel with perf and bpftrace: docs/how-it-works.md),
/// which no size or option of fgbpf's can keep. There must be such a line.
pub fn assert_nothing_lost_by_fgbpf(text: &str) {
    let lines: Vec<&str> = text.lines().map(|l| l.trim_start_matches("fgbpf: ")).filter(|l| l.starts_with("lost")).collect();
    assert!(!lines.is_empty(), "no account of losses in:\n{text}");
    let ours: Vec<&&str> = lines.iter().filter(|l| **l != "lost: none" && !l.contains("off-CPU waits whose end sched_switch did not report")).collect();
    assert!(ours.is_empty(), "lost {ours:?} in:\n{text}");
}

/// Parses a folded file into (frames, weight) pairs, checking every line.
pub fn read_folded(path: &Path) -> Vec<(Vec<String>, u64)> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .filter(|line| !line.starts_with("# "))
        .map(|line| {
            let (stack, count) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("malformed folded line {line:?}"));
            let weight = count
                .parse()
                .unwrap_or_else(|_| panic!("bad count in {line:?}"));
            (stack.split(';').map(String::from).collect(), weight)
        })
        .collect()
}

pub fn total(stacks: &[(Vec<String>, u64)]) -> u64 {
    stacks.iter().map(|(_, w)| w).sum()
}

/// Weight of the stacks containing a frame equal to `frame`.
pub fn weight_with(stacks: &[(Vec<String>, u64)], frame: &str) -> u64 {
    stacks
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x == frame))
        .map(|(_, w)| w)
        .sum()
}

/// Weight of the stacks in which `frames` appear in this order (not
/// necessarily adjacent), root first.
pub fn weight_in_order(stacks: &[(Vec<String>, u64)], frames: &[&str]) -> u64 {
    weight_in_order_by(stacks, frames, |frame, want| frame == want)
}

/// The first line a child spawned with its stdout piped writes (its
/// stdout is left taken).
pub fn first_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap();
    line
}

/// As [`weight_in_order`], each frame matched by the start of its name
/// (`"inner (busy.py:"` for any line of `inner`).
pub fn weight_in_order_prefixed(stacks: &[(Vec<String>, u64)], prefixes: &[&str]) -> u64 {
    weight_in_order_by(stacks, prefixes, |frame, want| frame.starts_with(want))
}

/// As [`weight_in_order`], each frame matched by `matches(frame, wanted)`.
pub fn weight_in_order_by(stacks: &[(Vec<String>, u64)], wanted: &[&str], matches: impl Fn(&str, &str) -> bool) -> u64 {
    stacks
        .iter()
        .filter(|(frames, _)| {
            let mut want = wanted.iter().peekable();
            for f in frames {
                if want.peek().is_some_and(|w| matches(f, w)) {
                    want.next();
                }
            }
            want.peek().is_none()
        })
        .map(|(_, w)| w)
        .sum()
}

/// The number a summary gives between `before` and `after` (the first
/// time `before` occurs), e.g. `number_between(s, " over ", " s")`.
pub fn number_between<T: std::str::FromStr>(text: &str, before: &str, after: &str) -> Option<T> {
    text.split(before).nth(1)?.split(after).next()?.parse().ok()
}

/// `part` as a percentage of `all` (0 when `all` is 0).
pub fn pct(part: u64, all: u64) -> f64 {
    part as f64 * 100.0 / all.max(1) as f64
}

/// Percentage of the total under `frame`.
pub fn share(stacks: &[(Vec<String>, u64)], frame: &str) -> f64 {
    weight_with(stacks, frame) as f64 * 100.0 / total(stacks).max(1) as f64
}

/// Weight per thread frame (the second frame of each stack).
pub fn by_thread(stacks: &[(Vec<String>, u64)]) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for (f, w) in stacks {
        *m.entry(f.get(1).cloned().unwrap_or_default()).or_default() += w;
    }
    m
}

/// Where [`out_dir`] put a test's outputs.
pub fn out_dir_of(test: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("out").join(test)
}

/// The capture window as fgbpf measured it (`duration:` in report.txt), in
/// microseconds: a debug build under load may close it a little after its
/// deadline, and off-CPU time is measured against the real window.
pub fn window_us(dir: &Path) -> f64 {
    let report = std::fs::read_to_string(dir.join("report.txt")).expect("report.txt");
    let secs: f64 = report
        .lines()
        .find_map(|l| l.strip_prefix("duration: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("report.txt has a duration line");
    secs * 1e6
}

/// One drawn frame of an inferno SVG: its tooltip name (without the
/// counts), fill, start and width in counts, and `y`.
#[derive(Clone, Debug)]
pub struct SvgFrame {
    pub name: String,
    pub fill: (u8, u8, u8),
    pub x: u64,
    pub w: u64,
    pub y: i64,
}

/// Every frame of an SVG written by fgbpf (inferno's layout).
pub fn svg_frames(path: &Path) -> Vec<SvgFrame> {
    let svg = std::fs::read_to_string(path).unwrap();
    let attr = |s: &str, name: &str| -> String {
        let start = s.find(name).unwrap_or_else(|| panic!("{name} in {s}")) + name.len();
        s[start..start + s[start..].find('"').unwrap()].to_string()
    };
    svg.split("<g><title>")
        .skip(1)
        .map(|f| {
            let title = &f[..f.find("</title>").unwrap()];
            let name = title[..title.rfind(" (").unwrap()]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&");
            let rgb = attr(f, "fill=\"rgb(");
            let v: Vec<u8> = rgb.trim_end_matches(')').split(',').map(|c| c.parse().unwrap()).collect();
            SvgFrame {
                name,
                fill: (v[0], v[1], v[2]),
                x: attr(f, " fg:x=\"").parse().unwrap(),
                w: attr(f, " fg:w=\"").parse().unwrap(),
                y: attr(f, " y=\"").parse().unwrap(),
            }
        })
        .collect()
}

/// The hue of an SVG fill in degrees, as fgbpf's palette measures it.
pub fn hue((r, g, b): (u8, u8, u8)) -> f64 {
    fgbpf::format::palette::hue(inferno::flamegraph::color::Color { r, g, b })
}

/// Headless Chromium's DOM of the file `page` after its scripts ran, with
/// `args` (window size, virtual-time budget) beside the fixed ones.
pub fn dump_dom(page: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("running chromium (scripts/test.sh installs it): {e}"))
}

/// Loads `page` in headless Chromium with `probe` (JavaScript run 300 ms
/// after load, which returns a JSON-able value) and returns that value.
pub fn in_browser(page: &Path, probe: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(page).unwrap();
    let end = text.rfind("</body>").unwrap();
    let probed = page.with_extension("probe.html");
    std::fs::write(
        &probed,
        format!(
            "{}<pre id=\"probe-result\"></pre><script>\nwindow.addEventListener(\"load\", function() {{ setTimeout(function() {{\nvar out = document.getElementById(\"probe-result\");\ntry {{ out.textContent = JSON.stringify((function() {{ {probe} }})()); }} catch (e) {{ out.textContent = JSON.stringify(\"error: \" + e + \" \" + e.stack); }}\n}}, 300); }});\n</script>\n{}",
            &text[..end],
            &text[end..]
        ),
    )
    .unwrap();
    let out = dump_dom(&probed, &["--window-size=1280,1000", "--virtual-time-budget=5000"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let open = "<pre id=\"probe-result\">";
    let at = dom
        .find(open)
        .unwrap_or_else(|| panic!("the probe did not run: {}", String::from_utf8_lossy(&out.stderr)))
        + open.len();
    let result = &dom[at..at + dom[at..].find("</pre>").unwrap()];
    let result = result
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    let value: serde_json::Value = serde_json::from_str(&result)
        .unwrap_or_else(|e| panic!("probe result {result:?}: {e}; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    if let Some(s) = value.as_str() {
        assert!(!s.starts_with("error:"), "{s}");
    }
    value
}

/// `fgbpf CMD -d SECONDS -p PID -o DIR` (on-CPU at 499 Hz), which must
/// succeed: the output directory and what fgbpf said.
pub fn capture_pid(cmd: &str, pid: u32, seconds: &str, test: &str) -> (PathBuf, String) {
    let dir = out_dir(test);
    let mut fg = fgbpf();
    fg.arg(cmd);
    if cmd == "oncpu" {
        fg.args(["-F", "499"]);
    }
    let out = run(fg.args(["-d", seconds, "-p", &pid.to_string(), "-o"]).arg(&dir));
    assert_ok(&out);
    (dir, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Why fgbpf's interpreter walkers (CPython, Ruby, PHP, Go labels) cannot
/// run on this kernel, in the words its summary uses, or `None` when they
/// can: they need `bpf_loop` (Linux 5.17), which kernels before it (Debian
/// 11's 5.10, Ubuntu 22.04's 5.15) lack, and FGBPF_FORCE_FALLBACK=no-loop
/// takes away. Tests of those walkers check on such a kernel that the
/// capture says so and keeps the interpreter's native frames.
pub fn interpreter_walkers_missing() -> Option<String> {
    let paths = fgbpf::probe::features::Paths::probe(None)
        .unwrap_or_else(|e| panic!("reading the kernel's features: {}", e.message));
    paths.compat.taken().then(|| paths.no_loop_why())
}

/// The length of /proc/stat's tick (USER_HZ) in ns.
pub fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// The time the hypervisor took from all of this machine's CPUs so far, in
/// ns (/proc/stat's eighth column, in ticks). The kernel's account of a
/// task's CPU time (rusage, schedstat) leaves it out (its clock_task, with
/// CONFIG_PARAVIRT_TIME_ACCOUNTING, as Debian's kernels and this host's
/// have); cpu-clock samples, taken on the time a task holds a CPU, count
/// it, as a switch-to-switch measure of a run does.
pub fn steal_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap();
    let line = text.lines().find(|l| l.starts_with("cpu ")).unwrap();
    let ticks: u64 = line.split_whitespace().nth(8).unwrap().parse().unwrap();
    ticks * tick_ns()
}
