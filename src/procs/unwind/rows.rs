//! From CFI to rows: evaluates every FDE of an `.eh_frame`/`.debug_frame`
//! with gimli, maps each of gimli's table rows to a [`Rule`] (the row format
//! minus its pc), then lays the FDEs out by address (gap rows between them,
//! overlaps clipped) and merges neighbours with identical rules.
//!
//! Kept apart from `mod.rs` (types, ELF handling, lookup) because this is
//! the part that decides what each DWARF rule becomes, including the PLT
//! expression recogniser.

use gimli::{
    CfaRule, EndianSlice, LittleEndian, Reader, RegisterRule, UnwindContext, UnwindSection, X86_64,
};

use super::{CfaType, Error, RbpType, Row, Stats, Table};

type R<'a> = EndianSlice<'a, LittleEndian>;

/// A row without its pc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rule {
    pub cfa_type: CfaType,
    pub cfa_off: i32,
    pub rbp_type: RbpType,
    pub rbp_off: i16,
}

impl Rule {
    const fn only(cfa_type: CfaType) -> Rule {
        Rule {
            cfa_type,
            cfa_off: 0,
            rbp_type: RbpType::Same,
            rbp_off: 0,
        }
    }
    const GAP: Rule = Rule::only(CfaType::None);
}

/// Why a CFA rule is unsupported (for [`Stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Register,
    Expression,
    ReturnAddress,
}

/// What one gimli row becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mapped {
    Rule(Rule),
    Unsupported(Why),
    /// A PLT expression whose threshold the row format does not carry.
    PltVariant {
        rsp_off: i32,
        threshold: u8,
        rbp: (RbpType, i16),
    },
}

/// The lazy PLT expression: `DW_OP_breg7 (rsp) N; DW_OP_breg16 (rip) 0;
/// DW_OP_lit15; DW_OP_and; DW_OP_litT; DW_OP_ge; DW_OP_lit3; DW_OP_shl;
/// DW_OP_plus`, i.e. CFA = rsp + N + ((rip & 15) >= T ? 8 : 0). Returns
/// (N, T).
pub(super) fn plt_expression(bytes: &[u8]) -> Option<(i32, u8)> {
    const DW_OP_BREG7: u8 = 0x77;
    let rest = bytes.strip_prefix(&[DW_OP_BREG7])?;
    let (n, rest) = sleb128(rest)?;
    // breg16 0, lit15, and
    let rest = rest.strip_prefix(&[0x80, 0x00, 0x3f, 0x1a])?;
    let (&lit, rest) = rest.split_first()?;
    let t = lit.checked_sub(0x30).filter(|t| *t <= 15)?;
    // ge, lit3, shl, plus
    if rest != [0x2a, 0x33, 0x24, 0x22] {
        return None;
    }
    Some((i32::try_from(n).ok()?, t))
}

fn sleb128(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let mut r = EndianSlice::new(bytes, LittleEndian);
    let v = r.read_sleb128().ok()?;
    Some((v, r.slice()))
}

fn map_row<'d, S: UnwindSection<R<'d>>>(section: &S, row: &gimli::UnwindTableRow<usize>) -> Mapped {
    match row.register(X86_64::RA) {
        Some(RegisterRule::Undefined) => return Mapped::Rule(Rule::only(CfaType::End)),
        Some(RegisterRule::Offset(-8)) => {}
        _ => return Mapped::Unsupported(Why::ReturnAddress),
    }
    let rbp = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::Undefined) | Some(RegisterRule::SameValue) => (RbpType::Same, 0),
        Some(RegisterRule::Offset(n)) => match i16::try_from(n) {
            Ok(n) => (RbpType::AtCfa, n),
            Err(_) => (RbpType::Unsupported, 0),
        },
        Some(_) => (RbpType::Unsupported, 0),
    };
    let with = |cfa_type, cfa_off| Rule {
        cfa_type,
        cfa_off,
        rbp_type: rbp.0,
        rbp_off: rbp.1,
    };
    match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let Ok(off) = i32::try_from(*offset) else {
                return Mapped::Unsupported(Why::Register);
            };
            if *register == X86_64::RSP {
                Mapped::Rule(with(CfaType::Rsp, off))
            } else if *register == X86_64::RBP {
                Mapped::Rule(with(CfaType::Rbp, off))
            } else {
                Mapped::Unsupported(Why::Register)
            }
        }
        CfaRule::Expression(e) => {
            let bytes = e.get(section).map(|e| e.0.slice()).unwrap_or(&[]);
            match plt_expression(bytes) {
                Some((n, 11)) => Mapped::Rule(with(CfaType::Plt, n)),
                Some((n, t)) => Mapped::PltVariant {
                    rsp_off: n,
                    threshold: t,
                    rbp,
                },
                None => Mapped::Unsupported(Why::Expression),
            }
        }
    }
}

/// A PLT variant's exact rsp rows over [start, end): `rsp + n` where
/// `(pc & 15) < t`, `rsp + n + 8` from there to the next 16-byte boundary.
fn expand_plt(start: u64, end: u64, n: i32, t: u8, rbp: (RbpType, i16), out: &mut Vec<Seg>) {
    let rule = |off| Rule {
        cfa_type: CfaType::Rsp,
        cfa_off: off,
        rbp_type: rbp.0,
        rbp_off: rbp.1,
    };
    let mut pc = start;
    while pc < end {
        let low = pc & 15;
        let (next, off) = if low < u64::from(t) {
            (pc - low + u64::from(t), n)
        } else {
            (pc - low + 16, n.saturating_add(8))
        };
        let next = next.min(end);
        out.push(Seg {
            start: pc,
            end: next,
            rule: rule(off),
        });
        pc = next;
    }
}

/// One address range with one rule, before layout.
#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u64,
    end: u64,
    rule: Rule,
}

/// An FDE's range and its segments (`segs[first..first + len]`).
struct Fde {
    start: u64,
    end: u64,
    first: usize,
    len: usize,
}

/// The whole compile: parse, evaluate, lay out, merge.
pub(super) fn build<'d, S>(
    section: &S,
    bases: &gimli::BaseAddresses,
    name: &'static str,
) -> Result<Table, Error>
where
    S: UnwindSection<R<'d>>,
    S::Offset: std::hash::Hash + Eq,
{
    let mut stats = Stats {
        section: name,
        ..Stats::default()
    };
    let mut fdes = Vec::new();
    let mut segs = Vec::new();
    let mut ctx = UnwindContext::new();
    let mut cies = rustc_hash::FxHashMap::default();
    let mut entries = section.entries(bases);
    loop {
        let entry = match entries.next() {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(error) => {
                // The entry's length is unreadable: the rest of the section
                // cannot be found. Keep what was read if anything was.
                if fdes.is_empty() {
                    return Err(Error::Dwarf {
                        section: name,
                        error,
                    });
                }
                stats.fdes_broken += 1;
                break;
            }
        };
        let partial = match entry {
            gimli::CieOrFde::Cie(_) => continue,
            gimli::CieOrFde::Fde(p) => p,
        };
        stats.fdes += 1;
        let fde = partial.parse(|s, b, off| {
            if let Some(cie) = cies.get(&off) {
                return Ok(Clone::clone(cie));
            }
            let cie = s.cie_from_offset(b, off)?;
            cies.insert(off, cie.clone());
            Ok(cie)
        });
        let Ok(fde) = fde else {
            stats.fdes_broken += 1;
            continue;
        };
        let (start, end) = (fde.initial_address(), fde.end_address());
        if end <= start {
            stats.fdes_empty += 1;
            continue;
        }
        let first = segs.len();
        // A signal's return trampoline (glibc's __restore_rt, `S` in its
        // CIE): its rules are expressions on the signal frame, which the
        // walker reads itself. glibc's FDE starts a byte before it, where
        // a return address to it is looked up.
        if fde.is_signal_trampoline() {
            segs.push(Seg {
                start,
                end,
                rule: Rule::only(CfaType::Signal),
            });
            fdes.push(Fde {
                start,
                end,
                first,
                len: 1,
            });
            continue;
        }
        let ok = (|| -> gimli::Result<()> {
            let mut table = fde.rows(section, bases, &mut ctx)?;
            while let Some(row) = table.next_row()? {
                let (s, e) = (row.start_address().max(start), row.end_address().min(end));
                if e <= s {
                    continue;
                }
                match map_row(section, row) {
                    Mapped::Rule(rule) => segs.push(Seg {
                        start: s,
                        end: e,
                        rule,
                    }),
                    Mapped::Unsupported(why) => {
                        let mut rule = Rule::only(CfaType::Unsupported);
                        // Only to keep the reasons apart until counted.
                        rule.cfa_off = why as i32;
                        segs.push(Seg {
                            start: s,
                            end: e,
                            rule,
                        });
                    }
                    Mapped::PltVariant {
                        rsp_off,
                        threshold,
                        rbp,
                    } => {
                        let before = segs.len();
                        expand_plt(s, e, rsp_off, threshold, rbp, &mut segs);
                        stats.plt_expanded += segs.len() - before;
                    }
                }
            }
            Ok(())
        })();
        if ok.is_err() {
            segs.truncate(first);
            stats.fdes_broken += 1;
            continue;
        }
        fdes.push(Fde {
            start,
            end,
            first,
            len: segs.len() - first,
        });
    }

    // Lower start first; on equal starts the longer FDE first, then the
    // earlier in the section (sort is stable): the one kept on overlap.
    fdes.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let base = fdes.first().map_or(0, |f| f.start);
    let top = fdes.iter().map(|f| f.end).max().unwrap_or(base);
    if top - base > u64::from(u32::MAX) {
        return Err(Error::TooLarge { base, end: top });
    }

    // Layout: (pc, rule) runs, a gap row wherever coverage stops.
    let mut laid: Vec<(u64, Rule)> = Vec::with_capacity(segs.len() + fdes.len());
    let mut covered = base;
    for f in &fdes {
        if f.start < covered {
            stats.fdes_overlapping += 1;
            if f.end <= covered {
                continue;
            }
        } else if f.start > covered && !laid.is_empty() {
            laid.push((covered, Rule::GAP));
        }
        for seg in &segs[f.first..f.first + f.len] {
            if seg.end <= covered {
                continue;
            }
            laid.push((seg.start.max(covered), seg.rule));
        }
        covered = covered.max(f.end);
    }
    if !laid.is_empty() {
        laid.push((covered, Rule::GAP));
    }
    stats.rows_raw = laid.len();

    // Merge: a row is kept only if its rule differs from the previous one;
    // two rows at one pc (never expected) keep the later.
    let mut rows: Vec<Row> = Vec::with_capacity(laid.len());
    for (pc, rule) in laid {
        let pc = pc - base;
        if rows.last().is_some_and(|r| u64::from(r.pc) == pc) {
            rows.pop();
        }
        if rows.last().is_some_and(|r| rule_of(r) == rule) {
            continue;
        }
        rows.push(to_row(pc, rule));
    }

    // Count the reasons, then forget them and merge what they kept apart.
    for r in &mut rows {
        if r.cfa() == CfaType::Unsupported {
            match r.cfa_off {
                x if x == Why::Expression as i32 => stats.unsupported_expr += 1,
                x if x == Why::ReturnAddress as i32 => stats.unsupported_ra += 1,
                _ => {}
            }
            r.cfa_off = 0;
        }
    }
    rows.dedup_by(|later, kept| rule_of(later) == rule_of(kept));
    for r in &rows {
        match r.cfa() {
            CfaType::None => stats.gaps += 1,
            CfaType::Plt => stats.plt += 1,
            CfaType::End => stats.end += 1,
            CfaType::Signal => stats.signal += 1,
            CfaType::Unsupported => stats.cfa_unsupported += 1,
            CfaType::Rsp | CfaType::Rbp => {}
        }
        if r.rbp() == RbpType::Unsupported
            && matches!(r.cfa(), CfaType::Rsp | CfaType::Rbp | CfaType::Plt)
        {
            stats.rbp_unsupported += 1;
        }
    }
    stats.rows = rows.len();
    stats.bytes = rows.len() * std::mem::size_of::<Row>();
    Ok(Table { base, rows, stats })
}

fn to_row(pc: u64, rule: Rule) -> Row {
    Row {
        pc: pc as u32, // checked against TooLarge above
        cfa_off: rule.cfa_off,
        rbp_off: rule.rbp_off,
        cfa_type: rule.cfa_type as u8,
        rbp_type: rule.rbp_type as u8,
    }
}

fn rule_of(r: &Row) -> Rule {
    Rule {
        cfa_type: r.cfa(),
        cfa_off: r.cfa_off,
        rbp_type: r.rbp(),
        rbp_off: r.rbp_off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A threshold-10 PLT (IBT + BND) over three 16-byte entries, the first
    /// entered 4 bytes in: rsp + 8 before byte 10 of each entry, rsp + 16
    /// from there on.
    #[test]
    fn plt_variant_expands_into_exact_rsp_rows() {
        let mut out = Vec::new();
        expand_plt(0x1004, 0x1030, 8, 10, (RbpType::Same, 0), &mut out);
        let got: Vec<(u64, u64, i32)> = out
            .iter()
            .map(|s| (s.start, s.end, s.rule.cfa_off))
            .collect();
        assert_eq!(
            got,
            [
                (0x1004, 0x100a, 8),
                (0x100a, 0x1010, 16),
                (0x1010, 0x101a, 8),
                (0x101a, 0x1020, 16),
                (0x1020, 0x102a, 8),
                (0x102a, 0x1030, 16),
            ]
        );
        assert!(out.iter().all(|s| s.rule.cfa_type == CfaType::Rsp));
    }
}
