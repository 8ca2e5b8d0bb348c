//! A check of the built BPF object against the stack rule of the oldest
//! verifiers fgbpf loads on: every chain of calls from a program, with its
//! `bpf_loop` callbacks and the calls in code a read-only setting leaves
//! dead (6.1's verifier follows both), may hold 512 bytes of stack in all,
//! each frame rounded up to 32 bytes. The host's newer verifier does not
//! count the dead calls, so a program can load here and be refused on
//! Debian 12's 6.1 (it was, for three days, unseen until
//! `scripts/kernel-matrix.sh` ran). A frame's size is read from the code:
//! the deepest stack slot it touches, directly or through a pointer made
//! from the frame pointer, which is at least what the verifier counts.

use std::collections::{HashMap, HashSet};

use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex, SymbolKind};

const INSN: usize = 8;
const MAX_STACK: u64 = 512;

/// A function of the object: its section, first instruction and length.
struct Func {
    name: String,
    section: SectionIndex,
    start: usize,
    len: usize,
}

/// Each function's frame (bytes) and the functions it calls or passes as
/// a callback, by name.
fn frames_and_calls(elf: &[u8]) -> Result<HashMap<String, (u64, HashSet<String>)>, String> {
    let file = object::File::parse(elf).map_err(|e| e.to_string())?;
    let funcs: Vec<Func> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter_map(|s| {
            Some(Func {
                name: s.name().ok()?.to_string(),
                section: s.section_index()?,
                start: s.address() as usize / INSN,
                len: s.size() as usize / INSN,
            })
        })
        .collect();
    let at = |section: SectionIndex, insn: usize| {
        funcs.iter().find(|f| f.section == section && f.start == insn).map(|f| f.name.clone())
    };
    let mut out = HashMap::new();
    for section in file.sections() {
        let Ok(data) = section.data() else { continue };
        // Relocated instructions: the symbol's section and offset.
        let mut relocs: HashMap<usize, (SectionIndex, usize)> = HashMap::new();
        for (offset, r) in section.relocations() {
            if let RelocationTarget::Symbol(i) = r.target() {
                let sym = file.symbol_by_index(i).map_err(|e| e.to_string())?;
                if let Some(s) = sym.section_index() {
                    relocs.insert(offset as usize / INSN, (s, sym.address() as usize));
                }
            }
        }
        for f in funcs.iter().filter(|f| f.section == section.index()) {
            let mut deepest = 0u64;
            let mut calls = HashSet::new();
            // Registers holding the frame pointer plus an offset.
            let mut from_fp: HashMap<u8, i64> = HashMap::new();
            for pc in f.start..f.start + f.len {
                let Some(b) = data.get(pc * INSN..pc * INSN + INSN) else { break };
                let (code, dst, src) = (b[0], b[1] & 0xf, b[1] >> 4);
                let off = i64::from(i16::from_le_bytes([b[2], b[3]]));
                let imm = i64::from(i32::from_le_bytes([b[4], b[5], b[6], b[7]]));
                let mut touch = |o: i64| deepest = deepest.max(o.unsigned_abs() * u64::from(o < 0));
                match code & 7 {
                    // ldx: a load through a pointer (the frame's, or one made from it).
                    1 => {
                        if let Some(base) = if src == 10 { Some(0) } else { from_fp.get(&src).copied() } {
                            touch(base + off);
                        }
                        from_fp.remove(&dst);
                    }
                    // st, stx: a store through one.
                    2 | 3 => {
                        if let Some(base) = if dst == 10 { Some(0) } else { from_fp.get(&dst).copied() } {
                            touch(base + off);
                        }
                    }
                    // alu64: rX = r10, rX += K.
                    7 => match (code & 0xf0, code & 8 != 0) {
                        (0xb0, true) if src == 10 => {
                            from_fp.insert(dst, 0);
                        }
                        (0xb0, true) if from_fp.contains_key(&src) => {
                            let base = from_fp[&src];
                            from_fp.insert(dst, base);
                        }
                        (0x00, false) if from_fp.contains_key(&dst) => {
                            let base = from_fp[&dst] + imm;
                            touch(base);
                            from_fp.insert(dst, base);
                        }
                        _ => {
                            from_fp.remove(&dst);
                        }
                    },
                    // jmp: a call to a subprogram (src 1), not a helper.
                    5 if code == 0x85 && src == 1 => {
                        let target = match relocs.get(&pc) {
                            Some(&(s, addr)) => (s, (addr / INSN).wrapping_add_signed(imm as isize + 1)),
                            None => (section.index(), pc.wrapping_add_signed(imm as isize + 1)),
                        };
                        let name = at(target.0, target.1).ok_or_else(|| format!("{}: a call at {pc} to no function", f.name))?;
                        calls.insert(name);
                        // r1-r5 are clobbered by a call.
                        from_fp.retain(|r, _| *r == 0 || *r > 5);
                    }
                    // ld_imm64 of an address in code (relocated against a
                    // code section's symbol, the offset in bytes in imm):
                    // a callback (libbpf marks it so when it loads).
                    0 if code == 0x18 => {
                        if let Some(name) = relocs.get(&pc).and_then(|&(s, addr)| at(s, addr.checked_add_signed(imm as isize)? / INSN)) {
                            calls.insert(name);
                        }
                        from_fp.remove(&dst);
                    }
                    _ => {
                        if code & 7 == 0 || code & 7 == 4 {
                            from_fp.remove(&dst);
                        }
                    }
                }
            }
            out.insert(f.name.clone(), (deepest, calls));
        }
    }
    Ok(out)
}

/// The deepest chain from `f`: its bytes as the verifier adds them, and
/// the chain.
fn deepest(f: &str, graph: &HashMap<String, (u64, HashSet<String>)>, seen: &mut Vec<String>) -> (u64, Vec<String>) {
    let Some((frame, calls)) = graph.get(f) else { return (0, vec![]) };
    let own = (*frame).max(1).div_ceil(32) * 32;
    seen.push(f.to_string());
    let mut best = (0, vec![]);
    for c in calls {
        // Recursion is refused by the verifier anyway; not followed here.
        if seen.iter().any(|s| s == c) {
            continue;
        }
        let d = deepest(c, graph, seen);
        if d.0 > best.0 {
            best = d;
        }
    }
    seen.pop();
    let mut chain = vec![format!("{f} ({frame} bytes)")];
    chain.extend(best.1);
    (own + best.0, chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_programs_chain_of_calls_fits_in_512_bytes_of_stack() {
        // Copied: included bytes are not aligned as ELF headers are read
        // (the allocator's are).
        let bytes = crate::bpf::object_bytes().to_vec();
        let graph = frames_and_calls(&bytes).expect("the object parses");
        let elf = object::File::parse(&bytes[..]).expect("ELF");
        // The programs: functions in a section of their own (not .text).
        let programs: Vec<String> = elf
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter(|s| {
                s.section_index()
                    .and_then(|i| elf.section_by_index(i).ok())
                    .and_then(|sec| sec.name().ok().map(|n| n != ".text"))
                    .unwrap_or(false)
            })
            .filter_map(|s| s.name().ok().map(str::to_string))
            .collect();
        assert!(programs.iter().any(|p| p == "switch_btf") && programs.len() > 20, "{programs:?}");
        let mut worst = (0, vec![]);
        for p in &programs {
            let d = deepest(p, &graph, &mut vec![]);
            assert!(
                d.0 <= MAX_STACK,
                "{p}: its chain of calls holds {} bytes of stack, over the {MAX_STACK} that 6.1's verifier allows: {}",
                d.0,
                d.1.join(" > ")
            );
            if d.0 > worst.0 {
                worst = d;
            }
        }
        eprintln!("deepest chain: {} bytes: {}", worst.0, worst.1.join(" > "));
        // The switch handler calls the walkers (and their callbacks).
        let switch = deepest("switch_btf", &graph, &mut vec![]);
        eprintln!("the switch handler's: {} bytes: {}", switch.0, switch.1.join(" > "));
        assert!(switch.1.len() >= 3, "{:?}", switch.1);
    }
}
