//! Unit tests of the LuaJIT folder: the VM found in Debian's library.

use super::*;

const LIB: &str = "/lib/x86_64-linux-gnu/libluajit-5.1.so.2";

#[test]
fn the_vm_is_found_in_debians_library_and_its_code_range_in_eh_frame() {
    let Ok(file) = File::open(LIB) else {
        panic!("{LIB} is required (Debian's libluajit2-5.1-2)");
    };
    let vm = find(&file, LIB, 0, 0).unwrap().expect("LuaJIT");
    assert_eq!(vm.release, "2.1.0-beta3");
    // The VM's code is some tens of KB, a C function's entry is not it.
    let size = vm.vm_end - vm.vm_start;
    assert!((8 << 10..256 << 10).contains(&size), "{vm:?}");
}

#[test]
fn a_file_without_luajit_is_none() {
    let file = File::open("/bin/sh").unwrap();
    assert_eq!(find(&file, "/bin/sh", 0, 0), Ok(None));
}
