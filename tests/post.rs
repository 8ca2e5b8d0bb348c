//! The commands that work on profiles after capture (`report`,
//! `flamegraph`, `diff`, `convert`), run as the real binary over the files
//! in tests/fixtures/. No root and no BPF.
//!
//! Outputs are compared byte for byte with tests/fixtures/golden/; after an
//! intended change, regenerate them with `FGBPF_BLESS=1 cargo test --test
//! post` and review the diff. Exports are checked by their real consumers:
//! `go tool pprof` loads the pprof files and speedscope's published JSON
//! schema (validated with ajv-cli) accepts the speedscope files;
//! scripts/test.sh installs both into target/consumers/. Without them
//! these checks are skipped with a message, unless CI=true, where they fail.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fgbpf::format::{folded, pprof, speedscope};
use fgbpf::profile::{Frame, FrameKind, Kind, Profile, Stack, Thread, Unit};

const BIN: &str = env!("CARGO_BIN_EXE_fgbpf");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs fgbpf from the repository root, so fixture paths stay relative and
/// outputs that name their input are the same on every machine.
fn fgbpf(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(ROOT)
        .env_remove("SUDO_UID")
        .output()
        .expect("run fgbpf")
}

fn ok(args: &[&str]) -> Output {
    let out = fgbpf(args);
    assert!(
        out.status.success(),
        "fgbpf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("post-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Compares `actual` with tests/fixtures/golden/NAME, or rewrites it when
/// FGBPF_BLESS=1.
fn golden(name: &str, actual: &[u8]) {
    let path = Path::new(ROOT).join("tests/fixtures/golden").join(name);
    if std::env::var("FGBPF_BLESS").is_ok_and(|v| v == "1") {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, actual).unwrap();
        return;
    }
    let expected = fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; create it with FGBPF_BLESS=1 cargo test --test post",
            path.display()
        )
    });
    if expected != actual {
        let seen = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("golden-actual")
            .join(name);
        fs::create_dir_all(seen.parent().unwrap()).unwrap();
        fs::write(&seen, actual).unwrap();
        panic!(
            "{} differs from this run's output, saved as {}; if the change is intended, re-run with FGBPF_BLESS=1",
            path.display(),
            seen.display()
        );
    }
}

/// Bad input: exit code 2, one `fgbpf: error:` line containing `want`.
fn refused(args: &[&str], want: &str) {
    let out = fgbpf(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "fgbpf {args:?}: {err}");
    assert_eq!(
        err.lines().count(),
        1,
        "fgbpf {args:?}: not one line: {err}"
    );
    assert!(err.starts_with("fgbpf: error: "), "{err}");
    assert!(err.contains(want), "fgbpf {args:?}: {err:?} lacks {want:?}");
    assert!(out.stdout.is_empty(), "fgbpf {args:?} printed to stdout");
}

/// A consumer that scripts/test.sh installs: found, or a failure that says
/// how to get it (a test that skips would pass without checking).
fn consumer(what: &str, found: Option<PathBuf>) -> PathBuf {
    found.unwrap_or_else(|| panic!("{what} is not installed: run scripts/test.sh, which installs it"))
}

fn consumers_dir() -> PathBuf {
    std::env::var_os("FGBPF_CONSUMERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("target/consumers"))
}

fn go() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
    });
    let found =
        on_path.or_else(|| Some(PathBuf::from("/usr/lib/go/bin/go")).filter(|p| p.is_file()));
    consumer("go (for `go tool pprof`)", found)
}

/// `go tool pprof -top` over `file`, with extra flags.
fn pprof_top(go: &Path, file: &Path, flags: &[&str]) -> String {
    let out = Command::new(go)
        .args(["tool", "pprof", "-top"])
        .args(flags)
        .arg(file)
        .output()
        .expect("run go tool pprof");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "go tool pprof refused {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The `flat` and `cum` columns of one function in `-top` output.
fn top_row<'a>(top: &'a str, function: &str) -> Option<(&'a str, &'a str)> {
    top.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.len() == 6 && cols[5] == function).then(|| (cols[0], cols[3]))
    })
}

fn validate_speedscope(file: &Path) {
    let dir = consumers_dir();
    let schema = dir.join("speedscope/file-format-schema.json");
    let ajv = dir.join("node_modules/.bin/ajv");
    let found = (schema.is_file() && ajv.is_file()).then(|| ajv.clone());
    let ajv = consumer("speedscope's schema with ajv-cli", found);
    let out = Command::new(&ajv)
        .args(["validate", "-s", s(&schema), "-d", s(file)])
        .output()
        .expect("run ajv");
    assert!(
        out.status.success(),
        "speedscope's schema rejects {}: {}{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn report_text_and_json() {
    let out = ok(&["report", "tests/fixtures/oncpu.folded", "--top", "5"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    golden("report-oncpu.txt", &out.stdout);

    let out = ok(&[
        "report",
        "tests/fixtures/oncpu.folded",
        "--top",
        "3",
        "--json",
    ]);
    golden("report-oncpu.json", &out.stdout);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"], 150);
    assert_eq!(v["unit"], "samples");
    assert_eq!(v["by_self"][0]["name"], "memchr");
    assert_eq!(v["by_total"].as_array().unwrap().len(), 3);

    let out = ok(&["report", "tests/fixtures/perf.folded", "--top", "4"]);
    golden("report-perf.txt", &out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rounded the fractional counts of 1 line"),
        "{err}"
    );
}

#[test]
fn report_units_follow_the_file_name() {
    let out = ok(&["report", "tests/fixtures/offcpu.folded", "--top", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("fgbpf off-CPU profile read from"),
        "{text}"
    );
    assert!(
        text.contains("total: 455000 us in 3 unique stacks"),
        "{text}"
    );
}

#[test]
fn report_of_a_directory_reads_its_main_view() {
    let dir = scratch("report-dir");
    let fixture = |n: &str| Path::new(ROOT).join("tests/fixtures").join(n);
    fs::copy(fixture("offcpu.folded"), dir.join("offcpu.folded")).unwrap();
    let first_line = |dir: &Path| {
        let out = ok(&["report", s(dir)]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    assert!(first_line(&dir).ends_with("offcpu.folded"));
    fs::copy(fixture("oncpu.folded"), dir.join("oncpu.folded")).unwrap();
    assert!(first_line(&dir).ends_with("oncpu.folded"));
    fs::copy(fixture("offcpu.folded"), dir.join("wall.folded")).unwrap();
    let line = first_line(&dir);
    assert!(
        line.ends_with("wall.folded") && line.contains("wall-clock"),
        "{line}"
    );
}

#[test]
fn flamegraphs_render_with_filters_and_layouts() {
    let dir = scratch("flamegraph");
    let svg = |name: &str| dir.join(name);

    ok(&[
        "flamegraph",
        "tests/fixtures/oncpu.folded",
        "-o",
        s(&svg("a.svg")),
    ]);
    golden("flamegraph-oncpu.svg", &fs::read(svg("a.svg")).unwrap());

    ok(&[
        "flamegraph",
        "tests/fixtures/oncpu.folded",
        "-o",
        s(&svg("b.svg")),
        "--per-process",
        "--inverted",
        "--grep",
        "handle_request|compress",
        "--exclude",
        "_\\[k\\]",
        "--min-width",
        "2",
        "--title",
        "Requests <without kernel>",
    ]);
    let b = fs::read_to_string(svg("b.svg")).unwrap();
    golden("flamegraph-oncpu-filtered.svg", b.as_bytes());
    assert!(b.contains("Requests &lt;without kernel&gt;"));
    assert!(!b.contains("ksys_write"), "--exclude kept a kernel stack");
    assert!(
        !b.contains("accept_loop"),
        "--grep kept a non-matching stack"
    );
    assert!(
        !b.contains("worker-4243"),
        "--per-process kept a thread frame"
    );
    assert!(b.contains("srv-4242"));

    ok(&[
        "flamegraph",
        "tests/fixtures/perf.folded",
        "-o",
        s(&svg("c.svg")),
    ]);
    golden("flamegraph-perf.svg", &fs::read(svg("c.svg")).unwrap());

    // --per-thread is what fgbpf's files have already.
    ok(&[
        "flamegraph",
        "tests/fixtures/oncpu.folded",
        "-o",
        s(&svg("d.svg")),
        "--per-thread",
    ]);
    assert_eq!(
        fs::read(svg("a.svg")).unwrap(),
        fs::read(svg("d.svg")).unwrap()
    );
}

#[test]
fn thread_options_need_fgbpf_layout() {
    let dir = scratch("layout");
    let out = dir.join("x.svg");
    for flag in ["--per-process", "--per-thread"] {
        refused(
            &[
                "flamegraph",
                "tests/fixtures/perf.folded",
                "-o",
                s(&out),
                flag,
            ],
            "needs fgbpf's layout",
        );
    }
    assert!(!out.exists());
}

#[test]
fn diff_names_the_function_that_got_faster_first() {
    let dir = scratch("diff");
    let out = dir.join("out");
    ok(&[
        "diff",
        "tests/fixtures/speedup-before.folded",
        "tests/fixtures/speedup-after.folded",
        "-o",
        s(&out),
    ]);
    let text = fs::read_to_string(out.join("regressions.txt")).unwrap();
    let first = text
        .lines()
        .find(|l| l.trim_start().starts_with(['+', '-']))
        .expect("a listed function");
    assert!(first.ends_with("  crc32_update"), "{text}");
    golden("diff/regressions.txt", text.as_bytes());
    golden("diff/diff.svg", &fs::read(out.join("diff.svg")).unwrap());
    golden(
        "diff/diff-before.svg",
        &fs::read(out.join("diff-before.svg")).unwrap(),
    );

    // Shares do not depend on --normalize; only the pictures do.
    let norm = dir.join("norm");
    ok(&[
        "diff",
        "tests/fixtures/speedup-before.folded",
        "tests/fixtures/speedup-after.folded",
        "-o",
        s(&norm),
        "--normalize",
        "--threshold",
        "10",
    ]);
    let text = fs::read_to_string(norm.join("regressions.txt")).unwrap();
    golden("diff/regressions-threshold-10.txt", text.as_bytes());
    let svg = fs::read_to_string(norm.join("diff.svg")).unwrap();
    assert!(svg.contains("scaled to the same total"));

    // A second run into the same directory must not overwrite it.
    refused(
        &[
            "diff",
            "tests/fixtures/speedup-before.folded",
            "tests/fixtures/speedup-after.folded",
            "-o",
            s(&out),
        ],
        "already exists",
    );
}

#[test]
fn pprof_loads_in_go_tool_pprof() {
    let dir = scratch("pprof");
    let oncpu = dir.join("oncpu.pb.gz");
    ok(&["convert", "tests/fixtures/oncpu.folded", "-o", s(&oncpu)]);
    let offcpu = dir.join("offcpu.pb.gz");
    ok(&["convert", "tests/fixtures/offcpu.folded", "-o", s(&offcpu)]);
    // A capture's profile, with its frequency, as `--format pprof` writes.
    let capture = dir.join("capture.pb.gz");
    let mut f = fs::File::create(&capture).unwrap();
    pprof::write(&capture_profile(), &mut f).unwrap();
    drop(f);

    let go = go();
    let top = pprof_top(&go, &oncpu, &[]);
    assert!(top.contains("Type: samples"), "{top}");
    assert!(top.contains("of 150 total"), "{top}");
    assert_eq!(top_row(&top, "memchr"), Some(("59", "59")), "{top}");
    assert_eq!(top_row(&top, "parse_json"), Some(("9", "68")), "{top}");
    assert_eq!(top_row(&top, "ksys_write_[k]"), Some(("12", "12")), "{top}");

    let top = pprof_top(&go, &offcpu, &[]);
    assert!(top.contains("Type: off_cpu"), "{top}");
    assert!(top.contains("of 455ms total"), "{top}");

    let top = pprof_top(&go, &capture, &["-sample_index=cpu"]);
    assert!(top.contains("Type: cpu"), "{top}");
    assert!(
        top.contains("of 100ms total"),
        "10 samples at 100 Hz: {top}"
    );
    assert_eq!(top_row(&top, "spin"), Some(("70ms", "70ms")), "{top}");
    let top = pprof_top(
        &go,
        &capture,
        &["-sample_index=samples", "-tagfocus=thread=worker"],
    );
    assert!(top.contains("of 10 total"), "{top}");
    assert!(
        top.contains("7 70.00%"),
        "-tagfocus=thread=worker keeps 7 of 10: {top}"
    );
}

#[test]
fn speedscope_files_match_the_published_schema() {
    let dir = scratch("speedscope");
    let file = dir.join("oncpu.speedscope.json");
    ok(&["convert", "tests/fixtures/oncpu.folded", "-o", s(&file)]);
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    let profiles = v["profiles"].as_array().unwrap();
    // All threads, then the four threads of the fixture.
    assert_eq!(profiles.len(), 5);
    assert_eq!(profiles[0]["endValue"], 150);
    assert_eq!(profiles[0]["unit"], "none");
    validate_speedscope(&file);

    let file = dir.join("perf.json");
    ok(&["convert", "tests/fixtures/perf.folded", "-o", s(&file)]);
    validate_speedscope(&file);

    let file = dir.join("capture.speedscope.json");
    let mut f = fs::File::create(&file).unwrap();
    let mut p = capture_profile();
    p.unit = Unit::Microseconds;
    speedscope::write(&p, &mut f).unwrap();
    drop(f);
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert_eq!(v["profiles"][0]["unit"], "microseconds");
    validate_speedscope(&file);
}

/// A profile as an on-CPU capture makes it: 10 samples at 100 Hz.
fn capture_profile() -> Profile {
    let mut p = Profile::new(Unit::Samples);
    p.meta.kind = Kind::OnCpu;
    p.meta.frequency = Some(100);
    p.meta.target = "pid 5".into();
    let thread = |p: &mut Profile, tid: u32, name: &str| {
        p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 5,
            tid,
            process: "app".into(),
            name: name.into(),
        })
    };
    let (main_thread, worker) = (thread(&mut p, 5, "app"), thread(&mut p, 6, "worker"));
    let main = p.intern_frame(Frame::new("main", FrameKind::User));
    let spin = p.intern_frame(Frame::new("spin", FrameKind::User));
    let read = p.intern_frame(Frame::new("ksys_read", FrameKind::Kernel));
    for (thread, frames, weight) in [
        (worker, vec![main, spin], 7),
        (main_thread, vec![main, read], 3),
    ] {
        p.push(Stack {
            thread: Some(thread),
            frames: frames.into(),
            weight,
            ..Default::default()
        });
    }
    p.coalesce();
    p
}

#[test]
fn capture_folded_reads_back_losslessly() {
    let dir = scratch("roundtrip");
    let path = dir.join("oncpu.folded");
    let p = capture_profile();
    let opts = folded::Options::default();
    let mut f = fs::File::create(&path).unwrap();
    folded::write(&p, &opts, &mut f).unwrap();
    drop(f);
    let back = fgbpf::format::folded::read::read_file(&path).unwrap();
    assert_eq!(back.profile.meta.kind, Kind::OnCpu);
    let threads = |p: &Profile| {
        let mut t = p.threads().to_vec();
        t.sort_by_key(|t| (t.pid, t.tid));
        t
    };
    assert_eq!(threads(&back.profile), threads(&p));
    assert_eq!(
        folded::lines(&back.profile, &opts),
        folded::lines(&p, &opts)
    );
    let fixture = fs::read_to_string(Path::new(ROOT).join("tests/fixtures/oncpu.folded")).unwrap();
    let read = fgbpf::format::folded::read::parse("x", fixture.as_bytes(), Unit::Samples).unwrap();
    let mut again = folded::lines(&read.profile, &opts);
    let mut original: Vec<String> = fixture.lines().map(String::from).collect();
    again.sort();
    original.sort();
    assert_eq!(again, original);
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let dir = scratch("bad");
    let out = |n: &str| dir.join(n);
    refused(
        &["report", "tests/fixtures/missing.folded"],
        "cannot read tests/fixtures/missing.folded",
    );
    refused(
        &["report", "tests/fixtures/malformed.folded"],
        "tests/fixtures/malformed.folded:3: the count `twelve`",
    );
    refused(
        &["report", "tests/fixtures/empty.folded"],
        "tests/fixtures/empty.folded: no stacks",
    );
    refused(&["report", s(&dir)], "holds no .folded file");
    refused(
        &[
            "flamegraph",
            "tests/fixtures/malformed.folded",
            "-o",
            s(&out("m.svg")),
        ],
        "malformed.folded:3:",
    );
    refused(
        &[
            "flamegraph",
            "tests/fixtures/oncpu.folded",
            "-o",
            s(&out("g.svg")),
            "--grep",
            "(",
        ],
        "--grep `(` is not a valid regex",
    );
    refused(
        &[
            "flamegraph",
            "tests/fixtures/oncpu.folded",
            "-o",
            s(&out("n.svg")),
            "--grep",
            "no such frame",
        ],
        "no stack of tests/fixtures/oncpu.folded is left",
    );
    refused(
        &[
            "flamegraph",
            "tests/fixtures/oncpu.folded",
            "-o",
            s(&out("missing-dir/x.svg")),
        ],
        "does not exist",
    );
    refused(
        &["flamegraph", "tests/fixtures/oncpu.folded", "-o", s(&dir)],
        "is a directory",
    );
    refused(
        &[
            "flamegraph",
            "tests/fixtures/oncpu.folded",
            "-o",
            s(&out("w.svg")),
            "--min-width",
            "101",
        ],
        "between 0 and 100",
    );
    refused(
        &[
            "convert",
            "tests/fixtures/oncpu.folded",
            "-o",
            s(&out("x.txt")),
        ],
        "cannot tell the format",
    );
    refused(
        &[
            "convert",
            "tests/fixtures/empty.folded",
            "-o",
            s(&out("x.pb.gz")),
        ],
        "no stacks",
    );
    refused(
        &[
            "convert",
            "tests/fixtures/missing.folded",
            "-o",
            s(&out("x.speedscope.json")),
        ],
        "cannot read",
    );
    refused(
        &[
            "diff",
            "tests/fixtures/speedup-before.folded",
            "tests/fixtures/malformed.folded",
            "-o",
            s(&out("d")),
        ],
        "malformed.folded:3:",
    );
    refused(
        &[
            "diff",
            "tests/fixtures/oncpu.folded",
            "tests/fixtures/offcpu.folded",
            "-o",
            s(&out("d")),
        ],
        "compare profiles of the same kind",
    );
    refused(
        &[
            "diff",
            "tests/fixtures/oncpu.folded",
            "tests/fixtures/oncpu.folded",
            "-o",
            "tests/fixtures/oncpu.folded",
        ],
        "is an existing file",
    );
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "bad input left files behind: {left:?}");
}

/// `fgbpf report --json` of `input`, parsed, with extra flags.
fn report_json(input: &str, flags: &[&str]) -> serde_json::Value {
    let mut args = vec!["report", input, "--json"];
    args.extend_from_slice(flags);
    serde_json::from_slice(&ok(&args).stdout).expect("report --json is JSON")
}

fn names(rows: &serde_json::Value) -> Vec<&str> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect()
}

/// Issue 18: on real captures of a Rust, a C++ and a C program, "by total"
/// starts at the user's code and "by self" names functions, not inlined
/// fragments or pseudo-frames; the whole text is golden.
#[test]
fn reports_rank_the_users_functions_first() {
    let fixture = |lang: &str, view: &str| format!("tests/fixtures/report/{lang}/{view}.folded");
    for (lang, first) in [
        ("rust", "fgbpf::demo::parse_records"),
        ("cpp", "serve(std::function<void (std::vector<unsigned char, std::allocator<unsigned char> > const&)>, double)"),
        ("c", "spin"),
    ] {
        let v = report_json(&fixture(lang, "oncpu"), &[]);
        assert_eq!(names(&v["by_total"])[0], first, "{lang}: {v:#}");
        for view in ["oncpu", "wall"] {
            let v = report_json(&fixture(lang, view), &[]);
            for name in names(&v["by_self"]).into_iter().chain(names(&v["by_total"])) {
                assert!(
                    !name.ends_with("_[i]") && (!name.starts_with('[') || name == "[unknown]"),
                    "{lang} {view}: {name} ranked as a function"
                );
            }
            let all = report_json(&fixture(lang, view), &["--all-frames"]);
            assert!(
                names(&all["by_total"]).contains(&"start_thread") || lang == "c" && view == "oncpu",
                "{lang} {view}: --all-frames lists the plumbing"
            );
            let out = ok(&["report", &fixture(lang, view), "--top", "8"]);
            golden(&format!("report/{lang}-{view}.txt"), &out.stdout);
        }
    }
    // The C program's three callers of one shared leaf keep their rows:
    // each passes all its time to `spin`, but `spin` is not theirs alone.
    let v = report_json(&fixture("c", "oncpu"), &[]);
    let total = |name: &str| {
        v["by_total"].as_array().unwrap().iter().find(|r| r["name"] == name).map(|r| r["total"].as_u64().unwrap())
    };
    assert!(total("work_fifty").unwrap() > total("work_thirty").unwrap());
    assert!(total("work_twenty").is_some());
    // --inlines ranks the fragments of the Rust build on their own.
    let v = report_json(&fixture("rust", "oncpu"), &["--inlines"]);
    assert!(names(&v["by_self"]).iter().any(|n| n.ends_with("_[i]")), "{v:#}");
}

/// Issue 18: the per-thread table and the findings of real wall captures
/// name the thread, its split and its wait in words.
#[test]
fn thread_tables_and_findings_say_where_each_thread_waited() {
    let v = report_json("tests/fixtures/report/c/wall.folded", &[]);
    let rows = v["thread_table"]["rows"].as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["thread"].as_str().unwrap().contains(name)).unwrap();
    let reader = row("/ reader-");
    assert_eq!(reader["sleeping"], reader["total"], "{reader:#}");
    assert_eq!(reader["sites"][0]["site"], "pipe read in read under wait_for_byte");
    assert_eq!(row("/ napper-")["sites"][0]["site"], "sleep in clock_nanosleep under nap_50ms");
    let texts: Vec<&str> = v["findings"].as_array().unwrap().iter().map(|f| f["text"].as_str().unwrap()).collect();
    assert!(texts.contains(&"25% of wall time in thread reader, sleeping: pipe read in read under wait_for_byte"), "{texts:?}");

    let v = report_json("tests/fixtures/report/rust/wall.folded", &[]);
    let rows = v["thread_table"]["rows"].as_array().unwrap();
    let split = |name: &str, col: &str| {
        let r = rows.iter().find(|r| r["thread"].as_str().unwrap().contains(name)).unwrap();
        r[col].as_f64().unwrap() * 100.0 / r["total"].as_f64().unwrap()
    };
    assert!(split("/ ingest-", "on_cpu") > 97.0);
    assert!((split("/ compress-", "on_cpu") - 25.0).abs() < 5.0);
    assert!(split("/ idle-waiter-", "sleeping") > 99.0);
    let text = String::from_utf8(ok(&["report", "tests/fixtures/report/rust/wall.folded"]).stdout).unwrap();
    let findings: Vec<&str> = text.lines().skip_while(|l| *l != "Findings").skip(1).take_while(|l| !l.is_empty()).collect();
    assert!(findings.contains(&"  25% of wall time in thread idle-waiter, sleeping: sleep in clock_nanosleep under fgbpf::demo::run"), "{text}");
}

/// `ajv validate` of `doc` (JSON text) against one of docs/*.schema.json.
fn schema_accepts(schema: &str, doc: &[u8], name: &str) -> bool {
    let ajv = consumers_dir().join("node_modules/.bin/ajv");
    let ajv = consumer("ajv-cli", ajv.is_file().then_some(ajv));
    // A directory per document: tests validate at once, and a scratch
    // directory is emptied when it is made.
    let file = scratch(&format!("schema-{name}")).join(name);
    fs::write(&file, doc).unwrap();
    let out = Command::new(&ajv)
        .args(["validate", "-s", &format!("{ROOT}/docs/{schema}"), "-d", s(&file)])
        .output()
        .expect("run ajv");
    out.status.success()
}

/// Issue 18: `report --json` and `diff --json` follow their documented
/// schemas, and the schemas reject what the programs do not write.
#[test]
fn json_outputs_follow_their_documented_schemas() {
    for input in ["tests/fixtures/report/rust/wall.folded", "tests/fixtures/oncpu.folded", "tests/fixtures/perf.folded"] {
        let out = ok(&["report", input, "--json"]);
        assert!(schema_accepts("report.schema.json", &out.stdout, "report.json"), "docs/report.schema.json rejects the report of {input}");
        let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["by_total"][0]["total"] = serde_json::json!(-1);
        let bad = serde_json::to_vec(&v).unwrap();
        assert!(!schema_accepts("report.schema.json", &bad, "bad.json"), "the schema accepts a negative weight");
    }
    let out = fgbpf(&[
        "diff",
        "tests/fixtures/speedup-before.folded",
        "tests/fixtures/speedup-after.folded",
        "--json",
        "--fail-above",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fail_above"], 5.0);
    assert!(!v["regressions"].as_array().unwrap().is_empty());
    assert!(schema_accepts("diff.schema.json", &out.stdout, "diff.json"), "docs/diff.schema.json rejects diff --json");
    let mut v = v;
    v["unit"] = serde_json::json!("bytes");
    let bad = serde_json::to_vec(&v).unwrap();
    assert!(!schema_accepts("diff.schema.json", &bad, "bad-diff.json"), "the schema accepts another unit");
}

/// Issue 58: `fgbpf report` of a capture directory with `offwake.folded`
/// beside its main view says who woke each sleeping finding's waits, as
/// the capture did, and the schema documents it.
#[test]
fn a_captures_report_names_who_woke_its_findings_waits() {
    let dir = scratch("report-wakers");
    fs::write(
        dir.join("wall.folded"),
        "app-10;worker-11;main;lock_row;futex_wait_[k];[sleeping] 3000000\napp-10;worker-11;main;work 1000000\n",
    )
    .unwrap();
    let blocked = "app-10;worker-11;main;lock_row;futex_wait_[k];[sleeping];--";
    fs::write(
        dir.join("offwake.folded"),
        format!(
            "{blocked};try_to_wake_up_[w];futex_wake_[w];do_syscall_64_[w];pthread_mutex_unlock_[w];unlock_row_[w];vacuum_step_[w];vacuum_[w] 2400000\n\
             {blocked};try_to_wake_up_[w];futex_wake_[w];do_syscall_64_[w];pthread_mutex_unlock_[w];unlock_row_[w];commit_[w];client_[w] 600000\n"
        ),
    )
    .unwrap();
    let out = ok(&["report", s(&dir), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &v["findings"][0];
    assert_eq!(first["woken"]["by"], "vacuum in vacuum_step → unlock_row → pthread_mutex_unlock", "{first:#}");
    assert_eq!(first["woken"]["share"], 80.0, "{first:#}");
    assert!(schema_accepts("report.schema.json", &out.stdout, "report-wakers.json"), "docs/report.schema.json rejects a finding's waker");
    let text = ok(&["report", s(&dir)]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("; 80% of it woken by vacuum in vacuum_step → unlock_row → pthread_mutex_unlock"), "{text}");
    // The offwake file alone is no capture directory's main view: its
    // report has no wakers beside it.
    let alone = ok(&["report", s(&dir.join("offwake.folded")), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
    assert!(v["findings"].as_array().unwrap().iter().all(|f| f.get("woken").is_none()), "{v:#}");
    // With --from/--to, the waker of the waits in that range, from the
    // offwake view's own slices: the vacuum woke the first second's
    // waits, a client's commit the last tenth's.
    fs::write(
        dir.join("wall.slices"),
        "# fgbpf slices 1 slice_us=100000\n\
         0-9:2000000,10:1000000 app-10;worker-11;main;lock_row;futex_wait_[k];[sleeping] 3000000\n\
         0-10:1000000 app-10;worker-11;main;work 1000000\n",
    )
    .unwrap();
    fs::write(
        dir.join("offwake.slices"),
        format!(
            "# fgbpf slices 1 slice_us=100000\n\
             0-9:2400000 {blocked};try_to_wake_up_[w];futex_wake_[w];do_syscall_64_[w];pthread_mutex_unlock_[w];unlock_row_[w];vacuum_step_[w];vacuum_[w] 2400000\n\
             10:600000 {blocked};try_to_wake_up_[w];futex_wake_[w];do_syscall_64_[w];pthread_mutex_unlock_[w];unlock_row_[w];commit_[w];client_[w] 600000\n"
        ),
    )
    .unwrap();
    for (from, to, by) in [
        ("1.0", "1.1", "client in commit → unlock_row → pthread_mutex_unlock"),
        ("0", "1.0", "vacuum in vacuum_step → unlock_row → pthread_mutex_unlock"),
    ] {
        let out = ok(&["report", s(&dir), "--json", "--from", from, "--to", to]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let first = &v["findings"][0];
        assert_eq!(first["woken"]["by"], by, "--from {from} --to {to}: {first:#}");
        assert_eq!(first["woken"]["share"], 100.0, "--from {from} --to {to}: {first:#}");
    }
}

/// Issue 18: the CI gate's exit codes: 1 with the regressions on stderr,
/// 0 when nothing grew past the limit, 2 when the inputs cannot be
/// compared; without -o it writes no files.
#[test]
fn diff_fail_above_is_a_ci_gate() {
    let before = "tests/fixtures/speedup-before.folded";
    let after = "tests/fixtures/speedup-after.folded";
    let out = fgbpf(&["diff", after, before, "--fail-above", "5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("grew +16.7 points: crc32_update"), "{err}");
    assert!(err.lines().last().unwrap().starts_with("fgbpf: 4 functions grew by more than 5.0 points"), "{err}");
    assert!(out.stdout.is_empty());
    let out = fgbpf(&["diff", before, before, "--fail-above", "5"]);
    assert_eq!(out.status.code(), Some(0));
    let out = fgbpf(&["diff", before, "tests/fixtures/offcpu.folded", "--fail-above", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let out = fgbpf(&["diff", before, "tests/fixtures/empty.folded", "--fail-above", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    refused(&["diff", before, after], "say what to write");
}
