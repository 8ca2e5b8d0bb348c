//! Tests of [`super`]: naming raw stacks into a profile.

use super::*;
use crate::symbolize::Options;

#[test]
fn callers_step_back_into_the_call() {
    let v: Vec<u64> = adjusted(&[0x1000, 0x2000, 0x3000]).collect();
    assert_eq!(v, vec![0x1000, 0x1fff, 0x2fff]);
}

#[test]
fn symbolizes_own_function_through_pid() {
    // A frame of this test binary, named exactly as a capture names a
    // target's frames: remembered, then symbolized.
    let addr = symbolizes_own_function_through_pid as *const () as usize as u64;
    let pid = std::process::id();
    let mut s = Symbolizer::new(&Options::default());
    s.remember(pid, 0, "self");
    let raw = RawStack {
        pid,
        tid: pid,
        comm: "self".into(),
        user: vec![addr, 0x10].into(),
        weight: 3,
        ..Default::default()
    };
    let p = from_raw(vec![raw], Unit::Samples, &mut s);
    let names: Vec<String> = p.stacks()[0]
        .frames
        .iter()
        .map(|&f| p.frame(f).to_string())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.contains("symbolizes_own_function_through_pid")),
        "{names:?}"
    );
    // The caller frame at 0x10 is in no mapping; the leaf resolved.
    assert!(p.unresolved.is_empty(), "{:?}", p.unresolved);
}

#[test]
fn unknown_process_is_reported_gone() {
    let mut s = Symbolizer::new(&Options::default());
    // PIDs above pid_max never exist.
    let raw = RawStack {
        pid: 0x7fff_fff0,
        tid: 0x7fff_fff0,
        comm: "ghost".into(),
        user: vec![0x401000].into(),
        weight: 5,
        ..Default::default()
    };
    let p = from_raw(vec![raw], Unit::Samples, &mut s);
    assert_eq!(p.unresolved.len(), 1);
    assert_eq!(
        p.unresolved[0].reasons,
        vec![(UnresolvedReason::ProcessGone, 5)]
    );
    assert_eq!(p.unresolved[0].process, "ghost");
}

/// Native frames leaf first, merged with Ruby runs leaf first; the
/// names of the result, root first.
fn merged(native: &[&str], ruby: &[(&str, bool)], whole: bool) -> Vec<String> {
    let mut p = Profile::new(Unit::Samples);
    let ids: Vec<Vec<FrameId>> = native.iter().map(|n| vec![p.intern_frame(Frame::new(*n, FrameKind::User))]).collect();
    let native: Vec<&[FrameId]> = ids.iter().map(Vec::as_slice).collect();
    let runs: Vec<InterpFrame> = ruby.iter().map(|&(t, entry)| InterpFrame { text: t.into(), entry }).collect();
    let mut frames = Vec::new();
    merge_interp(&native, &runs, whole, &mut frames, &mut p);
    frames.iter().map(|&f| p.frame(f).name.clone()).collect()
}

#[test]
fn ruby_runs_take_the_place_of_rb_vm_exec_and_its_loop() {
    let native = ["libruby.so+0x24ebd0", "rb_vm_exec", "ruby_run_node", "main"];
    let ruby = [("inner", false), ("outer", false), ("<main>", true)];
    assert_eq!(merged(&native, &ruby, true), ["main", "ruby_run_node", "<main>", "outer", "inner"]);
}

#[test]
fn an_evaluator_call_left_without_frames_stays_native() {
    // times (a C method) called a block whose frame was popped, and
    // the VM call that ran it has yet to return: three rb_vm_exec,
    // two runs. The runs go to the outer two.
    let native = ["libruby.so+0x24ebd0", "rb_vm_exec", "rb_yield", "libruby.so+0x24ebd0", "rb_vm_exec", "main"];
    let ruby = [("times", false), ("bar", true)];
    let whole = merged(&native[..], &ruby, true);
    assert_eq!(whole, ["main", "bar", "times", "rb_yield", "rb_vm_exec", "libruby.so+0x24ebd0"]);
    // Read in part, the runs it has are the innermost.
    let cut = merged(&native[..], &ruby, false);
    assert_eq!(cut, ["main", "rb_vm_exec", "libruby.so+0x24ebd0", "rb_yield", "bar", "times"]);
}
