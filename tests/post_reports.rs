//! The reports `fgbpf report` and the captures write, run as the real
//! binary over the files in tests/fixtures/ (no root, no BPF): the user's
//! functions ranked first, each thread's waits, the JSON outputs against
//! their documented schemas, wakers in the findings, and `diff
//! --fail-above` as a CI gate. Golden files and consumers as in
//! tests/post.rs.

use std::fs;
use std::process::Command;

mod post_support;
use post_support::*;

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
