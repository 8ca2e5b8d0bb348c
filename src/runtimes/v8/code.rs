//! V8's compiled code, read for a pc the walker saw: the InstructionStream
//! holding it (found by scanning back from the pc to the stream's map
//! word, then checked both ways against its Code), and, for optimised
//! code, which functions were inlined where: the Code's source position
//! table maps code offsets to source positions, each with an inlining id,
//! and its deoptimization data lists the inlined functions and where each
//! was inlined (V8 11 to 13: the arrays moved to trusted space in 12,
//! the function into a wrapper in 13, the layout says which). Everything read is untrusted: sizes are
//! capped, every object's type is checked, and code that does not check
//! out is named without inlining.

use super::heap::{smi, Heap};
use super::layout::NOT_KNOWN;

/// Bytes scanned back from a pc for the start of its InstructionStream.
const MAX_SCAN: u64 = 1 << 20;
/// Bytes of a source position table read at most.
const MAX_TABLE: usize = 1 << 20;
/// Inlined functions read at most per code object.
const MAX_INLINED: u64 = 4096;

/// InstructionStream: the Code it belongs to (its instructions start at
/// the layout's `stream_header`).
const IS_CODE: u64 = 8;

/// Compiled code read from a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitCode {
    /// The Code and its InstructionStream: which code this is.
    pub key: (u64, u64),
    /// Its instructions: [start, start + size).
    pub start: u64,
    pub size: u64,
    /// Optimised code's own function (from its deoptimization data).
    pub function: Option<u64>,
    /// (code offset, inlining id, -1: none) by code offset.
    pub positions: Vec<(u32, i32)>,
    /// By inlining id: the function inlined and the inlining id of the
    /// place it was inlined at (-1: the code's own function).
    pub inlined: Vec<(u64, i32)>,
}

impl JitCode {
    /// The functions inlined at `pc`, outermost first (empty: the code's
    /// own function only). `leaf`: the pc is where the thread was, not a
    /// return address (whose call is the instruction before it).
    pub fn inlined_at(&self, pc: u64, leaf: bool) -> Vec<u64> {
        let Some(off) = pc.checked_sub(self.start + u64::from(!leaf)) else {
            return Vec::new();
        };
        let i = self.positions.partition_point(|&(o, _)| o as u64 <= off);
        let Some(&(_, mut id)) = i.checked_sub(1).and_then(|i| self.positions.get(i)) else {
            return Vec::new();
        };
        let mut chain = Vec::new();
        while id >= 0 && chain.len() < self.inlined.len() {
            let Some(&(f, parent)) = self.inlined.get(id as usize) else { break };
            chain.push(f);
            id = parent;
        }
        chain.reverse();
        chain
    }
}

/// The InstructionStream map of this process, learned from the first
/// stream found.
pub type StreamMap = Option<u64>;

impl Heap<'_> {
    /// The compiled code holding `pc`.
    pub fn code_at(&self, pc: u64, stream_map: &mut StreamMap) -> Option<JitCode> {
        if !self.l.reads_code() {
            return None;
        }
        let mut end = pc & !7;
        let floor = pc.saturating_sub(MAX_SCAN);
        while end > floor {
            let from = end.saturating_sub(4096).max(floor) & !7;
            let chunk = self.mem.bytes(from, (end - from) as usize)?;
            for (i, w) in chunk.chunks_exact(8).enumerate().rev() {
                let w = u64::from_le_bytes(w.try_into().unwrap());
                let at = from + 8 * i as u64;
                let is_map = match *stream_map {
                    Some(m) => w == m,
                    None => w & 3 == 1 && self.mem.u16(w - 1 + self.l.instance_type as u64) == Some(self.l.type_istream),
                };
                if is_map {
                    if let Some(code) = self.stream(at + 1, pc) {
                        *stream_map = Some(w);
                        return Some(code);
                    }
                }
            }
            end = from;
        }
        None
    }

    /// The code of the InstructionStream at `stream` when it holds `pc`.
    fn stream(&self, stream: u64, pc: u64) -> Option<JitCode> {
        let l = self.l;
        if self.type_of(stream)? != l.type_istream {
            return None;
        }
        let code = self.u64(stream, IS_CODE as u16)?;
        if self.type_of(code)? != l.type_code {
            return None;
        }
        // The Code's stream, its instructions' start and their size.
        let back = self.u64(code, l.code_stream)?;
        let start = self.u64(code, l.code_start)?;
        let size = self.mem.i32(code - 1 + l.code_size as u64)?;
        let size = u64::try_from(size).ok()?;
        if back != stream || start != stream - 1 + l.stream_header as u64 || pc < start || pc >= start + size {
            return None;
        }
        let mut jit = JitCode {
            key: (code, stream),
            start,
            size,
            function: None,
            positions: Vec::new(),
            inlined: Vec::new(),
        };
        self.inlining(code, &mut jit);
        Some(jit)
    }

    /// Reads where optimised code inlined which functions; leaves `jit`
    /// without inlining when the code has none or does not check out.
    fn inlining(&self, code: u64, jit: &mut JitCode) {
        let l = self.l;
        if !l.reads_inlining() {
            return;
        }
        let is = |obj: u64, types: &[u16]| self.type_of(obj).is_some_and(|t| t != NOT_KNOWN && types.contains(&t));
        let Some(dd) = self.u64(code, l.code_deopt).filter(|&d| is(d, &l.dd_types)) else {
            return;
        };
        let elem = |arr: u64, i: u16| self.u64(arr, 16u16.checked_add(i.checked_mul(8)?)?);
        let len = |arr: u64| self.u64(arr, 8).and_then(smi).and_then(|n| u64::try_from(n).ok());
        let Some(n) = len(dd) else { return };
        if n <= u64::from(l.dd_literals.max(l.dd_function).max(l.dd_inlining)) {
            return;
        }
        // The code's own function, or (V8 13) its wrapper's.
        let function = elem(dd, l.dd_function).and_then(|f| match self.type_of(f)? {
            t if t == l.type_sfi => Some(f),
            t if t == l.type_sfi_wrapper && t != NOT_KNOWN => self.u64(f, l.sfi_wrapper_shared),
            _ => None,
        });
        let Some(function) = function.filter(|&f| self.type_of(f) == Some(l.type_sfi)) else {
            return;
        };
        let (Some(literals), Some(inlining), Some(table)) =
            (elem(dd, l.dd_literals), elem(dd, l.dd_inlining), self.u64(code, l.code_positions))
        else {
            return;
        };
        if !is(literals, &l.literal_types) || !is(inlining, &l.bytes_types) || !is(table, &l.bytes_types) {
            return;
        }
        let (Some(n_literals), Some(n_bytes)) = (len(literals), len(inlining)) else { return };
        let mut inlined = Vec::new();
        for i in 0..(n_bytes / 16).min(MAX_INLINED) {
            let at = inlining - 1 + 16 + 16 * i;
            let (Some(position), Some(id)) = (self.mem.u64(at), self.mem.i32(at + 8)) else { return };
            let Some(id) = u64::try_from(id).ok().filter(|&id| id < n_literals) else { return };
            // A weak reference has its second bit set.
            let Some(f) = u16::try_from(id).ok().and_then(|id| elem(literals, id)).map(|f| if f & 3 == 3 { f & !2 } else { f }) else {
                return;
            };
            if self.type_of(f) != Some(l.type_sfi) {
                return;
            }
            inlined.push((f, inlining_id(position)));
        }
        let Some(bytes) = len(table).filter(|&n| n as usize <= MAX_TABLE).and_then(|n| self.mem.bytes(table - 1 + 16, n as usize)) else {
            return;
        };
        let Some(positions) = decode_positions(&bytes) else { return };
        jit.function = Some(function);
        jit.positions = positions;
        jit.inlined = inlined;
    }
}

/// A source position's inlining id (V8's SourcePosition: bits 31-46, the
/// id + 1; 0: not inlined).
fn inlining_id(position: u64) -> i32 {
    ((position >> 31) & 0xffff) as i32 - 1
}

/// One of the table's signed numbers: zigzag, 7 bits a byte, low first.
fn vlq(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        raw |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// A source position table: pairs of deltas, the code offset's (its sign
/// says whether the entry is a statement) and the source position's.
fn decode_positions(bytes: &[u8]) -> Option<Vec<(u32, i32)>> {
    let (mut at, mut offset, mut position) = (0, 0i64, 0i64);
    let mut out = Vec::new();
    while at < bytes.len() {
        let d = vlq(bytes, &mut at)?;
        offset += if d >= 0 { d } else { -d - 1 };
        position = position.wrapping_add(vlq(bytes, &mut at)?);
        out.push((u32::try_from(offset).ok()?, inlining_id(position as u64)));
    }
    out.windows(2).all(|w| w[0].0 <= w[1].0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_table_read_from_node_20() {
        // inner()'s optimised code, from a live node 20 (nothing inlined).
        let bytes = hex("03b0054f9c012d9c0139e30115485148112f1b4479a30117e401ad01b7025d54");
        let p = decode_positions(&bytes).unwrap();
        assert_eq!(p.len(), 12);
        assert_eq!((p[0], p[11]), ((1, -1), (364, -1)));
        assert!(p.iter().all(|&(_, id)| id == -1), "{p:?}");
    }

    #[test]
    fn inlined_functions_are_found_by_offset_outermost_first() {
        let jit = JitCode {
            key: (1, 2),
            start: 0x1000,
            size: 0x100,
            function: Some(0xf0),
            positions: vec![(0, -1), (0x10, 0), (0x20, 1), (0x30, -1)],
            inlined: vec![(0xa1, -1), (0xb1, 0)],
        };
        assert_eq!(jit.inlined_at(0x1008, true), Vec::<u64>::new());
        assert_eq!(jit.inlined_at(0x1010, true), vec![0xa1]);
        // A return address at the first instruction of a region belongs
        // to the call before it.
        assert_eq!(jit.inlined_at(0x1010, false), Vec::<u64>::new());
        assert_eq!(jit.inlined_at(0x1025, false), vec![0xa1, 0xb1]);
        assert_eq!(jit.inlined_at(0x1031, true), Vec::<u64>::new());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }
}
