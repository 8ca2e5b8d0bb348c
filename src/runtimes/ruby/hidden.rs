//! Where a libruby that keeps `rb_vm_exec` out of its dynamic symbols
//! (3.3 on, stripped as distributions ship it) has it: the profile puts a
//! run of Ruby frames in place of the rb_vm_exec frame that ran it
//! (src/profile/build.rs), so that frame must be told by its address.
//! `rb_iseq_eval` and `rb_iseq_eval_main`, both exported, end with `return
//! rb_vm_exec(ec)`, compiled as a tail jump: rb_vm_exec is the one target
//! of a `jmp rel32` that both have, and that the unwind tables say is a
//! function's start. Its end is the next function's start. Anything else
//! (no such pair, more than one common target) finds nothing, and the
//! Ruby frames go at the root of the native stack instead.

use object::{Object, ObjectSymbol, ObjectSymbolTable};

use super::read_at;

/// Most bytes of each function looked through.
const MAX_CODE: u64 = 4096;

/// rb_vm_exec's link-time range [start, end), when hidden and found.
/// `starts`: where the unwind tables say functions start, sorted (read
/// only when rb_vm_exec is hidden).
pub(super) fn vm_exec(obj: &object::File<'_>, data: &[u8], starts: impl FnOnce() -> Vec<u64>) -> Option<(u64, u64)> {
    let table = obj.dynamic_symbol_table()?;
    let exported = |name: &str| table.symbols().find(|s| s.name() == Ok(name) && s.address() != 0);
    if exported("rb_vm_exec").is_some() {
        return None;
    }
    let targets = |name: &str| -> Option<Vec<u64>> {
        let f = exported(name)?;
        let code = read_at(obj, data, f.address(), f.size().clamp(1, MAX_CODE) as usize)?;
        Some(jump_targets(code, f.address()))
    };
    let (a, b) = (targets("rb_iseq_eval")?, targets("rb_iseq_eval_main")?);
    let starts = starts();
    let mut common: Vec<u64> = a.into_iter().filter(|t| b.contains(t) && starts.binary_search(t).is_ok()).collect();
    common.dedup();
    let [start] = common[..] else { return None };
    let end = starts.get(starts.partition_point(|&s| s <= start)).copied()?;
    Some((start, end))
}

/// The targets of every `jmp rel32` (0xe9) byte sequence in `code` at
/// `addr` (some are not instructions: the caller keeps only targets that
/// two functions share and that start a function).
fn jump_targets(code: &[u8], addr: u64) -> Vec<u64> {
    let mut out: Vec<u64> = (0..code.len().saturating_sub(4))
        .filter(|&i| code[i] == 0xe9)
        .map(|i| {
            let rel = i32::from_le_bytes(code[i + 1..i + 5].try_into().expect("4 bytes"));
            (addr + i as u64 + 5).wrapping_add(rel as i64 as u64)
        })
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian 13's libruby-3.3.so.3.3.8: rb_iseq_eval_main's
    /// `jmp 27dfa0` at 0x27ead6.
    #[test]
    fn a_tail_jump_is_found() {
        let code = [0x48, 0x83, 0xc4, 0x08, 0xe9, 0xc5, 0xf4, 0xff, 0xff, 0x90];
        assert!(jump_targets(&code, 0x27ead2).contains(&0x27dfa0));
    }
}
