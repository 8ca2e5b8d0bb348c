//! A Lua function's name, as LuaJIT's own tracebacks find it
//! (lj_debug_slotname): not in the function, but in its caller's
//! bytecode, from the instruction that last wrote the slot its call
//! instruction calls: a global's (GGET), a field's or method's (TGETS),
//! an upvalue's (UGET: a `local function` of an enclosing chunk), through
//! moves (MOV). Read once per prototype, for each of its calls.

use std::collections::HashMap;

use super::{gcstr, reference, Layout};
use crate::procs::mem::Mem;

/// Each opcode's A operand mode (lj_bc.h's BCDEF, v2.1-20230119): 1 a
/// destination, 2 a base. 97 opcodes.
const A_MODES: [u8; 97] = [
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 5, 5, 5, 5, 4,
    1, 1, 1, 1, 3, 1, 1, 1, 1, 3, 3, 3, 2, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
];
const BC_MOV: u8 = 18;
const BC_KNIL: u8 = 44;
const BC_UGET: u8 = 45;
const BC_GGET: u8 = 54;
const BC_TGETS: u8 = 57;
/// CALLM, CALL, CALLMT, CALLT.
const CALLS: [u8; 4] = [65, 66, 67, 68];
/// The most calls named in one prototype, and instructions looked back.
const MAX_CALLS: usize = 4096;
const MAX_BACK: usize = 4096;

fn op(i: u32) -> u8 {
    (i & 0xff) as u8
}
fn a(i: u32) -> u32 {
    (i >> 8) & 0xff
}
fn c(i: u32) -> u32 {
    (i >> 16) & 0xff
}
fn d(i: u32) -> u32 {
    i >> 16
}

/// The names of the functions the calls of prototype `pt` (its bytecode
/// `bc`) call, by the call's instruction.
pub fn callees(mem: &Mem, l: &Layout, pt: u64, bc: &[u32]) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    let k = reference(mem, l, pt + u64::from(l.pt_k)).unwrap_or(0);
    for (at, &ins) in bc.iter().enumerate().filter(|(_, &i)| CALLS.contains(&op(i))).take(MAX_CALLS) {
        if let Some(name) = slot_name(mem, l, pt, k, bc, at, a(ins)) {
            out.insert(at as u32, name);
        }
    }
    out
}

/// A string constant of the prototype: its kgc[~idx].
fn kstr(mem: &Mem, l: &Layout, k: u64, idx: u32) -> Option<String> {
    let at = k.checked_sub(l.refsize() * (u64::from(idx) + 1))?;
    gcstr(mem, l, reference(mem, l, at)?)
}

/// The idx-th upvalue's name (uvinfo: names one after another, each
/// ending in a zero byte).
fn uv_name(mem: &Mem, l: &Layout, pt: u64, idx: u32) -> Option<String> {
    let sizeuv = u32::from(mem.u8(pt + u64::from(l.pt_sizeuv))?);
    let mut p = reference(mem, l, pt + u64::from(l.pt_uvinfo))?;
    if p == 0 || idx >= sizeuv {
        return None;
    }
    for _ in 0..idx {
        let s = mem.cstr(p, 256)?;
        p += s.len() as u64 + 1;
    }
    mem.cstr(p, 256)
}

fn slot_name(mem: &Mem, l: &Layout, pt: u64, k: u64, bc: &[u32], call: usize, mut slot: u32) -> Option<String> {
    let mut ip = call;
    let mut steps = 0;
    while ip > 1 && steps < MAX_BACK {
        ip -= 1;
        steps += 1;
        let ins = bc[ip];
        let o = op(ins);
        let mode = *A_MODES.get(o as usize)?;
        if mode == 2 {
            if slot >= a(ins) && (o != BC_KNIL || slot <= d(ins)) {
                return None;
            }
        } else if mode == 1 && a(ins) == slot {
            match o {
                BC_MOV => slot = d(ins),
                BC_GGET => return kstr(mem, l, k, d(ins)),
                BC_TGETS => return kstr(mem, l, k, c(ins)),
                BC_UGET => return uv_name(mem, l, pt, d(ins)),
                _ => return None,
            }
        }
    }
    None
}
