//! Regular-test form of scripts/fuzz.sh: cases the fuzzers found, and the
//! same properties over a fixed set of pseudo-random inputs, so every CI run
//! checks them.

use clap::Parser;
use fgbpf::cli::Cli;
use fgbpf::input::folded;
use fgbpf::profile::Unit;

/// A fixed xorshift stream: the same inputs on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, alphabet: &[u8], max: usize) -> Vec<u8> {
        let n = (self.next() as usize) % max;
        (0..n)
            .map(|_| alphabet[(self.next() as usize) % alphabet.len()])
            .collect()
    }
}

fn check_folded(data: &[u8]) {
    if let Err(e) = folded::parse("case.folded", data, Unit::Samples) {
        assert!(
            e.starts_with("case.folded"),
            "error does not name the file: {e}"
        );
        assert!(!e.contains('\n'), "error is more than one line: {e:?}");
    }
}

#[test]
fn folded_cases_found_by_fuzzing() {
    for case in [
        // Counts whose sum overflows (crashed inferno before the 2^53 cap).
        &b"a 18446744073709551615\nb 18446744073709551615\n"[..],
        b"a;b 9007199254740993\n",
        b";;; 1\n",
        b" 1\n",
        b"a 1.5e308\n",
        b"a -1\n",
        b"\xff\xfe;\x00 3\n",
        b"a;b\r\n",
        b"[sleeping] 1\n",
        b"p-1;t-2 1\n",
        b"p-1;t-x;f 1\n",
    ] {
        check_folded(case);
    }
}

#[test]
fn folded_reader_never_panics_on_random_input() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let alphabet = b"ab;- 0123456789.\n\t[]_k\xff";
    for _ in 0..5000 {
        check_folded(&rng.bytes(alphabet, 200));
    }
}

#[test]
fn cli_parser_never_panics_on_random_arguments() {
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let words = [
        "oncpu",
        "offcpu",
        "wall",
        "report",
        "flamegraph",
        "diff",
        "convert",
        "demo",
        "-p",
        "-t",
        "-F",
        "-d",
        "-o",
        "--",
        "--min-block",
        "--max-block",
        "--state",
        "--sample",
        "--format",
        "--per-process",
        "0",
        "1",
        "-1",
        "99999999999",
        "1,2,,3",
        "svg,pprof",
        "sleeping,x",
        "nan",
        "",
        "--top",
        "--json",
        "=",
        "-F=5",
    ];
    for _ in 0..3000 {
        let n = (rng.next() % 8) as usize;
        let args: Vec<String> = (0..n)
            .map(|_| words[(rng.next() as usize) % words.len()].to_string())
            .collect();
        let _ = Cli::try_parse_from(std::iter::once("fgbpf".to_string()).chain(args));
    }
}
