//! Reading Ruby's stacks in fgbpf's output, shared by the tests of each
//! Ruby version (tests/ruby.rs: 3.1 and 3.3; tests/ruby_27.rs: 2.7): a
//! thread's stacks, Ruby frames matched by label and file, the checks
//! each version passes (a busy chain, a sleeper, classes, a split beside
//! rbspy) and rbspy, the reference.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::runtime::*;
use super::*;

/// The stacks of one thread, by its label's prefix (`ruby-PID` for the
/// main thread; Ruby names the others by where they were created).
pub fn thread(stacks: &Folded, label: &str) -> Folded {
    of_threads(stacks, |t| t.starts_with(label))
}

/// A Ruby frame is `label (file:line)_[p]`: matched by label and file.
pub fn rb(frame: &str, wanted: &str) -> bool {
    walked_at(frame, wanted)
}

/// A Ruby frame (`label@file:line`) or a C method (`name [c function]`).
pub fn rb_or_c(frame: &str, wanted: &str) -> bool {
    rb(frame, wanted) || frame.strip_suffix("_[p]") == Some(wanted)
}

/// rbspy (from crates.io; scripts/fetch-rbspy.sh builds it).
pub fn rbspy() -> PathBuf {
    let local = consumers_dir().join("rbspy/rbspy");
    assert!(local.is_file(), "rbspy is not installed: run scripts/test.sh, which builds it from crates.io");
    local
}

/// rbspy recording `pid` for 9 s at fgbpf's rate into `file`, collapsed:
/// `<main> - /path/split.rb:31;fifty - …:15 191`.
pub fn rbspy_record<'c>(rbspy: &'c mut Command, pid: u32, file: &Path) -> &'c mut Command {
    rbspy
        .args(["record", "--nonblocking", "--silent", "-r", "499", "-d", "9", "--format", "collapsed", "-p"])
        .arg(pid.to_string())
        .arg("-f")
        .arg(file)
}

/// split.rb's main thread (`comm`-PID) captured 8 s beside `rbspy` (which
/// writes `written`): each method's share within 3 points of the known
/// split and within 5 of rbspy's. rbspy names the methods with `prefix`
/// (3.3's `Object#`).
pub fn split_beside_rbspy(ruby: &mut KillOnDrop, rbspy: Command, written: &Path, test: &str, (comm, prefix): (&str, &str)) {
    let pid = ruby.id();
    let reference = Reference::process("rbspy", rbspy, reading(written, read_collapsed));
    let got = capture_beside(ruby, &["oncpu", "-F", "499"], Window::Seconds("8"), test, reference);
    let main = thread(&read_folded(&got.dir.join("oncpu.folded")), &format!("{comm}-{pid}"));
    let fg = Side { name: "fgbpf", stacks: &main, is: &|f, m| rb(f, &format!("Object#{m}@split.rb:")) };
    let spy = Side { name: "rbspy", stacks: &got.theirs, is: &|f, m| f.starts_with(&format!("{prefix}{m} - ")) };
    let split = [("fifty", Some(50.0)), ("thirty", Some(30.0)), ("twenty", Some(20.0))];
    let cmp = compare(&format!("{test}: split.rb, the main thread"), fg, spy, &split, Base::All);
    cmp.assert_near_known(3.0, &got.summary);
    cmp.assert_near_reference(Within::Points(5.0), &got.summary);
}

/// Share of `stacks`' weight with the frames `path` in order, each a Ruby
/// frame (`label@file:line`) or a C method (`name [c function]`).
pub fn share_under(stacks: &Folded, path: &[&str]) -> f64 {
    share_in_order(stacks, path, rb_or_c)
}

/// klass.rb's main thread (`comm`-PID) under its methods with their
/// classes, Integer#times named `times`, in ≥ 95% of its samples.
pub fn classes_named(klass: KillOnDrop, comm: &str, times: &str, test: &str) {
    let Captured { pid, stacks, summary, .. } = capture_ended(klass, "oncpu", "3", test);
    let main = thread(&stacks, &format!("{comm}-{pid}"));
    let path = [
        "<main>@klass.rb:21",
        "Jobs::Worker#run@klass.rb:13",
        times,
        "block in Jobs::Worker#run@klass.rb:13",
        "Jobs::Worker.crunch@klass.rb:8",
    ];
    let named = share_under(&main, &path);
    eprintln!("{comm}: {named:.1}% of {} samples under {}", total(&main), path.join(";"));
    assert!(total(&main) > 300, "{} samples of the main thread\n{summary}", total(&main));
    assert!(named >= 95.0, "{named:.1}% under {}\n{summary}", path.join(";"));
}

/// busy.rb's main thread (`comm`-PID), captured 3 s on the CPU: ≥ 95% of
/// its samples `<main>;Object#outer;Object#inner` on the script's lines,
/// ≥ 95% rooted at `_start` through `ruby_run_node` (the Ruby frames in
/// place of rb_vm_exec, none left), ≥ 90% on inner's loop's lines. The
/// summary is returned, with the process's id.
pub fn busy_chain(target: KillOnDrop, comm: &str, test: &str) -> (u32, String) {
    let Captured { pid, stacks, summary, .. } = capture_ended(target, "oncpu", "3", test);
    let main = thread(&stacks, &format!("{comm}-{pid}"));
    let all = total(&main);
    // The script's top level calls outer at line 22, outer calls inner at
    // line 15; inner's loop is lines 6 to 8.
    let path = ["<main>@busy.rb:22", "Object#outer@busy.rb:15", "Object#inner@busy.rb:"];
    let ordered = share_in_order(&main, &path, rb);
    let rooted = share_in_order(&main, &["_start", "ruby_run_node", "<main>@busy.rb:22", "Object#outer@busy.rb:15"], |f, w| {
        f == w || rb(f, w)
    });
    let lines = ["Object#inner@busy.rb:6", "Object#inner@busy.rb:7", "Object#inner@busy.rb:8"];
    let in_loop: u64 = lines.iter().map(|f| weight_in_order_by(&main, &[f], rb)).sum();
    eprintln!("{comm}: <main>;outer;inner {ordered:.1}%, rooted at _start {rooted:.1}%, inner on its loop's lines {:.1}% of {all}", pct(in_loop, all));
    assert!(all > 300, "{all} samples of the main thread\n{summary}");
    assert!(ordered >= 95.0, "{ordered:.1}% of {all} in <main>;outer;inner\n{summary}");
    assert!(rooted >= 95.0, "{rooted:.1}% rooted at _start through ruby_run_node\n{summary}");
    assert_eq!(weight_in_order_by(&main, &["rb_vm_exec"], |f, w| f == w), 0, "rb_vm_exec left in the stacks\n{summary}");
    assert!(pct(in_loop, all) >= 90.0, "inner's loop's lines in {:.1}%\n{summary}", pct(in_loop, all));
    (pid, summary)
}

/// nap.rb captured 3 s off the CPU: ≥ 95% of the sleeping thread's
/// off-CPU time under `block in <main>;Object#nap;Kernel#sleep`.
pub fn naps_under_nap(target: KillOnDrop, test: &str) -> String {
    let Captured { stacks, summary, .. } = capture_ended(target, "offcpu", "3", test);
    // Ruby names the thread by where it was created.
    let sleeper = thread(&stacks, "nap.rb:9-");
    let all = total(&sleeper);
    let under = share_under(&sleeper, &["block in <main>@nap.rb:9", "Object#nap@nap.rb:5", "Kernel#sleep [c function]"]);
    eprintln!("{test}: {under:.1}% of the sleeper's {all} us off-CPU under nap;sleep");
    assert!(all > 2_000_000, "the sleeping thread's off-CPU time: {all} us\n{summary}");
    assert!(under >= 95.0, "{under:.1}% of {all} us under nap;sleep\n{summary}");
    summary
}

/// busy.rb refused by the check at attach, made to fail by its test hook
/// FGBPF_TEST_RUBY_OBJECT_PATH (src/runtimes/ruby/check.rs: the path
/// `rb_cObject` must read as, which Ruby's real memory, read through the
/// real layout, then contradicts): the summary and report.txt say
/// `Ruby frames not read, Ruby VERSION: the layout's check failed (…)`,
/// its native frames are kept, and no Ruby frame is named.
pub fn refused_by_its_check(target: KillOnDrop, version: &str, test: &str) {
    let dir = out_dir(test);
    let out = run(fgbpf()
        .env("FGBPF_TEST_RUBY_OBJECT_PATH", "Objekt")
        .args(["oncpu", "-F", "499", "-d", "2", "-p", &target.id().to_string(), "-o"])
        .arg(&dir));
    drop(target);
    assert_ok(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    let stacks = read_folded(&dir.join("oncpu.folded"));
    let said = format!("Ruby frames not read, Ruby {version}: the layout's check failed (rb_cObject reads as \"Object\", not \"Objekt\")");
    assert!(summary.contains(&said), "the summary does not say `{said}`\n{summary}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains(&said), "report.txt does not say `{said}`\n{report}");
    let native = share_in_order(&stacks, &["_start", "ruby_run_node"], exactly);
    assert!(total(&stacks) > 0 && native >= 95.0, "native frames kept in {native:.1}% of {}\n{summary}", total(&stacks));
    assert_eq!(weight_in_order_by(&stacks, &["<main> ("], prefixed), 0, "Ruby frames named though refused\n{summary}");
}

/// threads.rb captured 4 s on the CPU: each of its two busy threads ≥ 95%
/// in its own method and never in the other's (each stack read from its
/// own thread's execution context).
pub fn threads_apart(target: KillOnDrop, test: &str) {
    let Captured { stacks, summary, .. } = capture_ended(target, "oncpu", "4", test);
    // Ruby names a thread by the line that created it.
    for (label, own, other) in [("threads.rb:18-", "spin_a", "spin_b"), ("threads.rb:19-", "spin_b", "spin_a")] {
        let of = thread(&stacks, label);
        let all = total(&of);
        let mine = share_under(&of, &["block in <main>@threads.rb:", &format!("Object#{own}@threads.rb:")]);
        let theirs = share_under(&of, &[&format!("Object#{other}@threads.rb:")]);
        eprintln!("thread {label}: {mine:.1}% of {all} samples in {own}, {theirs:.1}% in {other}");
        assert!(all > 100, "thread {label}: {all} samples\n{summary}");
        assert!(mine >= 95.0, "thread {label}: {mine:.1}% of {all} in {own}\n{summary}");
        assert_eq!(theirs, 0.0, "thread {label}: samples named {other}, the other thread's method\n{summary}");
    }
}

/// waits.rb captured 3 s off the CPU: the thread waiting in IO#read and
/// the one waiting in Mutex#lock each ≥ 90% of its off-CPU time under its
/// Ruby caller and the C method it called. The summary is returned.
pub fn waits_under_callers(target: KillOnDrop, test: &str) -> String {
    let Captured { stacks, summary, .. } = capture_ended(target, "offcpu", "3", test);
    for (label, caller, method) in
        [("waits.rb:19-", "Object#wait_input@waits.rb:8", "IO#read [c function]"),
         ("waits.rb:20-", "Object#contend@waits.rb:12", "Thread::Mutex#lock [c function]")]
    {
        let of = thread(&stacks, label);
        let all = total(&of);
        let under = share_under(&of, &["block (2 levels) in <main>@waits.rb:", caller, method]);
        eprintln!("thread {label}: {under:.1}% of its {all} us off-CPU under {caller};{method}");
        assert!(all > 2_000_000, "thread {label}: {all} us off-CPU\n{summary}");
        assert!(under >= 90.0, "thread {label}: {under:.1}% of {all} us under {caller};{method}\n{summary}");
    }
    summary
}
