//! What CI boots each kernel for (`scripts/kernel-matrix.sh --smoke`, run
//! by `scripts/test.sh` in Debian 5.10 and 6.1 guests, and here on the
//! host): every capture command loads on this kernel, records a program
//! built the way users build (`gcc -O2`, no frame pointers) and writes its
//! files, with its stacks whole, and the kernel fallbacks fgbpf takes are
//! the ones docs/kernels.md's table of booted kernels names for it. Bounds are on
//! what the workload does, not on timing: an emulated guest is 5-10 times
//! slower, so windows are long enough for a few hundred samples there too.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

type Stacks = Vec<(Vec<String>, u64)>;

/// The matrix's name for this kernel (`FGBPF_KERNEL_NAME`, set in its
/// guests), `host` when run outside it, with `:WORDS` when fallbacks are
/// forced: the row of docs/kernels.md's table this run is held to.
fn kernel_row() -> String {
    let name = std::env::var("FGBPF_KERNEL_NAME").unwrap_or_else(|_| "host".to_string());
    match std::env::var("FGBPF_FORCE_FALLBACK") {
        Ok(force) if !force.is_empty() => format!("{name}:{force}"),
        _ => name,
    }
}

/// The fallback words docs/kernels.md's "Kernels booted" table gives `row`.
fn table_words(row: &str) -> Vec<String> {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/kernels.md")).unwrap();
    let table = page
        .split("<!-- kernels booted -->")
        .nth(1)
        .expect("docs/kernels.md has a table of booted kernels between <!-- kernels booted --> marks");
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("| `{row}` |")))
        .unwrap_or_else(|| panic!("docs/kernels.md's table of booted kernels has no row for `{row}`: add one"));
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    // | name | booted | result | fallbacks |
    let words = cells.get(4).expect("a fallbacks column");
    if *words == "none" {
        return vec![];
    }
    words.split(',').map(|w| w.trim().trim_matches('`').to_string()).collect()
}

/// The capture's own stacks (its process's), root first.
fn of_process(stacks: &Stacks, pid: u32) -> Stacks {
    let tag = format!("-{pid}");
    stacks.iter().filter(|(f, _)| f[0].ends_with(&tag)).cloned().collect()
}

/// The fallbacks fgbpf says it took, as words (`--json`).
fn json_words(stdout: &[u8]) -> Vec<String> {
    let json: serde_json::Value = serde_json::from_slice(stdout).expect("one JSON object on stdout");
    json["kernel_fallback_words"]
        .as_array()
        .expect("kernel_fallback_words")
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// report.txt in `dir` names the fallbacks taken, one line each, when
/// docs/kernels.md's row for this kernel has any.
fn report_names_the_fallbacks(dir: &Path) {
    let want = table_words(&kernel_row());
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let listed = report
        .split("\nKernel fallbacks\n")
        .nth(1)
        .map_or(0, |rest| rest.lines().take_while(|l| l.starts_with("  ")).count());
    assert_eq!(listed, want.len(), "report.txt's Kernel fallbacks against docs/kernels.md's {want:?}:\n{report}");
}

/// `plain-O2 split`: 50/30/20 between work_fifty, work_thirty and
/// work_twenty under main, each spinning in spin.
fn check_split(stacks: &Stacks, what: &str) {
    let all = total(stacks);
    assert!(all >= 100, "{what}: {all} samples of the workload (want a few hundred)");
    let whole: u64 = ["work_fifty", "work_thirty", "work_twenty"]
        .iter()
        .map(|w| weight_in_order(stacks, &["main", w, "spin"]))
        .sum();
    // Its stacks are whole to main through .eh_frame (no frame pointers).
    assert!(pct(whole, all) >= 90.0, "{what}: {:.1}% of the samples whole main > work_* > spin (want 90)", pct(whole, all));
    let (fifty, twenty) = (weight_with(stacks, "work_fifty"), weight_with(stacks, "work_twenty"));
    let thirty = weight_with(stacks, "work_thirty");
    assert!(fifty > thirty && thirty > twenty && twenty > 0, "{what}: 50/30/20 read {fifty}/{thirty}/{twenty}");
}

#[test]
fn oncpu_of_a_pid_walks_a_gcc_o2_program_whole_and_names_the_fallbacks() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "60"]).spawn().unwrap());
    let dir = out_dir("kernels-oncpu");
    let pid = target.id().to_string();
    let out = run(fgbpf().args(["oncpu", "-F", "199", "-d", "4", "--json", "-p", &pid, "-o"]).arg(&dir));
    assert_ok(&out);
    for file in ["oncpu.folded", "oncpu.svg", "report.txt"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    check_split(&read_folded(&dir.join("oncpu.folded")), "oncpu -p");
    let row = kernel_row();
    let want = table_words(&row);
    assert_eq!(json_words(&out.stdout), want, "the fallbacks taken on `{row}` against docs/kernels.md's table");
    report_names_the_fallbacks(&dir);
}

#[test]
fn whole_system_oncpu_sees_the_program_whole() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "60"]).spawn().unwrap());
    let dir = out_dir("kernels-system");
    // A whole-system capture may start in two stages (src/probe/staged.rs):
    // its first samples by frame pointers, until the walkers join. In an
    // emulated guest (one host thread, a debug build) they joined 2.5 s
    // in, 45% of a 4 s window: 15 s keeps that under a fifth.
    let out = run(fgbpf().args(["oncpu", "-F", "199", "-d", "15", "-o"]).arg(&dir));
    assert_ok(&out);
    let stacks = of_process(&read_folded(&dir.join("oncpu.folded")), target.id());
    let all = total(&stacks);
    let whole = weight_in_order(&stacks, &["main", "spin"]);
    assert!(all >= 100 && pct(whole, all) >= 75.0, "{whole} of {all} samples whole to main (want 75%)");
}

#[test]
fn offcpu_puts_each_wait_under_its_caller() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["waits", "60"]).spawn().unwrap());
    // Blocked from before the capture: its stacks are walked from the
    // registers a task iterator reads (src/probe/seeds.rs).
    let mut idle = Command::new(plain_workload("plain"));
    let mut idle = KillOnDrop(idle.arg("idle").stdout(std::process::Stdio::piped()).spawn().unwrap());
    assert_eq!(first_line(&mut idle.0).trim(), "ready");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let dir = out_dir("kernels-offcpu");
    let pids = format!("{},{}", target.id(), idle.id());
    let out = run(fgbpf().args(["offcpu", "-d", "4", "-p", &pids, "-o"]).arg(&dir));
    assert_ok(&out);
    for file in ["offcpu.folded", "offcpu.svg", "report.txt"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    report_names_the_fallbacks(&dir);
    let stacks = read_folded(&dir.join("offcpu.folded"));
    for (thread, caller) in [("napper", "nap_50ms"), ("reader", "wait_for_byte")] {
        let mine: Stacks = stacks.iter().filter(|(f, _)| f.get(1).is_some_and(|t| t.starts_with(&format!("{thread}-")))).cloned().collect();
        let all = total(&mine);
        // Each sleeps or blocks nearly all of the 4 s.
        assert!(all >= 2_000_000, "{thread}: {all} us off-CPU in 4 s");
        let under = weight_in_order(&mine, &["start_thread", caller]);
        assert!(pct(under, all) >= 95.0, "{thread}: {:.1}% of its wait under start_thread > {caller} (want 95)", pct(under, all));
    }
    let idle_stacks = of_process(&stacks, idle.id());
    for path in [
        &["[blocked before capture]", "_start", "__libc_start_main_impl", "main", "idle_in_main", "__libc_pause"][..],
        &["[blocked before capture]", "clone3", "start_thread", "idler", "wait_forever"][..],
    ] {
        let whole = weight_in_order(&idle_stacks, path);
        assert!(whole >= 3_000_000, "{whole} us under {path:?}: {idle_stacks:?}");
    }
}

#[test]
fn wall_with_wakers_joins_a_read_with_the_write_that_ended_it() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["wakeups", "60"]).spawn().unwrap());
    let dir = out_dir("kernels-wall");
    let out = run(fgbpf().args(["wall", "--wakers", "-F", "199", "-d", "4", "-p", &target.id().to_string(), "-o"]).arg(&dir));
    assert_ok(&out);
    for file in ["wall.folded", "wall.svg", "offwake.folded", "report.txt"] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    report_names_the_fallbacks(&dir);
    let wall = read_folded(&dir.join("wall.folded"));
    let reader = weight_in_order(&wall, &["start_thread", "wait_for_byte"]);
    assert!(reader >= 2_000_000, "the reader's wait in wall.folded: {reader} us of 4 s");
    let woken = read_folded(&dir.join("offwake.folded"));
    let (mut hit, mut all) = (0, 0);
    for (f, w) in woken.iter().filter(|(f, _)| f.get(1).is_some_and(|t| t.starts_with("reader-"))) {
        all += w;
        let sep = f.iter().position(|x| x == "--");
        if sep.is_some_and(|s| f[..s].iter().any(|x| x == "wait_for_byte") && f[s..].iter().any(|x| x == "notify_reader_[w]")) {
            hit += w;
        }
    }
    assert!(all > 0 && pct(hit, all) >= 80.0, "{hit} of the reader's {all} us woken by notify_reader (want 80%)");
}

#[test]
fn top_piped_prints_a_table_a_second_naming_the_busy_function() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "60"]).spawn().unwrap());
    // 8 s: in an emulated guest on a busy host a turn's naming took over
    // a second, and 4.5 s printed one table (a smoke run, 2026-11-27).
    let out = run(fgbpf().args(["top", "-p", &target.id().to_string(), "-F", "199", "-d", "8"]));
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let tables: Vec<&str> = text.split("\n\n").filter(|t| t.starts_with("# fgbpf top: ")).collect();
    assert!(tables.len() >= 2, "{} tables in 8 s:\n{text}", tables.len());
    let last = tables.last().unwrap();
    assert!(last.lines().any(|l| l.ends_with("\twork_fifty")), "work_fifty in the last table:\n{last}");
}

#[test]
fn flight_keeps_the_recent_past_and_dump_writes_it() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let target = KillOnDrop(Command::new(plain_workload("plain")).args(["split", "60"]).spawn().unwrap());
    let dumps = out_dir("kernels-flight");
    let pid = target.id().to_string();
    let flight = spawn_attached(
        fgbpf().args(["flight", "-p", &pid, "--keep", "20s", "-F", "199", "--dumps"]).arg(&dumps).stdin(Stdio::null()),
    );
    std::thread::sleep(Duration::from_secs(4));
    let asked = run(fgbpf().args(["dump", "--dumps"]).arg(&dumps));
    assert_ok(&asked);
    let since = Instant::now();
    let dump = loop {
        let done: Vec<_> = std::fs::read_dir(&dumps)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("trigger.txt").is_file())
            .collect();
        if let Some(d) = done.first() {
            break d.clone();
        }
        assert!(since.elapsed() < Duration::from_secs(60), "no dump under {} a minute after asking", dumps.display());
        std::thread::sleep(Duration::from_millis(200));
    };
    flight.signal(libc::SIGINT);
    let out = flight.finish_by(Instant::now(), Duration::from_secs(60));
    assert_ok(&out);
    for file in ["oncpu.folded", "offcpu.folded", "wall.folded", "report.txt"] {
        assert!(dump.join(file).is_file(), "a dump is a capture directory: {file}");
    }
    check_split(&of_process(&read_folded(&dump.join("oncpu.folded")), target.id()), "flight's dump");
    report_names_the_fallbacks(&dump);
}
