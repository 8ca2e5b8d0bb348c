//! The BEAM JIT's own code map (OTP 24+): every module the JIT compiles
//! is registered through the GDB JIT interface (`__jit_debug_descriptor`,
//! a list of entries each pointing at a "symbol file"), in OTP's own form
//! rather than ELF: the module's base address and name, then each code
//! range (`module:function/arity`, prologues, the module header) with the
//! lines its code came from. Read from outside the process: every entry
//! bounded, every length checked, a file that is not read whole and
//! exactly refused.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::procs::mem::Mem;

/// Entries read from one process's list at most (modules loaded; a large
/// release loads a few thousand).
const MAX_ENTRIES: usize = 65536;
/// Bytes of one module's symbol file at most.
const MAX_SYMFILE: u64 = 16 << 20;

/// One code range of a module: where, what, and the lines its code came
/// from (offset from the module's base → line, file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub lines: Vec<(u64, u32, Arc<str>)>,
}

/// What one symbol file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The emulator's own: its frame layout (0: return addresses only, 1:
    /// frame pointers too) and where processes return to when they end.
    Emulator { frame_pointers: bool, normal_exit: u64 },
    /// A module's code ranges (absolute addresses).
    Module { name: String, ranges: Vec<Range> },
}

/// Reads a little-endian integer of `N` bytes at `at`.
fn le<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// A NUL-terminated name of `len` bytes (terminator included) at `at`.
fn name(b: &[u8], at: usize, len: usize) -> Option<String> {
    let bytes = b.get(at..at.checked_add(len)?)?;
    let (last, text) = bytes.split_last()?;
    (*last == 0).then(|| String::from_utf8_lossy(text).into_owned())
}

/// Parses one symbol file; `None` when it is not in the form OTP 24 to 28
/// write (read exactly to its end).
pub fn parse(b: &[u8]) -> Option<Entry> {
    let header = u32::from_le_bytes(le(b, 0)?);
    match header {
        // struct debug_info { header; union { emulator_info { int; ptr };
        // erlang_module_info } }: 32 bytes
        0 => {
            let layout = i32::from_le_bytes(le(b, 8)?);
            let normal_exit = u64::from_le_bytes(le(b, 16)?);
            ((24..=32).contains(&b.len()) && (0..=1).contains(&layout)).then_some(Entry::Emulator { frame_pointers: layout == 1, normal_exit })
        }
        1 => {
            // erlang_module_info { u64 base; u32 ranges; u32 code_size;
            // u16 name_length; char name[] } after the 8-byte header;
            // sizeof(debug_info) is 32.
            let base = u64::from_le_bytes(le(b, 8)?);
            let count = u32::from_le_bytes(le(b, 16)?) as usize;
            let code_size = u32::from_le_bytes(le(b, 20)?) as u64;
            let name_len = u16::from_le_bytes(le(b, 24)?) as usize;
            let module = name(b, 26, name_len)?;
            let mut at = 32 + name_len;
            let mut files: HashMap<String, Arc<str>> = HashMap::new();
            let mut ranges = Vec::with_capacity(count.min(65536));
            for _ in 0..count {
                // range_info { u32 start; u32 end; u32 line_count; u16
                // name_length; char name[] }, 16 bytes before the name's.
                let start = u32::from_le_bytes(le(b, at)?) as u64;
                let end = u32::from_le_bytes(le(b, at + 4)?) as u64;
                let line_count = u32::from_le_bytes(le(b, at + 8)?) as usize;
                let len = u16::from_le_bytes(le(b, at + 12)?) as usize;
                let range = name(b, at + 14, len)?;
                at += 16 + len;
                if start > end || end > code_size {
                    return None;
                }
                let mut lines = Vec::with_capacity(line_count.min(65536));
                for _ in 0..line_count {
                    // line_info { u32 start; u32 line; u16 file_length;
                    // char file[] }, 12 bytes before the file's.
                    let off = u32::from_le_bytes(le(b, at)?) as u64;
                    let line = u32::from_le_bytes(le(b, at + 4)?);
                    let flen = u16::from_le_bytes(le(b, at + 8)?) as usize;
                    let file = name(b, at + 10, flen)?;
                    at += 12 + flen;
                    let file = files.entry(file).or_insert_with_key(|f| Arc::from(f.as_str())).clone();
                    lines.push((base + off, line, file));
                }
                ranges.push(Range { start: base + start, end: base + end, name: range, lines });
            }
            (at == b.len()).then_some(Entry::Module { name: module, ranges })
        }
        _ => None,
    }
}

/// One process's code map, read again at each drain for what the JIT
/// registered since.
#[derive(Default)]
pub struct CodeMap {
    /// Symbol files read, by (entry, symbol file) address: not read again.
    read: HashMap<(u64, u64), ()>,
    /// Code ranges by start.
    ranges: BTreeMap<u64, Range>,
    pub modules: usize,
    /// The emulator's entry, once read.
    pub emulator: Option<(bool, u64)>,
}

impl CodeMap {
    /// Reads the entries of the list at `descriptor` not read yet. Err
    /// when a symbol file is not in the form fgbpf reads.
    pub fn update(&mut self, mem: &Mem, descriptor: u64) -> Result<(), String> {
        // struct jit_descriptor { u32 version; u32 action; entry *relevant;
        // entry *first; }
        match mem.u32(descriptor) {
            Some(1) => {}
            // The node is gone (or its memory cannot be read now): nothing
            // new, and what was read still names its stacks.
            None => return Ok(()),
            Some(v) => return Err(format!("its JIT code list (__jit_debug_descriptor) is version {v}, not 1")),
        }
        let mut entry = mem.u64(descriptor + 16).unwrap_or(0);
        let mut seen = 0;
        while entry != 0 && seen < MAX_ENTRIES {
            seen += 1;
            // struct jit_code_entry { next; prev; symfile_addr; symfile_size }
            let Some(e) = mem.bytes(entry, 32) else { break };
            let next = u64::from_le_bytes(le(&e, 0).expect("32 bytes"));
            let file = u64::from_le_bytes(le(&e, 16).expect("32 bytes"));
            let size = u64::from_le_bytes(le(&e, 24).expect("32 bytes"));
            if self.read.contains_key(&(entry, file)) {
                // The list is pushed at its head: what follows was read.
                break;
            }
            if size > MAX_SYMFILE {
                return Err(format!("a JIT code entry of {size} bytes"));
            }
            // An entry freed under the read (a module unloaded) fails the
            // read or the parse: taken as the end of what is new.
            let Some(bytes) = mem.bytes(file, size as usize) else { break };
            match parse(&bytes) {
                Some(Entry::Emulator { frame_pointers, normal_exit }) => self.emulator = Some((frame_pointers, normal_exit)),
                Some(Entry::Module { ranges, .. }) => {
                    self.modules += 1;
                    for r in ranges {
                        self.ranges.insert(r.start, r);
                    }
                }
                None => return Err("its JIT code map is not in the form fgbpf reads (OTP 24 to 28's)".into()),
            }
            self.read.insert((entry, file), ());
            entry = next;
        }
        Ok(())
    }

    /// The span of the code read: (lowest start, highest end).
    pub fn span(&self) -> Option<(u64, u64)> {
        let lo = self.ranges.values().next()?.start;
        let hi = self.ranges.values().map(|r| r.end).max()?;
        Some((lo, hi))
    }

    /// The range holding `addr`.
    pub fn find(&self, addr: u64) -> Option<&Range> {
        self.ranges.range(..=addr).next_back().map(|(_, r)| r).filter(|r| addr < r.end)
    }

    /// Whether `addr` is in a range of code the map names.
    pub fn holds(&self, addr: u64) -> bool {
        self.find(addr).is_some()
    }

    /// Every range as (start, end, name) pieces, one per line of code
    /// when lines are wanted: "module:function/arity (file:line)", the
    /// file by its name (as the other runtimes' frames are). A function's
    /// prologue (`-CodeInfoPrologue`, where it is entered, a call in tail
    /// position to itself included) is the function, at its first line.
    pub fn pieces(&self, lines: bool) -> Vec<(u64, u64, String)> {
        let base = |f: &str| f.rsplit('/').next().unwrap_or(f).to_string();
        let mut out = Vec::new();
        for r in self.ranges.values() {
            if let Some(function) = r.name.strip_suffix("-CodeInfoPrologue") {
                let body = self.ranges.get(&r.end).filter(|b| b.name == function);
                let name = match body.and_then(|b| b.lines.first()).filter(|_| lines) {
                    Some((_, line, file)) => format!("{function} ({}:{line})", base(file)),
                    None => function.to_string(),
                };
                out.push((r.start, r.end, name));
                continue;
            }
            if !lines || r.lines.is_empty() {
                out.push((r.start, r.end, r.name.clone()));
                continue;
            }
            // Code before the first line's is the function's own entry.
            let first = r.lines[0].0.clamp(r.start, r.end);
            if first > r.start {
                out.push((r.start, first, format!("{} ({}:{})", r.name, base(&r.lines[0].2), r.lines[0].1)));
            }
            for (i, (at, line, file)) in r.lines.iter().enumerate() {
                let end = r.lines.get(i + 1).map_or(r.end, |l| l.0).clamp(r.start, r.end);
                let at = (*at).clamp(r.start, r.end);
                if at < end {
                    out.push((at, end, format!("{} ({}:{line})", r.name, base(file))));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (start, end, name, lines: (start, line, file)).
    type TestRange<'a> = (u32, u32, &'a str, &'a [(u32, u32, &'a str)]);

    fn module(base: u64, name: &str, ranges: &[TestRange]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(1u32.to_le_bytes());
        b.extend([0; 4]);
        b.extend(base.to_le_bytes());
        b.extend((ranges.len() as u32).to_le_bytes());
        b.extend(0x1000u32.to_le_bytes());
        b.extend((name.len() as u16 + 1).to_le_bytes());
        b.extend(name.as_bytes());
        b.extend([0; 7]); // NUL, then sizeof(debug_info) is 32 (26 + 6)
        for (s, e, n, lines) in ranges {
            b.extend(s.to_le_bytes());
            b.extend(e.to_le_bytes());
            b.extend((lines.len() as u32).to_le_bytes());
            b.extend((n.len() as u16 + 1).to_le_bytes());
            b.extend(n.as_bytes());
            b.extend([0; 3]); // NUL, then the struct's 2 bytes of padding
            for (at, line, file) in *lines {
                b.extend(at.to_le_bytes());
                b.extend(line.to_le_bytes());
                b.extend((file.len() as u16 + 1).to_le_bytes());
                b.extend(file.as_bytes());
                b.extend([0; 3]);
            }
        }
        b
    }

    #[test]
    fn a_module_is_read_exactly_with_its_lines() {
        let b = module(
            0x7000,
            "busy",
            &[
                (0, 0x20, "busy::codeHeader", &[]),
                (0x20, 0x30, "busy:spin/2-CodeInfoPrologue", &[]),
                (0x30, 0x80, "busy:spin/2", &[(0x40, 7, "busy.erl"), (0x60, 8, "/src/busy.erl")]),
            ],
        );
        let Some(Entry::Module { name, ranges }) = parse(&b) else { panic!("not parsed") };
        assert_eq!(name, "busy");
        assert_eq!(ranges[2].start, 0x7030);
        assert_eq!(ranges[2].lines.len(), 2);
        let mut map = CodeMap::default();
        for r in ranges {
            map.ranges.insert(r.start, r);
        }
        assert_eq!(map.find(0x7065).unwrap().name, "busy:spin/2");
        assert!(map.find(0x7080).is_none());
        let pieces = map.pieces(true);
        assert!(pieces.contains(&(0x7060, 0x7080, "busy:spin/2 (busy.erl:8)".into())), "{pieces:?}");
        assert!(pieces.contains(&(0x7030, 0x7040, "busy:spin/2 (busy.erl:7)".into())), "{pieces:?}");
        assert!(pieces.contains(&(0x7020, 0x7030, "busy:spin/2 (busy.erl:7)".into())), "{pieces:?}");
        // One byte short or long, or a range past the code: refused.
        assert!(parse(&b[..b.len() - 1]).is_none());
        let mut long = b.clone();
        long.push(0);
        assert!(parse(&long).is_none());
        assert!(parse(&module(0, "m", &[(0, 0x2000, "m:f/0", &[])])).is_none());
    }

    #[test]
    fn the_emulator_entry_gives_the_frame_layout() {
        let mut b = vec![0u8; 32];
        b[8] = 1;
        b[16..24].copy_from_slice(&0x1234u64.to_le_bytes());
        assert_eq!(parse(&b), Some(Entry::Emulator { frame_pointers: true, normal_exit: 0x1234 }));
        b[8] = 2;
        assert_eq!(parse(&b), None);
    }
}
