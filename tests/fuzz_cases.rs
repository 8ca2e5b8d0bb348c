//! Regular-test form of scripts/fuzz.sh: cases the fuzzers found, and the
//! same properties over a fixed set of pseudo-random inputs, so every CI run
//! checks them.

use clap::Parser;
use fgbpf::cli::Cli;
use fgbpf::format::folded::read as folded;
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

/// Random folded lines over names chosen to sort awkwardly (`a`, `a b`,
/// `a0`, names ending in a space and a number), some lines ending inside
/// others' stacks. A leaf never ends in a space and a number: inferno reads
/// that as a second count column, in any file.
fn awkward_lines(rng: &mut Rng) -> String {
    let names = [
        "a",
        "a b",
        "a0",
        "a;b",
        "b",
        "b 1",
        "[sleeping]",
        "x_[k]",
        "a 2",
    ];
    let leaves = ["a", "a b", "a0", "b", "[sleeping]", "x_[k]", "b 1x"];
    let mut text = String::new();
    for _ in 0..(rng.next() % 300) {
        let depth = (rng.next() % 6) as usize;
        let mut frames: Vec<&str> = (0..depth)
            .map(|_| names[(rng.next() as usize) % names.len()])
            .collect();
        frames.push(leaves[(rng.next() as usize) % leaves.len()]);
        let count = if rng.next() % 8 == 0 {
            rng.next() % 2000
        } else {
            rng.next() % 20
        };
        text.push_str(&format!("{} {count}\n", frames.join(";")));
    }
    text
}

#[test]
fn reduced_flamegraphs_match_inferno_on_random_input() {
    use fgbpf::format::{drawn, palette, recolour, svg};
    use inferno::flamegraph;

    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    let mut compared = 0;
    for round in 0..400 {
        let text = awkward_lines(&mut rng);
        let mut lines = Vec::new();
        if folded::scan("r", &text, |l| {
            if l.count > 0 {
                lines.push(format!("{} {}", l.stack, l.count));
            }
        })
        .is_err()
        {
            continue;
        }
        let mut sorted: Vec<&str> = lines.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        let min_width = [0.0, 0.5, 5.0, 30.0][round % 4];
        let scheme = if round % 3 == 0 {
            palette::Scheme::Majority
        } else {
            palette::Scheme::Heat(palette::Heat::OnCpu)
        };
        let shape = palette::Lines {
            leading: 0,
            ours: false,
        };
        let opts = svg::Options {
            min_width,
            scheme,
            ..Default::default()
        };
        let mut reduced = Vec::new();
        svg::render(sorted.clone(), "samples", shape, &opts, &mut reduced).unwrap();

        // Every line, drawn by inferno the way it draws a file by itself.
        let d = drawn::from_sorted(&sorted, min_width, scheme, shape);
        let mut colours = d.palette;
        let mut fopts = flamegraph::Options::default();
        fopts.title = opts.title.clone();
        fopts.count_name = "samples".into();
        fopts.deterministic = true;
        fopts.hash = true;
        fopts.min_width = min_width;
        fopts.palette_map = Some(&mut colours);
        let mut full = Vec::new();
        flamegraph::from_lines(&mut fopts, sorted.iter().copied(), &mut full).unwrap();
        // Recoloured the same way: per box, annotations kept in tooltips.
        let layout = recolour::Layout {
            frame_height: fopts.frame_height,
            scheme,
            shape,
        };
        let full = recolour::recolour(&String::from_utf8(full).unwrap(), &d.nodes, &layout).into_bytes();
        assert!(
            reduced == full,
            "round {round}: the reduced lines draw a different picture for:\n{text}"
        );
        compared += 1;
    }
    assert!(compared > 300, "only {compared} random files were valid");
}
