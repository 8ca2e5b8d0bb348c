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
