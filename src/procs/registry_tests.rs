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
