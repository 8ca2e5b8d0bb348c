//! `fgbpf top` as a user runs it: in a real terminal (tmux, 80x24: keys
//! sent with `send-keys`, the screen read with `capture-pane`), and with
//! stdout piped. The workloads are `gcc -O2` builds of plain.c.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// A tmux session of 80x24 running one shell command, killed at the end.
struct Tmux {
    name: String,
}

impl Tmux {
    /// Starts `command` (a shell line) in a new detached session. After it
    /// ends, the pane shows `EXITED <status>`, the terminal's line
    /// settings and `SHOWN`, and stays open.
    fn start(test: &str, command: &str) -> Tmux {
        let name = format!("fgbpf-{test}-{}", std::process::id());
        let line = format!("{command}; echo EXITED $?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon'; echo SHOWN; sleep 120");
        let status = Command::new("tmux")
            .args(["-L", &name, "new-session", "-d", "-s", &name, "-x", "80", "-y", "24", "sh", "-c", &line])
            .env("TERM", "xterm-256color")
            .status()
            .expect("running tmux (scripts/test.sh installs it)");
        assert!(status.success(), "tmux new-session");
        Tmux { name }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").args(["-L", &self.name]).args(args).output().expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", &self.name, k]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    /// Polls the screen until `ok` accepts it; fails with the last screen
    /// after `limit` (a guard against a hang, not a speed requirement).
    fn wait_for(&self, what: &str, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(start.elapsed() < limit, "no {what} on the screen after {limit:?}:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the command's end and checks that it exited with 0; the
    /// screen after it, with the line settings (`SHOWN` follows them: a
    /// screen read between `EXITED` and stty's line lacks them, which
    /// failed a fresh-clone CI as "the terminal was left raw").
    fn exited_ok(&self) -> String {
        let after = self.wait_for("the command's end", Duration::from_secs(15), |s| s.contains("SHOWN"));
        assert!(after.contains("EXITED 0"), "{after}");
        after
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.name, "kill-server"]).status();
    }
}

/// The numbers of the functions table's row for `name`: %Self and %Total
/// of the interval, then %Self, %Total, self and total time since start.
fn row(screen: &str, name: &str) -> Option<Vec<f64>> {
    let line = screen.lines().find(|l| l.split_whitespace().last() == Some(name))?;
    let nums: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches('s').parse().ok())
        .collect();
    (nums.len() >= 6).then_some(nums)
}

/// Seconds the header says the capture has run.
fn elapsed(screen: &str) -> Option<f64> {
    let header = screen.lines().find(|l| l.starts_with("fgbpf top:"))?;
    header.split(" | ").find_map(|p| p.strip_suffix(" s")?.parse().ok())
}

fn bin() -> String {
    env!("CARGO_BIN_EXE_fgbpf").to_string()
}

#[test]
fn in_a_terminal_the_split_is_on_screen_and_q_restores_the_terminal() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "60"]).spawn().unwrap());
    let started = Instant::now();
    let tmux = Tmux::start("split", &format!("{} top -p {} -F 999", bin(), target.id()));
    // Sorted by self time first, spin (the leaf of all three) leads and
    // kernel frames follow; `s` three times sorts by total since start.
    tmux.wait_for("the table", Duration::from_secs(15), |s| row(s, "spin").is_some());
    tmux.keys(&["s", "s", "s"]);
    let screen = tmux.wait_for("three functions", Duration::from_secs(15), |s| {
        s.contains("sorted by total, since start")
            && ["work_fifty", "work_thirty", "work_twenty"].iter().all(|f| row(s, f).is_some())
    });
    eprintln!("the three functions were on the screen {:.2} s after launch:\n{screen}", started.elapsed().as_secs_f64());
    // The shares since the start, once 3 s are in: spin is the leaf (self)
    // of all three, so their shares are totals.
    let screen = tmux.wait_for("3 s of capture", Duration::from_secs(15), |s| elapsed(s).is_some_and(|e| e >= 3.0));
    for (f, want) in [("work_fifty", 50.0), ("work_thirty", 30.0), ("work_twenty", 20.0)] {
        let r = row(&screen, f).unwrap_or_else(|| panic!("no {f} row:\n{screen}"));
        assert!((r[3] - want).abs() <= 3.0, "{f}: {:.1}% since start, want {want} within 3 points:\n{screen}", r[3]);
    }
    let spin = row(&screen, "spin").unwrap_or_else(|| panic!("no spin row:\n{screen}"));
    assert!(spin[2] >= 95.0, "spin's self share {:.1}%:\n{screen}", spin[2]);
    tmux.keys(&["q"]);
    let after = tmux.exited_ok();
    assert_eq!(tmux.tmux(&["display", "-p", "-t", &tmux.name, "#{alternate_on}"]).trim(), "0", "still on the alternate screen");
    assert_eq!(tmux.tmux(&["display", "-p", "-t", &tmux.name, "#{cursor_flag}"]).trim(), "1", "the cursor is hidden");
    let lines: Vec<&str> = after.lines().map(str::trim).collect();
    assert!(lines.contains(&"icanon") && !lines.contains(&"-icanon"), "the terminal was left raw:\n{after}");
    assert!(!after.contains("work_fifty"), "the view was left on the screen:\n{after}");
}

#[test]
fn keys_narrow_pause_switch_to_off_cpu_and_write_a_capture() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let busy = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "90"]).spawn().unwrap());
    let waits = KillOnDrop(Command::new(plain_workload("plain")).args(["waits", "90"]).spawn().unwrap());
    let dir = out_dir("top-keys");
    let tmux = Tmux::start(
        "keys",
        &format!("{} top -p {},{} -F 499 -o {}", bin(), busy.id(), waits.id(), dir.display()),
    );
    tmux.wait_for("the table", Duration::from_secs(15), |s| row(s, "spin").is_some());
    tmux.keys(&["s", "s", "s"]);
    tmux.wait_for("work_fifty", Duration::from_secs(15), |s| row(s, "work_fifty").is_some());

    // Narrow to the napper thread from the thread table (paused, so that
    // the rows hold still while the keys are sent).
    tmux.keys(&["t"]);
    tmux.wait_for("the napper thread", Duration::from_secs(15), |s| s.contains("napper"));
    tmux.keys(&["p"]);
    let tasks = tmux.wait_for("the paused thread table", Duration::from_secs(5), |s| s.contains("PAUSED") && s.contains("napper"));
    let rows: Vec<&str> = tasks.lines().skip_while(|l| !l.contains("PID")).skip(1).collect();
    let at = rows.iter().position(|l| l.contains("napper")).unwrap_or_else(|| panic!("{tasks}"));
    for _ in 0..at {
        tmux.keys(&["Down"]);
    }
    tmux.keys(&["Enter"]);
    tmux.keys(&["p"]);
    let narrowed = tmux.wait_for("the narrowing", Duration::from_secs(5), |s| s.contains("(napper) only"));
    assert!(row(&narrowed, "work_fifty").is_none(), "another thread's function shown:\n{narrowed}");

    // Its waits off-CPU: the sleep in nap_50ms, and none of the reader's.
    tmux.keys(&["o"]);
    let off = tmux.wait_for("the napper's sleep", Duration::from_secs(5), |s| s.contains("off-CPU") && s.contains("nap_50ms"));
    assert!(!off.contains("wait_for_byte"), "the reader's wait shown while narrowed to the napper:\n{off}");
    tmux.keys(&["a"]);
    tmux.wait_for("every thread's waits", Duration::from_secs(5), |s| s.contains("wait_for_byte") && !s.contains(" only"));
    tmux.keys(&["o"]);
    tmux.wait_for("the on-CPU side", Duration::from_secs(5), |s| s.contains("on-CPU") && row(s, "work_fifty").is_some());

    // Paused, the screen holds still; resumed, it moves on.
    tmux.keys(&["p"]);
    let paused = tmux.wait_for("PAUSED", Duration::from_secs(5), |s| s.contains("PAUSED"));
    std::thread::sleep(Duration::from_millis(2500));
    let still = tmux.screen();
    assert_eq!(elapsed(&paused), elapsed(&still), "the paused view moved:\n{paused}\n{still}");
    tmux.keys(&["p"]);
    let before = elapsed(&still).unwrap();
    tmux.wait_for("the view moving again", Duration::from_secs(10), |s| elapsed(s).is_some_and(|e| e > before + 1.0));

    // Written: a capture `fgbpf report` reads, with the screen's shares.
    tmux.keys(&["w"]);
    let wrote = tmux.wait_for("the written capture", Duration::from_secs(20), |s| s.contains("wrote "));
    let shown = row(&wrote, "work_fifty").unwrap_or_else(|| panic!("{wrote}"))[3];
    // Ctrl-C quits as q does.
    tmux.keys(&["C-c"]);
    tmux.exited_ok();
    let written: PathBuf = dir.clone();
    for f in ["oncpu.folded", "offcpu.folded", "wall.folded", "report.txt", "oncpu.svg"] {
        assert!(written.join(f).exists(), "{f} not written in {}", written.display());
    }
    let report = run(fgbpf().arg("report").arg(&written));
    assert_ok(&report);
    let stacks = read_folded(&written.join("oncpu.folded"));
    let share = weight_with(&stacks, "work_fifty") as f64 * 100.0 / total(&stacks).max(1) as f64;
    assert!((share - shown).abs() <= 2.0, "work_fifty: {share:.1}% written, {shown:.1}% on the screen");
}

#[test]
fn without_a_terminal_one_table_per_interval_and_no_escape_codes() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "30"]).spawn().unwrap());
    let out = run(fgbpf().args(["top", "-p", &target.id().to_string(), "-F", "499", "-d", "3.5"]));
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(!text.contains('\x1b'), "escape codes in the piped output:\n{text}");
    let tables: Vec<&str> = text.split("\n\n").filter(|t| !t.trim().is_empty()).collect();
    assert!(tables.len() >= 2, "{} tables in 3.5 s:\n{text}", tables.len());
    for t in &tables {
        let mut lines = t.lines();
        assert!(lines.next().is_some_and(|l| l.starts_with("# fgbpf top: ")), "{t}");
        let head: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
        assert_eq!(head.first(), Some(&"%self"), "{t}");
        for l in lines.filter(|l| !l.starts_with('#')) {
            let fields: Vec<&str> = l.split('\t').collect();
            assert_eq!(fields.len(), head.len(), "{l}");
            assert!(fields[..8].iter().all(|f| f.parse::<f64>().is_ok()), "{l}");
        }
    }
    let last = tables.last().unwrap();
    let fifty = last
        .lines()
        .find(|l| l.ends_with("\twork_fifty"))
        .unwrap_or_else(|| panic!("no work_fifty row:\n{last}"));
    let total_all: f64 = fifty.split('\t').nth(5).unwrap().parse().unwrap();
    assert!((total_all - 50.0).abs() <= 5.0, "work_fifty {total_all}% since start:\n{last}");
}

/// The PIDs of running `fgbpf top` processes whose command line holds `arg`.
fn tops_with(arg: &str) -> Vec<u32> {
    let me = bin();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> = cmd.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            let running = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'));
            running && args.first() == Some(&me) && args.iter().any(|a| a == arg)
        })
        .collect()
}

#[test]
fn a_terminal_that_goes_away_ends_top() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "60"]).spawn().unwrap());
    let pid = target.id().to_string();
    let tmux = Tmux::start("hangup", &format!("{} top -p {pid}", bin()));
    tmux.wait_for("the table", Duration::from_secs(15), |s| row(s, "spin").is_some());
    assert_eq!(tops_with(&pid).len(), 1, "fgbpf top not found");
    // The terminal is gone (an ssh session dropped): top ends.
    drop(tmux);
    let start = Instant::now();
    while !tops_with(&pid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "fgbpf top still runs 10 s after its terminal went away");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What fgbpf says while the view is up (here: a receiver that refuses
/// every connection) is shown in the view's status line, and printed once
/// the terminal is back: written to the alternate screen, it was lost with
/// it when the view ended.
#[test]
fn what_is_said_while_the_view_is_up_is_shown_then_printed() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "60"]).spawn().unwrap());
    let command = format!(
        "{} top -p {} --otlp 127.0.0.1:1 --otlp-insecure --otlp-interval 1",
        bin(),
        target.id()
    );
    let tmux = Tmux::start("said", &command);
    let screen = tmux.wait_for("the receiver's failure in the view", Duration::from_secs(20), |s| {
        row(s, "spin").is_some() && s.lines().any(|l| l.contains("OTLP: ") && l.contains("failed"))
    });
    assert!(screen.lines().next().is_some_and(|l| l.starts_with("fgbpf top:")), "{screen}");
    tmux.keys(&["q"]);
    let after = tmux.exited_ok();
    let said: Vec<&str> = after.lines().filter(|l| l.starts_with("fgbpf: OTLP: ")).collect();
    // The first failure's warning, once, then the end's account.
    assert_eq!(said.iter().filter(|l| l.contains("failed")).count(), 1, "{after}");
    assert!(said.iter().any(|l| l.contains("not sent to") || l.contains("sent 0 of")), "{after}");
}
