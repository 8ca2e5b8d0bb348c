//! The folded-file reader never panics: any input is either a profile or
//! one error naming the file and line.
#![no_main]

use fgbpf::format::folded::read as folded;
use fgbpf::profile::Unit;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match folded::parse("fuzz.folded", data, Unit::Samples) {
        Ok(_) => {}
        Err(e) => assert!(e.starts_with("fuzz.folded") && !e.contains('\n'), "{e}"),
    }
});
