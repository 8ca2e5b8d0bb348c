//! The tagged frame words the BPF walker (src/runtimes/java/java.bpf.h) writes in
//! place of a Java frame's pc, decoded: layout in src/runtimes/java/java.h
//! (FG_RT_TAG, enum fg_java_kind). Pure functions, no process access.

use super::Layout;

pub const RT_TAG: u64 = 2 << 62;
pub const RT_SHIFT: u32 = 60;
pub const KIND_SHIFT: u32 = 58;
pub const RT_HOTSPOT: u64 = 0;
pub const SEG_BITS: u32 = 22;
pub const OFF_BITS: u32 = 17;
/// A pc offset at or beyond this was saturated by the walker.
pub const OFF_MAX: u32 = (1 << OFF_BITS) - 1;
pub const ID_BITS: u32 = 19;
pub const ID_MASK: u32 = (1 << ID_BITS) - 1;
pub const BCI_NONE: u32 = 0x3fff;
const METHOD_BITS: u32 = 44;

/// What a HotSpot word is (enum fg_java_kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Compiled,
    Interpreted,
    Stub,
}

/// A HotSpot frame word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    /// An nmethod (Compiled) or another code blob (Stub): the segment index
    /// of its heap block from code_lo, the pc's offset from the CodeBlob
    /// (OFF_MAX: at or beyond), and the compile id's low 19 bits (0 for a
    /// stub).
    Blob { kind: Kind, seg: u32, off: u32, id: u32 },
    /// An interpreted frame: its Method* and bci (`None`: unknown or native).
    Interpreted { method: u64, bci: Option<u32> },
}

/// Whether `word` is a tagged runtime word at all (not a native pc).
pub fn is_tagged(word: u64) -> bool {
    word >> 62 == 2
}

/// Decodes a HotSpot word; `None` for anything else (another runtime, a
/// native pc, a kind the walker does not write).
pub fn decode(word: u64) -> Option<Word> {
    if !is_tagged(word) || (word >> RT_SHIFT) & 3 != RT_HOTSPOT {
        return None;
    }
    let payload = word & ((1 << KIND_SHIFT) - 1);
    let kind = match (word >> KIND_SHIFT) & 3 {
        0 => Kind::Compiled,
        1 => Kind::Interpreted,
        2 => Kind::Stub,
        _ => return None,
    };
    if kind == Kind::Interpreted {
        let bci = ((payload >> METHOD_BITS) & BCI_NONE as u64) as u32;
        return Some(Word::Interpreted {
            method: (payload & ((1 << METHOD_BITS) - 1)) << 3,
            bci: (bci != BCI_NONE).then_some(bci),
        });
    }
    Some(Word::Blob {
        kind,
        seg: (payload & ((1 << SEG_BITS) - 1)) as u32,
        off: ((payload >> SEG_BITS) & OFF_MAX as u64) as u32,
        id: ((payload >> (SEG_BITS + OFF_BITS)) & ID_MASK as u64) as u32,
    })
}

/// The CodeBlob address a segment index names: code_lo + (seg << log2_seg)
/// + sizeof(HeapBlock), as the walker computed it.
pub fn blob_at(layout: &Layout, seg: u32) -> u64 {
    layout
        .code_lo
        .wrapping_add((seg as u64) << (layout.log2_seg & 31))
        .wrapping_add(layout.heap_block_size as u64)
}

/// The CodeBlob a COMPILED or STUB word refers to; `None` for others.
pub fn word_blob(layout: &Layout, word: u64) -> Option<u64> {
    match decode(word)? {
        Word::Blob { seg, .. } => Some(blob_at(layout, seg)),
        Word::Interpreted { .. } => None,
    }
}

/// Builds a COMPILED or STUB word as the walker does (for tests, and for
/// callers that walk the code cache themselves).
pub fn blob_word(layout: &Layout, kind: Kind, blob: u64, pc: u64, compile_id: u32) -> u64 {
    let block = blob.wrapping_sub(layout.heap_block_size as u64);
    let seg = (block.wrapping_sub(layout.code_lo) >> (layout.log2_seg & 31)) & ((1 << SEG_BITS) - 1);
    let off = pc.wrapping_sub(blob).min(OFF_MAX as u64);
    let (k, id) = match kind {
        Kind::Compiled => (0u64, (compile_id & ID_MASK) as u64),
        Kind::Stub => (2, 0),
        Kind::Interpreted => (1, 0),
    };
    RT_TAG | (RT_HOTSPOT << RT_SHIFT) | (k << KIND_SHIFT) | seg | (off << SEG_BITS) | (id << (SEG_BITS + OFF_BITS))
}

/// Builds an INTERPRETED word as the walker does.
pub fn interpreted_word(method: u64, bci: Option<u32>) -> u64 {
    let bci = bci.filter(|&b| b < BCI_NONE).unwrap_or(BCI_NONE) as u64;
    RT_TAG
        | (RT_HOTSPOT << RT_SHIFT)
        | (1 << KIND_SHIFT)
        | (bci << METHOD_BITS)
        | ((method >> 3) & ((1 << METHOD_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            code_lo: 0x7f00_0000_0000,
            log2_seg: 7,
            heap_block_size: 16,
            ..Layout::default()
        }
    }

    #[test]
    fn compiled_words_round_trip() {
        let l = layout();
        let blob = l.code_lo + (1234 << 7) + 16;
        let w = blob_word(&l, Kind::Compiled, blob, blob + 0x1a5, 0x8_1234);
        assert!(is_tagged(w));
        assert_eq!(
            decode(w),
            Some(Word::Blob {
                kind: Kind::Compiled,
                seg: 1234,
                off: 0x1a5,
                id: 0x1234
            }),
            "the compile id keeps its low 19 bits"
        );
        assert_eq!(word_blob(&l, w), Some(blob));
        // A pc past the offset's range saturates.
        let far = blob_word(&l, Kind::Stub, blob, blob + (1 << 20), 77);
        assert_eq!(
            decode(far),
            Some(Word::Blob {
                kind: Kind::Stub,
                seg: 1234,
                off: OFF_MAX,
                id: 0
            })
        );
    }

    #[test]
    fn the_walkers_bit_layout() {
        // Built by hand from fgbpf.h: tag, runtime 0, kind COMPILED, seg 5,
        // off 9, id 3.
        let w = (2u64 << 62) | 5 | (9 << 22) | (3 << 39);
        assert_eq!(
            decode(w),
            Some(Word::Blob {
                kind: Kind::Compiled,
                seg: 5,
                off: 9,
                id: 3
            })
        );
        let i = (2u64 << 62) | (1 << 58) | (17 << 44) | (0x7f12_3456_7898 >> 3);
        assert_eq!(
            decode(i),
            Some(Word::Interpreted {
                method: 0x7f12_3456_7898,
                bci: Some(17)
            })
        );
        assert_eq!(interpreted_word(0x7f12_3456_7898, Some(17)), i);
        let none = interpreted_word(0x1000, None);
        assert_eq!(
            decode(none),
            Some(Word::Interpreted {
                method: 0x1000,
                bci: None
            })
        );
    }

    #[test]
    fn other_words_are_not_hotspot() {
        assert_eq!(decode(0x7fff_1234_5678), None, "a native pc");
        assert_eq!(decode(0xffff_ffff_8100_0000), None, "a kernel address");
        assert_eq!(decode((2 << 62) | (1 << 60)), None, "another runtime");
        assert_eq!(decode((2 << 62) | (3 << 58)), None, "no such kind");
        assert_eq!(word_blob(&layout(), interpreted_word(0x1000, None)), None);
    }
}
