//! The model's own tests: interning, coalescing, absorbing.

use super::*;

#[test]
fn interning_dedupes_frames_and_threads() {
    let mut p = Profile::new(Unit::Samples);
    let a = p.intern_frame(Frame::new("main", FrameKind::User));
    let b = p.intern_frame(Frame::new("main", FrameKind::Kernel));
    assert_ne!(a, b);
    assert_eq!(a, p.intern_frame(Frame::new("main", FrameKind::User)));
    let t = Thread {
        start: 0,
        group: None,
        pid: 1,
        tid: 2,
        process: "p".into(),
        name: "t".into(),
    };
    assert_eq!(p.intern_thread(t.clone()), p.intern_thread(t));
    assert_eq!(p.threads().len(), 1);
}

#[test]
fn coalesce_merges_and_orders_by_weight() {
    let mut p = Profile::new(Unit::Samples);
    let a = p.intern_frame(Frame::new("a", FrameKind::User));
    let b = p.intern_frame(Frame::new("b", FrameKind::User));
    p.push(Stack {
        thread: None,
        frames: vec![a].into(),
        weight: 2,
        ..Default::default()
    });
    p.push(Stack {
        thread: None,
        frames: vec![a, b].into(),
        weight: 3,
        ..Default::default()
    });
    p.push(Stack {
        thread: None,
        frames: vec![a].into(),
        weight: 2,
        ..Default::default()
    });
    p.push(Stack {
        thread: None,
        frames: vec![b].into(),
        weight: 0,
        ..Default::default()
    });
    p.coalesce();
    let w: Vec<u64> = p.stacks().iter().map(|s| s.weight).collect();
    assert_eq!(w, vec![4, 3]);
    assert_eq!(p.total(), 7);
}

#[test]
fn absorb_shares_frames_and_scales() {
    let mut a = Profile::new(Unit::Microseconds);
    let mut b = Profile::new(Unit::Samples);
    let t = Thread {
        start: 0,
        group: None,
        pid: 1,
        tid: 1,
        process: "p".into(),
        name: "p".into(),
    };
    let bt = b.intern_thread(t.clone());
    let x = b.intern_frame(Frame::new("x", FrameKind::User));
    b.push(Stack {
        thread: Some(bt),
        frames: vec![x].into(),
        weight: 3,
        ..Default::default()
    });
    let at = a.intern_thread(t);
    let ax = a.intern_frame(Frame::new("x", FrameKind::User));
    a.push(Stack {
        thread: Some(at),
        frames: vec![ax].into(),
        weight: 5,
        ..Default::default()
    });
    a.absorb(&mut b, |w| w * 10);
    assert!(b.stacks().is_empty());
    a.coalesce();
    assert_eq!(a.frames().len(), 1);
    assert_eq!(a.stacks().len(), 1);
    assert_eq!(a.total(), 35);
}

#[test]
fn absorb_unresolved_merges_by_process_and_reason() {
    let gone = UnresolvedReason::ProcessGone;
    let jit = UnresolvedReason::JitWithoutPerfMap;
    let entry = |pid, reasons: Vec<(UnresolvedReason, u64)>| Unresolved {
        pid,
        process: format!("p{pid}"),
        reasons,
    };
    let mut wall = Profile::new(Unit::Microseconds);
    wall.unresolved = vec![entry(1, vec![(gone.clone(), 100)])];
    let mut on = Profile::new(Unit::Samples);
    on.unresolved = vec![
        entry(1, vec![(jit.clone(), 30), (gone.clone(), 1)]),
        entry(2, vec![(gone.clone(), 1)]),
    ];
    wall.absorb_unresolved(&on, |w| w * 10);
    assert_eq!(
        wall.unresolved[0],
        entry(1, vec![(jit, 300), (gone.clone(), 110)])
    );
    assert_eq!(wall.unresolved[1], entry(2, vec![(gone, 10)]));
}

#[test]
fn unknown_leaf_weight_counts_only_unknown_leaves() {
    let mut p = Profile::new(Unit::Samples);
    let a = p.intern_frame(Frame::new("a", FrameKind::User));
    let u = p.intern_frame(Frame::new(UNKNOWN, FrameKind::User));
    p.push(Stack {
        thread: None,
        frames: vec![a, u].into(),
        weight: 5,
        ..Default::default()
    });
    p.push(Stack {
        thread: None,
        frames: vec![u, a].into(),
        weight: 7,
        ..Default::default()
    });
    assert_eq!(p.unknown_leaf_weight(), 5);
}
