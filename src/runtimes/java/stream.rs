//! HotSpot's compressed debug data, decoded from bytes already copied out
//! of the JVM: the UNSIGNED5 integers of `CompressedReadStream`
//! (debugInfo / scopes data, line number tables), an nmethod's `PcDesc`
//! table, and `ScopeDesc` chains (the inlining tree at one pc). Pure and
//! bounded: every read checks its buffer, a chain is cut at [`MAX_DEPTH`].

/// Inlined scopes followed at most from one pc.
pub const MAX_DEPTH: usize = 64;

/// The UNSIGNED5 coding of Pack200 that HotSpot uses for debug data: bytes
/// below L code a value alone; bytes from L on are "high" bytes giving 6
/// bits each, up to 5 bytes. JDK 20 on (unsigned5.hpp) never writes a zero
/// byte (X = 1: every byte is its value + 1); before, X = 0 and L = 192.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coding {
    x: u32,
}

impl Coding {
    pub const fn for_major(major: u32) -> Coding {
        Coding {
            x: if major >= 20 { 1 } else { 0 },
        }
    }
}

/// A read cursor over a copied buffer.
pub struct Reader<'a> {
    buf: &'a [u8],
    pub pos: usize,
    coding: Coding,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], pos: usize, coding: Coding) -> Reader<'a> {
        Reader { buf, pos, coding }
    }

    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// One UNSIGNED5 value; `None` past the buffer or on an excluded byte.
    pub fn uint(&mut self) -> Option<u32> {
        const LG_H: u32 = 6;
        let x = self.coding.x;
        let l = 256 - x - 64;
        let b0 = self.byte()? as u32;
        let mut sum = b0.checked_sub(x)?;
        if sum < l {
            return Some(sum);
        }
        let mut shift = LG_H;
        for i in 1..5 {
            let b = (self.byte()? as u32).checked_sub(x)?;
            sum = sum.wrapping_add(b.wrapping_shl(shift));
            if b < l || i == 4 {
                return Some(sum);
            }
            shift += LG_H;
        }
        None
    }

    /// A signed value: the sign moved to the low bit (Pack200's encode_sign).
    pub fn signed(&mut self) -> Option<i32> {
        let v = self.uint()?;
        Some(((v >> 1) ^ (v & 1).wrapping_neg()) as i32)
    }
}

/// The line of `bci` from a method's compressed line number table (the
/// bytes after its bytecodes): pairs of (bci, line) deltas, one byte
/// `bci_delta << 3 | line_delta` or 0xff and two signed values, ended by a
/// 0 byte. The line of the last entry at or below bci, as
/// Method::line_number_from_bci does.
pub fn line_for_bci(table: &[u8], bci: u32, coding: Coding) -> Option<u32> {
    let mut r = Reader::new(table, 0, coding);
    let (mut at, mut line) = (0i64, 0i64);
    let mut best: Option<(i64, i64)> = None;
    // At most one entry per table byte.
    for _ in 0..table.len() {
        let next = r.byte()?;
        if next == 0 {
            break;
        }
        if next == 0xff {
            at += r.signed()? as i64;
            line += r.signed()? as i64;
        } else {
            at += (next >> 3) as i64;
            line += (next & 7) as i64;
        }
        if at == bci as i64 {
            return u32::try_from(line).ok();
        }
        if at < bci as i64 && best.is_none_or(|(b, _)| at >= b) {
            best = Some((at, line));
        }
    }
    best.and_then(|(_, l)| u32::try_from(l).ok())
}

/// One `PcDesc`: a pc offset from the nmethod's code_begin and where its
/// scope is in the scopes data (0: none recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcDesc {
    pub pc: i32,
    pub scope: u32,
}

/// PcDescs from the table's bytes: `size` bytes each, the pc offset and
/// the scope's decode offset at the given offsets. The sentinels (pc -1
/// and i32::MAX) are left out.
pub fn pc_descs(bytes: &[u8], size: usize, pc_at: usize, scope_at: usize) -> Vec<PcDesc> {
    if size < 8 || pc_at + 4 > size || scope_at + 4 > size {
        return Vec::new();
    }
    let i32_at = |c: &[u8], o: usize| i32::from_le_bytes(c[o..o + 4].try_into().expect("4 bytes"));
    bytes
        .chunks_exact(size)
        .map(|c| PcDesc {
            pc: i32_at(c, pc_at),
            scope: i32_at(c, scope_at) as u32,
        })
        .filter(|p| p.pc >= 0 && p.pc != i32::MAX)
        .collect()
}

/// The PcDesc of a pc offset (from code_begin): the one at it (a return
/// address: the call's PcDesc), else the nearest one after it (a pc in the
/// middle of code: the next safepoint's, as HotSpot's and OTel's leaf
/// lookups do). `descs` sorted by pc, as HotSpot writes them.
pub fn pc_desc_for(descs: &[PcDesc], pc: i32) -> Option<PcDesc> {
    let i = descs.partition_point(|d| d.pc < pc);
    descs.get(i).copied()
}

/// One scope of a chain: the method's index in the nmethod's metadata (0:
/// none) and its bci (-1: InvocationEntryBci, the method's entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    pub method_index: u32,
    pub bci: i32,
}

/// The scope chain from `offset` in the scopes data, innermost (the pc's
/// own method) first: each ScopeDesc begins with its sender's offset, its
/// method's metadata index and bci + 1 (ScopeDesc::decode_body). Offset 0
/// (serialized_null) ends the chain; a cycle or more than MAX_DEPTH
/// scopes cuts it.
pub fn scope_chain(data: &[u8], mut offset: u32, coding: Coding) -> Vec<Scope> {
    let mut out = Vec::new();
    while offset != 0 && out.len() < MAX_DEPTH {
        let mut r = Reader::new(data, offset as usize, coding);
        let (Some(sender), Some(method_index), Some(bci)) = (r.uint(), r.uint(), r.uint()) else {
            break;
        };
        out.push(Scope {
            method_index,
            bci: (bci as i32).wrapping_sub(1),
        });
        offset = sender;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: Coding = Coding::for_major(17);
    const NEW: Coding = Coding::for_major(21);

    fn uints(bytes: &[u8], coding: Coding) -> Vec<u32> {
        let mut r = Reader::new(bytes, 0, coding);
        std::iter::from_fn(|| r.uint()).collect()
    }

    #[test]
    fn unsigned5_as_jdk17_writes_it() {
        // Below 192: one byte. 192 = 192 + 0*64 then a low byte 0 -> 192.
        assert_eq!(uints(&[0, 5, 191], OLD), [0, 5, 191]);
        assert_eq!(uints(&[192, 0], OLD), [192]);
        // 1000 = 192 + 808: first byte 192 + (808 % 64 = 40) = 232,
        // then 808 / 64 = 12.
        assert_eq!(uints(&[232, 12], OLD), [1000]);
        // Five bytes: the fifth is taken whatever it is.
        assert_eq!(uints(&[255, 255, 255, 255, 255], OLD).len(), 1);
        assert_eq!(uints(&[232], OLD), [] as [u32; 0], "cut short");
    }

    #[test]
    fn unsigned5_as_jdk20_on_writes_it() {
        // Every byte is one more; 0 never appears.
        assert_eq!(uints(&[1, 6, 191], NEW), [0, 5, 190]);
        // 1000 = 191 + 809: 1 + 191 + (809 % 64 = 41) = 233, then 1 + 12.
        assert_eq!(uints(&[233, 13], NEW), [1000]);
        assert_eq!(uints(&[0], NEW), [] as [u32; 0], "an excluded byte");
    }

    #[test]
    fn signed_values_keep_the_sign_in_the_low_bit() {
        let mut r = Reader::new(&[0, 1, 2, 3], 0, OLD);
        assert_eq!(
            [r.signed(), r.signed(), r.signed(), r.signed()],
            [Some(0), Some(-1), Some(1), Some(-2)]
        );
    }

    #[test]
    fn line_numbers_from_the_compressed_table() {
        // (bci 0, line 3), (bci 4, line 4), then a long pair: bci +100,
        // line -2 (signed: 3) -> (104, 2); end.
        // Signed 100 is 200 = 192 + 8 then a low byte 0 in the old
        // coding; -2 is 3.
        let table = [3, (4 << 3) | 1, 0xff, 200, 0, 3, 0];
        assert_eq!(line_for_bci(&table, 0, OLD), Some(3));
        assert_eq!(line_for_bci(&table, 3, OLD), Some(3));
        assert_eq!(line_for_bci(&table, 4, OLD), Some(4));
        assert_eq!(line_for_bci(&table, 103, OLD), Some(4));
        assert_eq!(line_for_bci(&table, 104, OLD), Some(2));
        assert_eq!(line_for_bci(&[], 1, OLD), None);
        assert_eq!(line_for_bci(&[0xff, 0xff], 1, OLD), None, "garbage");
    }

    #[test]
    fn pc_descs_and_the_lookup_of_a_pc() {
        let mut bytes = Vec::new();
        for (pc, scope) in [(-1i32, 0i32), (10, 5), (20, 9), (i32::MAX, 0)] {
            bytes.extend_from_slice(&pc.to_le_bytes());
            bytes.extend_from_slice(&scope.to_le_bytes());
            bytes.extend_from_slice(&[0; 8]);
        }
        let d = pc_descs(&bytes, 16, 0, 4);
        assert_eq!(d, [PcDesc { pc: 10, scope: 5 }, PcDesc { pc: 20, scope: 9 }]);
        assert_eq!(pc_desc_for(&d, 10).map(|p| p.scope), Some(5), "a return address");
        assert_eq!(pc_desc_for(&d, 11).map(|p| p.scope), Some(9), "the next one");
        assert_eq!(pc_desc_for(&d, 0).map(|p| p.scope), Some(5));
        assert_eq!(pc_desc_for(&d, 21), None);
    }

    #[test]
    fn scope_chains_end_at_null_and_are_capped() {
        // Offset 0 is serialized_null, so real scopes start at 1.
        // Scope at 1: sender 4, method 2, bci 7 (+1); at 4: sender 0,
        // method 1, bci -1 (+1 = 0).
        let data = [0, 4, 2, 8, 0, 1, 0];
        assert_eq!(
            scope_chain(&data, 1, OLD),
            [
                Scope {
                    method_index: 2,
                    bci: 7
                },
                Scope {
                    method_index: 1,
                    bci: -1
                }
            ]
        );
        // A scope that is its own sender.
        let cycle = [0, 1, 1, 1];
        assert_eq!(scope_chain(&cycle, 1, OLD).len(), MAX_DEPTH);
        assert_eq!(scope_chain(&data, 40, OLD), []);
    }
}
