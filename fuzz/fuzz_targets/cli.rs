//! Command-line parsing never panics, whatever the arguments.
#![no_main]

use clap::Parser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // NUL-separated arguments, as the kernel hands them to a program.
    let args = data.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned());
    let _ = fgbpf::cli::Cli::try_parse_from(std::iter::once("fgbpf".to_string()).chain(args));
});
