//! Compiles the unwind tables of the binaries named on the command line
//! and prints, per binary: FDEs, rows, kernel bytes (the BPF array holds 16
//! bytes per row), unsupported rules and compile time. Run by
//! `scripts/bench.sh`; usage: `unwind_tables FILE...`.

use std::time::Instant;

use fgbpf::procs::unwind;

fn main() {
    println!(
        "{:<48} {:>8} {:>9} {:>10} {:>11} {:>10}",
        "binary", "FDEs", "rows", "kernel KB", "unsupported", "compile"
    );
    for path in std::env::args().skip(1) {
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                println!("{path:<48} cannot read: {e}");
                continue;
            }
        };
        let started = Instant::now();
        match unwind::compile(&data) {
            Ok(t) => println!(
                "{:<48} {:>8} {:>9} {:>10} {:>11} {:>8.1} ms",
                format!("{path} ({:.1} MB)", data.len() as f64 / 1e6),
                t.stats.fdes,
                t.rows.len(),
                t.rows.len() * 16 / 1024,
                t.stats.cfa_unsupported + t.stats.rbp_unsupported,
                started.elapsed().as_secs_f64() * 1000.0
            ),
            Err(e) => println!("{path:<48} {e}"),
        }
    }
}
