//! The registry's reading of a process, against the kernel's own figures.

use super::*;

#[test]
fn a_process_size_added_up_from_its_maps_is_the_kernels_vsize() {
    // A child that maps nothing more while it sleeps.
    let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut registry = Registry::new(Vec::new());
    assert!(registry.read_process(pid));
    let kernel = maps::vsize(pid).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(kernel > 0);
    assert_eq!(registry.procs[&pid].vsize, kernel, "the refresh compares the two");
}

#[test]
fn a_forked_child_takes_its_parents_map_only_when_it_is_the_same_size_and_the_parent_lives() {
    let mut parent = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    let pid = parent.id();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut registry = Registry::new(Vec::new());
    assert!(registry.read_process(pid));
    let size = registry.procs[&pid].vsize;
    // No process has PID 0 or this one: only what was read of the parent
    // can name the child's addresses.
    let child = u32::MAX - 1;
    assert!(!registry.inherit(child, pid, size + 4096, "child"), "a size the parent was not");
    assert!(registry.inherit(child, pid, size, "child"));
    let code = registry.procs[&pid].vmas.iter().find(|v| matches!(v.region, Region::File(_))).unwrap().start;
    let (of_parent, of_child) = (registry.locator(pid).locate(code), registry.locator(child).locate(code));
    assert!(matches!((of_parent, of_child), (Target::Binary(a, x), Target::Binary(b, y)) if a == b && x == y));
    assert_eq!(registry.held().inherited, 1);
    assert_eq!(registry.process_name(child, ""), "child");
    let _ = parent.kill();
    let _ = parent.wait();
    registry.exited(pid);
    assert!(!registry.inherit(child + 1, pid, size, "child"), "a parent that exited");
}
