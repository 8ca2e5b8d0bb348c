//! The check at attach, before the walker is given a VM's layout: what the
//! layout makes of the live process must match what is known of it. The
//! version string at `ruby_version` reads as the file's version (the load
//! address is right), and `rb_cObject` is a class whose path, read
//! through the layout's class, string and symbol-table offsets, is
//! `Object`. A VM that has not yet set `rb_cObject` (a command profiled
//! from its first instruction) is not checked yet: its walker still
//! bounds every control frame by its VM stack. A VM that fails is not
//! read, and the summary says why.

use super::iseq::Reader;
use super::{parse_version, Interpreter};
use crate::procs::mem::Mem;

/// A test hook: the path the check expects of `rb_cObject` (default
/// `Object`). tests/ruby.rs sets another to see a VM refused.
const EXPECT_ENV: &str = "FGBPF_TEST_RUBY_OBJECT_PATH";

/// Ok when `vm` checks out in the process `mem` reads (or cannot be
/// checked yet); else why not.
pub fn check(mem: &Mem, vm: &Interpreter) -> Result<(), String> {
    let (major, minor) = vm.version;
    let fail = |why: String| Err(format!("Ruby {major}.{minor}: the layout's check failed ({why})"));
    if vm.version_at != 0 {
        let read = mem.bytes(vm.version_at, 16).and_then(|b| parse_version(&b));
        if read != Some(vm.version) {
            return fail(format!("ruby_version reads {read:?} in the process"));
        }
    }
    if vm.object_at == 0 {
        return fail("no rb_cObject".into());
    }
    let Some(object) = mem.u64(vm.object_at) else {
        return fail("rb_cObject could not be read".into());
    };
    if object == 0 {
        return Ok(());
    }
    let want = std::env::var(EXPECT_ENV).unwrap_or_else(|_| "Object".into());
    let mut reader = Reader::new(mem.pid(), vm.layout, vm.data);
    match reader.class_path(object) {
        Some((path, false)) if path == want => Ok(()),
        Some((path, singleton)) => fail(format!("rb_cObject reads as {path:?}{}, not {want:?}", if singleton { " (singleton)" } else { "" })),
        None => fail(format!("rb_cObject's class path could not be read, {want:?} expected")),
    }
}
