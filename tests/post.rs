//! The commands that work on profiles after capture (`report`,
//! `flamegraph`, `diff`, `convert`), run as the real binary over the files
//! in tests/fixtures/. No root and no BPF.
//!
//! Outputs are compared byte for byte with tests/fixtures/golden/; after an
//! intended change, regenerate them with `FGBPF_BLESS=1 cargo test --test
//! post --test post_reports` and review the diff. Exports are checked by their real consumers:
//! `go tool pprof` loads the pprof files and speedscope's published JSON
//! schema (validated with ajv-cli) accepts the speedscope files;
//! scripts/test.sh installs both into target/consumers/. Without them
//! these checks are skipped with a message, unless CI=true, where they fail.

use std::fs;
use std::path::Path;

use fgbpf::format::{folded, pprof, speedscope};
use fgbpf::profile::{Frame, FrameKind, Kind, Profile, Stack, Thread, Unit};

mod post_support;
use post_support::*;

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
