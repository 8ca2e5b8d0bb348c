//! Tests of the running counts: forgetting the past and what it keeps.

use super::*;

fn key(pid: u32, user_stack: u64, kern_stack: u64) -> Key {
    let k = types::fg_key {
        pid,
        tid: pid,
        user_stack,
        kern_stack,
        ..Default::default()
    };
    let mut bytes = [0u8; std::mem::size_of::<types::fg_key>()];
    // SAFETY: fg_key is plain data of exactly this size.
    bytes.copy_from_slice(unsafe { plain::as_bytes(&k) });
    bytes
}

#[test]
fn forgetting_the_past_keeps_the_window_and_its_stacks_only() {
    let slicing = Slicing { origin: 0, width: Duration::from_millis(100), widened: 1 };
    let mut c = Counts::new(slicing, None);
    // pid 1 ran before slice 10 only; pid 2 across it; pid 3 after.
    for (pid, spans) in [(1, vec![Span::at(3, 4)]), (2, vec![Span::at(5, 1), Span { first: 8, last: 11, weight: 8 }]), (3, vec![Span::at(12, 2)])] {
        *c.totals.entry(key(pid, 100 + u64::from(pid), 200 + u64::from(pid))).0 = spans.into_iter().collect();
        for id in [100 + u64::from(pid), 200 + u64::from(pid)] {
            c.stacks.insert(id, Arc::from(&[id][..]));
        }
    }
    // Moved out by the last drain, held by no key yet.
    c.stacks.insert(300, Arc::from(&[300][..]));
    c.moved.push(300);
    let left = c.forget_before(10);
    assert_eq!(left.held, HashSet::from([2, 3]));
    assert_eq!(left.thinned, HashSet::from([1]), "pid 2 lost spans, not keys");
    let mut kept: Vec<(u32, Vec<Span>)> = c
        .totals
        .iter()
        .map(|(k, s)| (u32::from_ne_bytes(k[..4].try_into().unwrap()), s.to_vec()))
        .collect();
    kept.sort();
    assert_eq!(kept, [(2, vec![Span { first: 10, last: 11, weight: 4 }]), (3, vec![Span::at(12, 2)])]);
    let mut stacks: Vec<u64> = c.stacks.keys().copied().collect();
    stacks.sort();
    assert_eq!(stacks, [102, 103, 202, 203, 300], "the stacks of forgotten keys go with them");
    assert_eq!(c.spans, 2);
}

#[test]
fn what_is_held_of_a_process_is_what_its_retiring_located() {
    let slicing = Slicing { origin: 0, width: Duration::from_millis(100), widened: 1 };
    let mut c = Counts::new(slicing, None);
    // Leaf first, then two callers' return addresses.
    let user: Arc<[u64]> = Arc::from(&[0x1000, 0x2005, 0x3009][..]);
    *c.totals.entry(key(7, 70, 0)).0 = [Span::at(12, 1)].into_iter().collect();
    c.stacks.insert(70, user);
    c.by_pid.insert(7, vec![(0, 70)]);
    c.exits.push(((7, 0), 0));
    c.drains = 2;
    let retired = c.take_retired();
    assert_eq!(retired.len(), 1);
    c.forget_before(10);
    let held = c.held_addresses(7);
    let located: HashSet<u64> = retired[0].1.iter().copied().collect();
    assert_eq!(held, located, "the addresses kept located are those the window still holds");
}

#[test]
fn a_retired_process_takes_its_own_stacks_not_those_of_the_next_under_its_pid() {
    let slicing = Slicing { origin: 0, width: Duration::from_millis(100), widened: 1 };
    let mut c = Counts::new(slicing, None);
    // PID 7 held by a process started at tick 100, then one at tick 200.
    c.stacks.insert(70, Arc::from(&[0x1000][..]));
    c.stacks.insert(71, Arc::from(&[0x2000][..]));
    c.by_pid.insert(7, vec![(100, 70), (200, 71)]);
    c.exits.push(((7, 100), 0));
    c.drains = 2;
    let retired = c.take_retired();
    assert_eq!(retired, vec![((7, 100), vec![0x1000])]);
    assert_eq!(c.held_addresses(7), HashSet::from([0x2000]), "the next one's stacks stay held");
}
