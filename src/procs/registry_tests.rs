//! The registry's reading of a process, against the kernel's own figures.

use super::*;

/// A `sleep 5` that maps nothing more while it sleeps, its PID, and an
/// empty registry.
fn sleeping() -> (std::process::Child, u32, Registry) {
    let child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id();
    std::thread::sleep(std::time::Duration::from_millis(200));
    (child, pid, Registry::new(Vec::new()))
}

#[test]
fn a_process_size_added_up_from_its_maps_is_the_kernels_vsize() {
    // A child that maps nothing more while it sleeps.
    let (mut child, pid, mut registry) = sleeping();
    assert!(registry.read_process(pid));
    let kernel = maps::vsize(pid).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(kernel > 0);
    assert_eq!(registry.procs[&pid].vsize, kernel, "the refresh compares the two");
}

#[test]
fn a_forked_child_takes_its_parents_map_only_when_it_is_the_same_size_and_the_parent_lives() {
    let (mut parent, pid, mut registry) = sleeping();
    assert!(registry.read_process(pid));
    let size = registry.procs[&pid].vsize;
    // No process has PID 0 or this one: only what was read of the parent
    // can name the child's addresses.
    let child = u32::MAX - 1;
    assert!(!registry.inherit(child, 1, pid, size + 4096, "child"), "a size the parent was not");
    assert!(registry.inherit(child, 1, pid, size, "child"));
    let code = registry.procs[&pid].vmas.iter().find(|v| matches!(v.region, Region::File(_))).unwrap().start;
    let (of_parent, of_child) = (registry.locator(pid, 0).locate(code), registry.locator(child, 1).locate(code));
    assert!(matches!((of_parent, of_child), (Target::Binary(a, x), Target::Binary(b, y)) if a == b && x == y));
    assert_eq!(registry.held().inherited, 1);
    assert_eq!(registry.process_name(child, 1, ""), "child");
    let _ = parent.kill();
    let _ = parent.wait();
    registry.exited(pid, 0);
    assert!(!registry.inherit(child + 1, 1, pid, size, "child"), "a parent that exited");
}

#[test]
fn a_pid_given_again_is_another_process_with_its_own_map_and_name() {
    let (mut sleeper, pid, mut registry) = sleeping();
    let start = maps::stat(pid).unwrap().start;
    assert!(start > 0);
    // What was read is made an earlier process's under the same PID: a
    // start before the real one, and a map of one binary at an address
    // the real process does not map.
    assert!(registry.remember(pid, start - 1, "earlier").is_some());
    let p = registry.procs.get_mut(&pid).unwrap();
    assert_eq!(p.start, start, "the start read with the map");
    p.start = start - 1;
    let code = p.vmas.iter().find(|v| matches!(v.region, Region::File(_))).copied().unwrap();
    p.vmas = vec![Vma { start: 0x1000, end: 0x2000, offset: 0, region: code.region }];
    // Read again: the process under the PID now is another one.
    registry.name(pid, start, "now");
    assert!(registry.read_process(pid));
    assert!(matches!(registry.locator(pid, start - 1).locate(0x1800), Target::Binary(_, 0x800)));
    assert!(matches!(registry.locator(pid, start).locate(0x1800), Target::Unmapped), "not merged into the new map");
    assert!(matches!(registry.locator(pid, start).locate(code.start), Target::Binary(..)));
    assert_eq!(registry.process_name(pid, start - 1, "thread"), "earlier");
    assert_eq!(registry.process_name(pid, start, "thread"), "now");
    assert_eq!(registry.process_name(pid, start + 1, "thread"), "thread", "a start nothing was read of");
    // The earlier one retired: where its addresses lay is kept, and the
    // process under the PID now is untouched.
    registry.retire(pid, start - 1, &[0x1800]);
    assert!(matches!(registry.locator(pid, start - 1).locate(0x1800), Target::Binary(_, 0x800)));
    assert!(matches!(registry.locator(pid, start).locate(code.start), Target::Binary(..)));
    assert_eq!(registry.held().processes, 1);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}
