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

#[test]
fn a_frame_keeps_an_address_where_it_is_the_innermost_function() {
    let module = Some(Arc::new(crate::symbolize::Module::named("srv", None)));
    let named = |frames: &[(&str, FrameKind)], address| Named {
        module: module.clone(),
        address,
        ..Named::known(frames.iter().map(|&(n, k)| (n.to_string(), k)).collect())
    };
    let (mut p, mut t) = (Profile::new(Unit::Samples), Table::default());
    // `work` first met with `inc` inlined into it at that address, then
    // at an address of its own, then at another.
    t.add(&mut p, named(&[("work", FrameKind::User), ("inc", FrameKind::Inlined)], 0x1100));
    t.add(&mut p, named(&[("work", FrameKind::User)], 0x1200));
    t.add(&mut p, named(&[("work", FrameKind::User)], 0x1300));
    // `loop`, met only with `step` inlined into it.
    t.add(&mut p, named(&[("loop", FrameKind::User), ("step", FrameKind::Inlined)], 0x1400));
    let address = |name: &str| p.frames().iter().find(|f| f.name == name).map(|f| f.address);
    assert_eq!((address("work"), address("inc")), (Some(0x1200), Some(0x1100)));
    assert_eq!(p.frames().len(), 4, "one frame per function, whatever its address");
    // A function met only with code inlined into it has no address of
    // its own: addr2line would name the inlined one there.
    assert_eq!((address("loop"), address("step")), (Some(0), Some(0x1400)));
}
