//! Unit tests of the LuaJIT folder: the VM found in Debian 12's library
//! and in its `luajit`, which links LuaJIT statically.

use super::*;

/// (file, its executable segment's offset and address, the VM's code as
/// `readelf --debug-dump=frames` shows its entry: CFA rsp+80 from its
/// first byte).
const FOUND: [(&str, u64, u64, u64); 2] = [
    ("/lib/x86_64-linux-gnu/libluajit-5.1.so.2", 0x9000, 0x9e40, 0xde92),
    ("/usr/bin/luajit", 0x8000, 0x9b90, 0xdbe2),
];

#[test]
fn the_vm_is_found_in_debians_luajit_and_its_code_range_in_eh_frame() {
    for (path, text, lo, hi) in FOUND {
        let Ok(file) = File::open(path) else {
            panic!("{path} is required (Debian 12's luajit2 and libluajit2-5.1-2)");
        };
        // Mapped at its own addresses: a bias of 0.
        let vm = find(&file, path, text, text).unwrap().expect("LuaJIT");
        assert_eq!((vm.release.as_str(), vm.vm_start, vm.vm_end), ("2.1.0-beta3", lo, hi), "{path}");
    }
}

#[test]
fn a_file_without_luajit_is_none() {
    let file = File::open("/bin/sh").unwrap();
    assert_eq!(find(&file, "/bin/sh", 0, 0), Ok(None));
}
