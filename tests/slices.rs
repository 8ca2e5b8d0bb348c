//! Time slices: a capture keeps when each stack's weight fell, and
//! `convert`, `flamegraph` and `report` draw any range of it again with
//! `--from`/`--to`. The workload runs in phases (tests/workloads/phases.c,
//! `gcc -O2`, calling libc), so each range has a known answer, on-CPU and
//! off-CPU (one long wait per phase, spread over the slices it covers).

mod common;

use std::path::Path;

use common::*;

/// `fgbpf convert DIR --from --to --format folded`, read back.
fn range(dir: &Path, from: &str, to: &str) -> Vec<(Vec<String>, u64)> {
    let out = dir.with_extension(format!("{from}-{to}.folded"));
    let _ = std::fs::remove_file(&out);
    assert_ok(&run(fgbpf()
        .args(["convert", "--format", "folded", "--from", from, "--to", to, "-o"])
        .arg(&out)
        .arg(dir)));
    read_folded(&out)
}

#[test]
fn on_cpu_ranges_show_their_phase() {
    assert!(require_root());
    let _serial = serial();
    let dir = out_dir("slices-oncpu");
    let bin = plain_workload("phases");
    assert_ok(&run(fgbpf()
        .args(["oncpu", "-q", "-F", "199", "-d", "6", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(&bin)));
    assert!(dir.join("oncpu.slices").is_file(), "a capture writes its slices");

    let first = range(&dir, "0", "2");
    let a = pct(weight_with(&first, "phase_a"), total(&first));
    assert!(total(&first) >= 200, "{} samples in 0-2 s", total(&first));
    assert!(a >= 90.0, "0-2 s: {a:.1}% in phase_a; {first:?}");
    let second = range(&dir, "3.5", "5");
    let b = pct(weight_with(&second, "phase_b"), total(&second));
    assert!(b >= 90.0, "3.5-5 s: {b:.1}% in phase_b; {second:?}");
    // The whole capture holds both, and the ranges are parts of it.
    let whole = read_folded(&dir.join("oncpu.folded"));
    assert!(total(&first) + total(&second) < total(&whole));

    // The same ranges as a flamegraph and a report.
    let svg = dir.with_extension("late.svg");
    let _ = std::fs::remove_file(&svg);
    assert_ok(&run(fgbpf().args(["flamegraph", "--from", "3.5", "--to", "5", "-o"]).arg(&svg).arg(&dir)));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains(">phase_b") && !text.contains(">phase_a"), "the range's flamegraph shows phase_b only");
    assert!(text.contains("from 3.5 s to 5 s"), "its subtitle names the range");
    let out = run(fgbpf().args(["report", "--from", "0", "--to", "2"]).arg(&dir));
    assert_ok(&out);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("from 0 s to 2 s") && report.contains("phase_a"), "{report}");

    // The capture's timeline.html, in a real browser: a range of it draws
    // that range's flamegraph.
    let page = dir.join("timeline.html");
    let drawn = in_browser(
        &page,
        "var t = window.fgbpfTimeline; var out = {};\n\
         t.select(0, 20); out.early = t.frames().map(function(f) { return f.name; });\n\
         t.select(35, 50); out.late = t.frames().map(function(f) { return f.name; });\n\
         return out;",
    );
    let has = |part: &str, name: &str| drawn[part].as_array().unwrap().iter().any(|f| f.as_str() == Some(name));
    assert!(has("early", "phase_a") && !has("early", "phase_b"), "0-2 s in timeline.html: {drawn}");
    assert!(has("late", "phase_b") && !has("late", "phase_a"), "3.5-5 s in timeline.html: {drawn}");

    // speedscope keeps the time order: early samples in phase_a, late
    // ones in phase_b.
    let json = dir.with_extension("speedscope.json");
    let _ = std::fs::remove_file(&json);
    assert_ok(&run(fgbpf().args(["convert", "-o"]).arg(&json).arg(&dir)));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let names: Vec<&str> = v["shared"]["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    let all = &v["profiles"][0];
    let leaves_in = |part: &[serde_json::Value], name: &str| {
        part.iter().filter(|s| s.as_array().unwrap().iter().any(|f| names[f.as_u64().unwrap() as usize] == name)).count()
    };
    let samples = all["samples"].as_array().unwrap();
    let quarter = samples.len() / 4;
    let (early, late) = (&samples[..quarter], &samples[samples.len() - quarter..]);
    assert!(leaves_in(early, "phase_a") * 10 >= early.len() * 9, "early samples are phase_a");
    assert!(leaves_in(late, "phase_b") * 10 >= late.len() * 9, "late samples are phase_b");
}

#[test]
fn off_cpu_waits_spread_over_their_slices() {
    assert!(require_root());
    // Alone: with the other test's burner beside it, fgbpf may read the
    // command's tables only after its first wait.
    let _serial = serial();
    let dir = out_dir("slices-offcpu");
    let bin = plain_workload("phases");
    assert_ok(&run(fgbpf()
        .args(["offcpu", "-q", "-d", "6", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(&bin)
        .arg("sleep")));
    let us = |stacks: &[(Vec<String>, u64)], f: &str| weight_with(stacks, f) as f64 / 1e6;
    // nap_a sleeps from about 0.3 s to 2.8 s, nap_b from 2.8 s to 5.3 s.
    let first = range(&dir, "0", "2");
    let (a, b) = (us(&first, "nap_a"), us(&first, "nap_b"));
    assert!((1.5..=1.8).contains(&a) && b == 0.0, "0-2 s: {a:.2} s in nap_a, {b:.2} s in nap_b");
    let second = range(&dir, "3.5", "5");
    let (a, b) = (us(&second, "nap_a"), us(&second, "nap_b"));
    assert!((1.4..=1.6).contains(&b) && a == 0.0, "3.5-5 s: {a:.2} s in nap_a, {b:.2} s in nap_b");

    // Bad ranges are refused with one line before any output.
    for (args, says) in [
        (vec!["--from", "3", "--to", "2"], "not before"),
        (vec!["--from", "60"], "past the end"),
        (vec!["--from", "-1"], "not a number of seconds"),
    ] {
        let out = run(fgbpf().arg("report").args(&args).arg(&dir));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says) && err.trim().lines().count() == 1, "{args:?}: {err}");
    }
    let folded_only = dir.with_extension("copy");
    let _ = std::fs::remove_dir_all(&folded_only);
    std::fs::create_dir_all(&folded_only).unwrap();
    std::fs::copy(dir.join("offcpu.folded"), folded_only.join("offcpu.folded")).unwrap();
    let out = run(fgbpf().args(["report", "--from", "1"]).arg(&folded_only));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("offcpu.slices"));
}
