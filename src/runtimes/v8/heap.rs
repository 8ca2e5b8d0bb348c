//! Reads V8 heap objects of a live process: strings (sequential, cons,
//! sliced, thin), a SharedFunctionInfo's name (from its ScopeInfo once the
//! function is compiled) and where it starts, and a Script's name and
//! source. Everything read is untrusted: every object's type is checked
//! from its map before its fields are used, lengths and depths are capped,
//! bytes are decoded lossily, and a layout that does not check out leaves
//! the function unnamed rather than misnamed.

use super::layout::{Layout, ScopeLayout};
use crate::procs::mem::Mem;

/// Characters of a function's or script's name read at most.
pub const MAX_NAME: usize = 512;
/// Bytes of a script's source read to find lines, at most.
pub const MAX_SOURCE: usize = 16 << 20;
/// Cons strings followed at most, depth first.
const MAX_PARTS: usize = 64;
/// Context locals a ScopeInfo lists inline; above, a hash table (V8 10
/// and 11: kScopeInfoMaxInlinedLocalNamesSize).
const MAX_INLINED_LOCALS: u64 = 75;
/// ScopeInfo scope types (V8 10 to 12) whose ScopeInfo holds a position.
const FUNCTION_SCOPE: u32 = 2;
/// V8 13's module scope, whose ScopeInfo counts its module variables
/// before its locals.
const MODULE_SCOPE_13: u32 = 5;

pub struct Heap<'a> {
    pub mem: &'a Mem,
    pub l: &'a Layout,
}

/// A Smi's value (V8 without pointer compression: the upper 32 bits).
pub fn smi(v: u64) -> Option<i32> {
    (v & 0xffff_ffff == 0).then_some((v >> 32) as i32)
}

/// What a ScopeInfo says of its function.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scope {
    pub name: Option<String>,
    pub inferred: Option<String>,
    /// The function's first character in its script's source.
    pub start: Option<u32>,
}

impl Heap<'_> {
    pub fn u64(&self, obj: u64, off: u16) -> Option<u64> {
        self.mem.u64(obj.checked_sub(1)? + off as u64)
    }

    /// A heap object's instance type; `None` for a Smi or an unreadable
    /// object.
    pub fn type_of(&self, obj: u64) -> Option<u16> {
        if obj & 3 != 1 {
            return None;
        }
        let map = self.u64(obj, self.l.map)?;
        if map & 3 != 1 {
            return None;
        }
        self.mem.u16(map - 1 + self.l.instance_type as u64)
    }

    pub fn is_string(&self, obj: u64) -> bool {
        self.type_of(obj).is_some_and(|t| t < self.l.first_nonstring)
    }

    /// A string's text, at most `max` characters (`None`: not a string,
    /// unreadable, or a representation fgbpf does not read: external
    /// strings live outside the heap).
    pub fn string(&self, obj: u64, max: usize) -> Option<String> {
        let mut out = String::new();
        let mut parts = vec![(obj, 0usize, usize::MAX)];
        let mut seen = 0;
        while let Some((s, skip, take)) = parts.pop() {
            seen += 1;
            if seen > MAX_PARTS || out.len() >= max {
                break;
            }
            let t = self.type_of(s).filter(|&t| t < self.l.first_nonstring)?;
            let len = self.mem.i32(s - 1 + self.l.str_len as u64)?;
            let len = usize::try_from(len).ok()?;
            let (skip, take) = (skip.min(len), take.min(len - skip.min(len)));
            let rep = t & self.l.rep_mask;
            if rep == 0 {
                let want = take.min(max.saturating_sub(out.chars().count()));
                let at = s - 1 + self.l.seq_chars as u64;
                if t & self.l.enc_mask == self.l.one_byte {
                    let b = self.mem.bytes(at + skip as u64, want)?;
                    out.extend(b.iter().map(|&c| c as char));
                } else {
                    let b = self.mem.bytes(at + 2 * skip as u64, 2 * want)?;
                    let units: Vec<u16> = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
                    out.push_str(&String::from_utf16_lossy(&units));
                }
            } else if rep == self.l.cons {
                let first = self.u64(s, self.l.cons_first)?;
                let second = self.u64(s, self.l.cons_second)?;
                let first_len = self.mem.i32(first.checked_sub(1)? + self.l.str_len as u64)?;
                let first_len = usize::try_from(first_len).ok()?;
                // Second pushed first: the stack pops the first half first.
                if skip + take > first_len {
                    let s2 = skip.saturating_sub(first_len);
                    parts.push((second, s2, skip + take - first_len - s2));
                }
                if skip < first_len {
                    parts.push((first, skip, take.min(first_len - skip)));
                }
            } else if rep == self.l.thin {
                parts.push((self.u64(s, self.l.thin_actual)?, skip, take));
            } else if rep == self.l.sliced {
                let parent = self.u64(s, self.l.sliced_parent)?;
                let offset = usize::try_from(smi(self.u64(s, self.l.sliced_offset)?)?).ok()?;
                parts.push((parent, offset + skip, take));
            } else {
                return None;
            }
        }
        Some(out)
    }

    /// Reads a ScopeInfo laid out as V8 10 to 12 lay it out (Smi-tagged
    /// flags, then parameter and context-local counts, the locals' names
    /// and infos, then optional parts the flags announce) or as V8 13 does
    /// (32-bit flags, the counts, the function's position, then the rest).
    /// `None` when it does not check out: another V8's layout.
    pub fn scope(&self, si: u64) -> Option<Scope> {
        // Slots past the map; `i` is bounded by the locals read (< 2^16 each).
        let slot = |i: u64| self.mem.u64(si.checked_sub(1)?.checked_add(8 + 8 * i)?);
        let first = self.l.scope;
        let flags = match first {
            ScopeLayout::LocalsFirst => smi(slot(0)?)? as u32,
            // A 32-bit field, then 4 bytes of padding.
            ScopeLayout::PositionFirst => u32::try_from(slot(0)?).ok()?,
            ScopeLayout::Unknown => return None,
        };
        smi(slot(1)?)?;
        let locals = u64::try_from(smi(slot(2)?)?).ok().filter(|&n| n < 1 << 16)?;
        let scope_type = flags & 0xf;
        let saved_class_variable = (flags >> 10) & 1;
        let function_variable = (flags >> 12) & 3;
        let has_inferred = (flags >> 14) & 1 == 1;
        // Inline names, or one slot for their hash table.
        let names = if locals < MAX_INLINED_LOCALS { locals } else { 1 };
        let mut scope = Scope::default();
        let mut i = 3;
        if first == ScopeLayout::PositionFirst {
            scope.start = Self::position(smi(slot(3)?)?, smi(slot(4)?)?)?;
            i = 5 + (scope_type == MODULE_SCOPE_13) as u64;
        }
        i += names + locals + saved_class_variable as u64;
        let text = |v: u64| -> Option<Option<String>> {
            if smi(v) == Some(0) {
                return Some(None);
            }
            if !self.is_string(v) {
                return None;
            }
            Some(Some(self.string(v, MAX_NAME)?))
        };
        if function_variable != 0 {
            scope.name = text(slot(i)?)?;
            smi(slot(i + 1)?)?;
            i += 2;
        }
        if has_inferred {
            let v = slot(i)?;
            // A string, or undefined (an oddball: not a string).
            scope.inferred = if self.is_string(v) { Some(self.string(v, MAX_NAME)?) } else { None };
            i += 1;
        }
        if first == ScopeLayout::LocalsFirst && scope_type == FUNCTION_SCOPE {
            scope.start = Self::position(smi(slot(i)?)?, smi(slot(i + 1)?)?)?;
        }
        Some(scope)
    }

    /// A function's start from its (start, end): `None` inside when it has
    /// none (a negative start); `None` outside when they do not check out.
    fn position(start: i32, end: i32) -> Option<Option<u32>> {
        match u32::try_from(start) {
            Ok(s) if s as i64 > end as i64 => None,
            Ok(s) => Some(Some(s)),
            Err(_) => Some(None),
        }
    }
}

/// Byte offsets of each line's first character in a source (line 1 at 0).
pub fn line_starts(source: &str) -> Vec<u32> {
    let mut starts = vec![0];
    for (i, c) in source.chars().enumerate() {
        if c == '\n' {
            starts.push(i as u32 + 1);
        }
    }
    starts
}

/// The 1-based line holding character `pos`.
pub fn line_of(starts: &[u32], pos: u32) -> u32 {
    starts.partition_point(|&s| s <= pos) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_from_one_at_each_newline() {
        let s = line_starts("a\nbc\n\nd");
        assert_eq!(s, vec![0, 2, 5, 6]);
        assert_eq!(line_of(&s, 0), 1);
        assert_eq!(line_of(&s, 1), 1);
        assert_eq!(line_of(&s, 2), 2);
        assert_eq!(line_of(&s, 5), 3);
        assert_eq!(line_of(&s, 6), 4);
    }

    #[test]
    fn smis_are_the_upper_half() {
        assert_eq!(smi(5u64 << 32), Some(5));
        assert_eq!(smi((-1i64 as u64) << 32), Some(-1));
        assert_eq!(smi(0x1000_0001), None);
    }
}
