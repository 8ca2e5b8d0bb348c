//! Tests of the unwind compiler against binutils: real binaries of this
//! machine are compiled and `lookup` is checked, at every row start, middle
//! and last byte `readelf --debug-dump=frames-interp` lists, against the
//! rule readelf prints there. Also: gap rows, the PLT recogniser and its
//! expansion, the C layout of `Row`, sizes and times (printed).

use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

use object::{Object, ObjectSection};

use super::rows::plt_expression;
use super::*;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const PYTHON: &str = "/usr/bin/python3.11";
const BASH: &str = "/bin/bash";

/// One row of readelf's interpreted table; `None` for a column it omits.
#[derive(Clone, Debug)]
struct RRow {
    loc: u64,
    cfa: String,
    rbp: Option<String>,
    ra: Option<String>,
}

#[derive(Debug)]
struct RFde {
    start: u64,
    end: u64,
    rows: Vec<RRow>,
}

/// Parses the `.eh_frame` part of `readelf --debug-dump=frames-interp`.
/// An FDE without instructions has no table: it gets its CIE's.
fn readelf_fdes(path: &str) -> Vec<RFde> {
    let out = Command::new("readelf")
        .args(["--debug-dump=frames-interp", "-W", path])
        .output()
        .expect("readelf (binutils) runs");
    // readelf exits 1 on libc.so.6 without a word on stderr: judge by the
    // output instead.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Contents of the .eh_frame section"),
        "readelf failed on {path}: {:?}",
        out.status
    );
    let mut cies: HashMap<String, Vec<RRow>> = HashMap::new();
    let mut fdes = Vec::new();
    enum Cur {
        None,
        Cie(String),
        Fde(usize),
    }
    let mut cur = Cur::None;
    let mut cols: Vec<String> = Vec::new();
    let mut in_eh = false;
    for line in text.lines() {
        if line.starts_with("Contents of the ") {
            in_eh = line.starts_with("Contents of the .eh_frame section");
            cur = Cur::None;
            continue;
        }
        if !in_eh {
            continue;
        }
        // A register column reads "r9 (r9)": one value, two words.
        let mut toks: Vec<String> = Vec::new();
        for w in line.split_whitespace() {
            match toks.last_mut() {
                Some(last) if w.starts_with('(') => *last = format!("{last} {w}"),
                _ => toks.push(w.to_string()),
            }
        }
        let toks: Vec<&str> = toks.iter().map(String::as_str).collect();
        if line.contains("ZERO terminator") {
            continue;
        }
        if toks.len() >= 4 && toks[3] == "CIE" {
            cur = Cur::Cie(toks[0].to_string());
            cies.insert(toks[0].to_string(), Vec::new());
        } else if toks.len() >= 6 && toks[3] == "FDE" {
            let cie = toks[4].strip_prefix("cie=").unwrap().to_string();
            let pc = toks[5].strip_prefix("pc=").unwrap();
            let (s, e) = pc.split_once("..").unwrap();
            let (start, end) = (
                u64::from_str_radix(s, 16).unwrap(),
                u64::from_str_radix(e, 16).unwrap(),
            );
            // A CIE's table is its initial row: the FDE's if it prints none.
            let init = cies.get(&cie).and_then(|r| r.first().cloned());
            let rows = init
                .map(|r| vec![RRow { loc: start, ..r }])
                .unwrap_or_default();
            fdes.push(RFde { start, end, rows });
            cur = Cur::Fde(fdes.len() - 1);
        } else if toks.first() == Some(&"LOC") {
            cols = toks.iter().map(|s| s.to_string()).collect();
            if let Cur::Fde(i) = cur {
                fdes[i].rows.clear();
            }
        } else if !toks.is_empty()
            && toks.len() == cols.len()
            && u64::from_str_radix(toks[0], 16).is_ok()
        {
            let get = |name: &str| {
                cols.iter()
                    .position(|c| c == name)
                    .map(|i| toks[i].to_string())
            };
            let row = RRow {
                loc: u64::from_str_radix(toks[0], 16).unwrap(),
                cfa: toks[1].to_string(),
                rbp: get("rbp"),
                ra: get("ra"),
            };
            match &cur {
                Cur::Cie(off) => cies.get_mut(off).unwrap().push(row),
                Cur::Fde(i) => fdes[*i].rows.push(row),
                Cur::None => {}
            }
        }
    }
    fdes
}

/// Address ranges covered by two FDEs or more (sorted sweep).
fn overlaps(fdes: &[RFde]) -> Vec<(u64, u64)> {
    let mut r: Vec<(u64, u64)> = fdes
        .iter()
        .filter(|f| f.end > f.start)
        .map(|f| (f.start, f.end))
        .collect();
    r.sort();
    let mut out = Vec::new();
    let mut max_end = 0;
    for (s, e) in r {
        if s < max_end {
            out.push((s, e.min(max_end)));
        }
        max_end = max_end.max(e);
    }
    out
}

fn plt_ranges(data: &[u8]) -> Vec<(u64, u64)> {
    let file = object::File::parse(data).unwrap();
    file.sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".plt")))
        .map(|s| (s.address(), s.address() + s.size()))
        .collect()
}

/// Compares `lookup` with readelf at sampled addresses; returns the number
/// of samples checked.
fn check_against_readelf(path: &str) -> usize {
    let data = std::fs::read(path).unwrap();
    let t0 = Instant::now();
    let table = compile(&data).unwrap_or_else(|e| panic!("{path}: {e}"));
    let took = t0.elapsed();
    print_stats(path, data.len(), &table, took);

    let fdes = readelf_fdes(path);
    assert!(
        fdes.len() > 100,
        "{path}: readelf listed only {} FDEs",
        fdes.len()
    );
    let nonempty = fdes.iter().filter(|f| f.end > f.start).count();
    assert_eq!(
        table.stats.fdes - table.stats.fdes_empty,
        nonempty,
        "{path}: FDE count"
    );
    let over = overlaps(&fdes);
    let plts = plt_ranges(&data);
    let in_any = |rs: &[(u64, u64)], a: u64| rs.iter().any(|&(s, e)| s <= a && a < e);

    let mut checked = 0;
    let mut bad = Vec::new();
    for f in fdes.iter().filter(|f| f.end > f.start) {
        for (i, r) in f.rows.iter().enumerate() {
            let next = f.rows.get(i + 1).map_or(f.end, |n| n.loc);
            for a in [r.loc, r.loc + (next - r.loc) / 2, next - 1] {
                if a < f.start || a >= f.end || in_any(&over, a) {
                    continue;
                }
                checked += 1;
                let got = lookup(&table, a).copied();
                if let Some(why) = mismatch(r, got, in_any(&plts, a)) {
                    bad.push(format!("{a:#x}: readelf {r:?}, got {got:?}: {why}"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{path}: {} of {checked} samples differ, first: {:#?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
    // Every FDE has rows, each sampled up to three times: far more samples
    // than FDEs, unless readelf's table was not read (then nothing would
    // have been compared).
    assert!(checked > nonempty, "{path}: only {checked} addresses compared for {nonempty} FDEs");
    eprintln!("{path}: {checked} sampled addresses agree with readelf");
    checked
}

/// Why `got` is not what readelf's row says, if it is not.
fn mismatch(r: &RRow, got: Option<Row>, in_plt: bool) -> Option<String> {
    let Some(got) = got else {
        return Some("no row".into());
    };
    let (cfa, off) = (got.cfa(), got.cfa_off);
    match r.ra.as_deref() {
        Some("u") => return (cfa != CfaType::End).then(|| "want END".into()),
        Some("c-8") => {}
        // A signal trampoline's expressions are the walker's SIGNAL row
        // (libc_s_signal_trampoline_is_a_signal_row checks which).
        _ if cfa == CfaType::Signal => return None,
        _ => {
            return (cfa != CfaType::Unsupported).then(|| "ra not at c-8: want UNSUPPORTED".into())
        }
    }
    let want_cfa_ok = if let Some(n) = r.cfa.strip_prefix("rsp+") {
        cfa == CfaType::Rsp && off.to_string() == n
    } else if let Some(n) = r.cfa.strip_prefix("rbp+") {
        cfa == CfaType::Rbp && off.to_string() == n
    } else if r.cfa == "exp" && in_plt {
        (cfa == CfaType::Plt && off == 8) || cfa == CfaType::Rsp
    } else {
        cfa == CfaType::Unsupported
    };
    if !want_cfa_ok {
        return Some("CFA differs".into());
    }
    if cfa == CfaType::Unsupported {
        return None;
    }
    let rbp_ok = match r.rbp.as_deref() {
        None | Some("u") | Some("s") => got.rbp() == RbpType::Same,
        Some(c) if c.starts_with('c') && c[1..].parse::<i64>().is_ok() => {
            got.rbp() == RbpType::AtCfa && i64::from(got.rbp_off) == c[1..].parse::<i64>().unwrap()
        }
        Some(_) => got.rbp() == RbpType::Unsupported,
    };
    (!rbp_ok).then(|| "rbp differs".into())
}

fn print_stats(path: &str, file_len: usize, t: &Table, took: std::time::Duration) {
    let s = &t.stats;
    eprintln!(
        "{path} ({:.1} MB): {} {} FDEs ({} empty, {} overlapping, {} broken), rows {} (before merge {}), {} bytes ({:.1} KiB), \
         gaps {}, plt {} (+{} expanded), end {}, unsupported cfa {} (expr {}, ra {}), unsupported rbp {}, base {:#x}, compile {:.1} ms",
        file_len as f64 / 1e6,
        s.section,
        s.fdes,
        s.fdes_empty,
        s.fdes_overlapping,
        s.fdes_broken,
        s.rows,
        s.rows_raw,
        s.bytes,
        s.bytes as f64 / 1024.0,
        s.gaps,
        s.plt,
        s.plt_expanded,
        s.end,
        s.cfa_unsupported,
        s.unsupported_expr,
        s.unsupported_ra,
        s.rbp_unsupported,
        t.base,
        took.as_secs_f64() * 1e3,
    );
}

#[test]
fn libc_matches_readelf() {
    check_against_readelf(LIBC);
}

#[test]
fn python_matches_readelf() {
    check_against_readelf(PYTHON);
}

#[test]
fn bash_matches_readelf() {
    check_against_readelf(BASH);
}

#[test]
fn own_test_binary_matches_readelf() {
    let exe = std::env::current_exe().unwrap();
    check_against_readelf(exe.to_str().unwrap());
}

/// Well-formedness, and NONE between FDEs: a lookup in a gap must not
/// return the previous function's rule.
#[test]
fn gaps_are_none() {
    for path in [LIBC, PYTHON, BASH] {
        let data = std::fs::read(path).unwrap();
        let t = compile(&data).unwrap();
        assert!(
            t.rows.windows(2).all(|w| w[0].pc < w[1].pc),
            "{path}: rows sorted, unique pcs"
        );
        assert!(
            t.rows.windows(2).all(
                |w| (w[0].cfa_type, w[0].cfa_off, w[0].rbp_type, w[0].rbp_off)
                    != (w[1].cfa_type, w[1].cfa_off, w[1].rbp_type, w[1].rbp_off)
            ),
            "{path}: neighbours merged"
        );
        assert_eq!(
            t.rows.last().unwrap().cfa(),
            CfaType::None,
            "{path}: ends with a gap row"
        );
        assert!(lookup(&t, t.base.wrapping_sub(1)).is_none());
        assert_ne!(lookup(&t, t.base).unwrap().cfa(), CfaType::None);

        // Coverage from readelf; every hole between FDEs must be NONE.
        let mut r: Vec<(u64, u64)> = readelf_fdes(path)
            .iter()
            .filter(|f| f.end > f.start)
            .map(|f| (f.start, f.end))
            .collect();
        r.sort();
        let mut holes = 0;
        let mut covered = r[0].1;
        for &(s, e) in &r[1..] {
            if s > covered {
                holes += 1;
                for a in [covered, (covered + s) / 2, s - 1] {
                    assert_eq!(
                        lookup(&t, a).unwrap().cfa(),
                        CfaType::None,
                        "{path}: {a:#x} in a gap"
                    );
                }
            }
            covered = covered.max(e);
        }
        assert_eq!(
            lookup(&t, covered).unwrap().cfa(),
            CfaType::None,
            "{path}: past the last FDE"
        );
        assert!(holes > 0, "{path}: expected gaps between FDEs");
        assert!(
            t.stats.gaps >= holes,
            "{path}: {} gap rows for {holes} holes",
            t.stats.gaps
        );
        eprintln!("{path}: {holes} gaps between FDEs, all NONE");
    }
}

#[test]
fn plt_expressions() {
    // glibc/ld's lazy PLT, as in libc.so.6 (threshold 11).
    let lazy = [
        0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22,
    ];
    assert_eq!(plt_expression(&lazy), Some((8, 11)));
    // IBT + BND variant (DW_OP_lit10).
    let mut v = lazy;
    v[6] = 0x3a;
    assert_eq!(plt_expression(&v), Some((8, 10)));
    // Not PLT: a deref'ing expression, a truncated one, another register.
    assert_eq!(plt_expression(&[0x77, 0xa0, 0x01, 0x06]), None);
    assert_eq!(plt_expression(&lazy[..10]), None);
    let mut r = lazy;
    r[0] = 0x76;
    assert_eq!(plt_expression(&r), None);

    let data = std::fs::read(LIBC).unwrap();
    let t = compile(&data).unwrap();
    assert!(t.stats.plt > 0, "libc's .plt yields a PLT row");
    let plt = t.rows.iter().find(|r| r.cfa() == CfaType::Plt).unwrap();
    assert_eq!((plt.cfa_off, plt.rbp()), (8, RbpType::Same));
}

#[test]
fn row_layout_matches_c() {
    assert_eq!(std::mem::size_of::<Row>(), 12);
    assert_eq!(std::mem::offset_of!(Row, pc), 0);
    assert_eq!(std::mem::offset_of!(Row, cfa_off), 4);
    assert_eq!(std::mem::offset_of!(Row, rbp_off), 8);
    assert_eq!(std::mem::offset_of!(Row, cfa_type), 10);
    assert_eq!(std::mem::offset_of!(Row, rbp_type), 11);
    assert_eq!((CfaType::None as u8, CfaType::Unsupported as u8), (0, 5));
    assert_eq!((RbpType::Same as u8, RbpType::Unsupported as u8), (0, 2));
}

#[test]
fn errors_read_well() {
    let e = compile(b"not an elf file").unwrap_err();
    assert!(e.to_string().starts_with("not a readable ELF file"), "{e}");
    // An x86_64 ELF without any unwind section: the headers alone.
    let data = std::fs::read(BASH).unwrap();
    let mut stripped = data.clone();
    // Rename the section (".eh_frame" → ".xh_frame") in the string table.
    let name_pos = data.windows(10).position(|w| w == b".eh_frame\0").unwrap();
    stripped[name_pos + 1] = b'x';
    let e = compile(&stripped).unwrap_err();
    assert!(matches!(e, Error::NoUnwindInfo), "{e}");
    eprintln!("errors: {e}");
}

/// The BPF walker's lookup through the page index finds the same row as
/// the plain binary search, at each row's first byte, the byte before it
/// and the byte after it, at every page boundary, and past the end; and no
/// page holds more rows than the walker's search covers.
#[test]
fn paged_lookup_agrees_with_lookup() {
    let exe = std::env::current_exe().unwrap();
    for path in [LIBC, PYTHON, BASH, exe.to_str().unwrap()] {
        let data = std::fs::read(path).unwrap();
        let t = compile(&data).unwrap();
        let pages = t.pages();
        assert_eq!(*pages.last().unwrap() as usize, t.rows.len(), "{path}");
        assert!(pages.windows(2).all(|w| w[0] <= w[1] && w[1] - w[0] <= 256), "{path}");
        let end = u64::from(t.rows.last().unwrap().pc) + 4096;
        let mut addrs: Vec<u64> = t
            .rows
            .iter()
            .flat_map(|r| [u64::from(r.pc).saturating_sub(1), u64::from(r.pc), u64::from(r.pc) + 1])
            .collect();
        addrs.extend((0..=end >> PAGE_SHIFT).flat_map(|p| [(p << PAGE_SHIFT).saturating_sub(1), p << PAGE_SHIFT]));
        addrs.push(end);
        for rel in addrs {
            let at = t.base + rel;
            assert_eq!(lookup(&t, at), lookup_paged(&t, &pages, at), "{path} at {at:#x}");
        }
        let dense = pages.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        eprintln!("{path}: {} rows, {} page entries, at most {dense} rows in a page", t.rows.len(), pages.len());
    }
}

#[test]
fn an_outermost_range_becomes_one_end_row_and_what_follows_stays() {
    let row = |pc, cfa_off| Row {
        pc,
        cfa_off,
        cfa_type: CfaType::Rsp as u8,
        ..Row::default()
    };
    let mut t = Table {
        base: 0x1000,
        rows: vec![row(0, 8), row(0x10, 16), row(0x20, 24), row(0x40, 8)],
        stats: Stats::default(),
    };
    mark(&mut t, 0x1018, 0x1030, CfaType::End);
    let end = Row {
        pc: 0x18,
        cfa_type: CfaType::End as u8,
        ..Row::default()
    };
    assert_eq!(t.rows, vec![row(0, 8), row(0x10, 16), end, row(0x30, 24), row(0x40, 8)]);
    assert_eq!(lookup(&t, 0x102f).map(Row::cfa), Some(CfaType::End));
    assert_eq!(lookup(&t, 0x1030).map(|r| r.cfa_off), Some(24));
    // A range ending where a row starts keeps that row as it is.
    mark(&mut t, 0x1000, 0x1010, CfaType::End);
    assert_eq!(t.rows[0].cfa(), CfaType::End);
    assert_eq!(t.rows[1], row(0x10, 16));
}

/// glibc's signal return trampoline (`__restore_rt`, CFI augmentation `S`)
/// is one SIGNAL row, from the byte before it: the walker reads the
/// interrupted registers from the kernel's signal frame there.
#[test]
fn libc_s_signal_trampoline_is_a_signal_row() {
    let t = compile(&std::fs::read(LIBC).unwrap()).unwrap();
    assert_eq!(t.stats.signal, 1, "{:?}", t.stats);
    let at = t.rows.iter().position(|r| r.cfa() == CfaType::Signal).unwrap();
    // The byte after the row's start is the trampoline's first
    // instruction: mov $15 (rt_sigreturn), %rax.
    let data = std::fs::read(LIBC).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let va = t.base + u64::from(t.rows[at].pc) + 1;
    use object::{Object, ObjectSection};
    let text = file.sections().find(|s| s.address() <= va && va < s.address() + s.size()).unwrap();
    let off = (va - text.address()) as usize;
    assert_eq!(&text.data().unwrap()[off..off + 7], &[0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0], "not rt_sigreturn's trampoline");
}
