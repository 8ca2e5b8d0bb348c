//! Naming the Python frames the BPF walker recorded: each is a code object
//! address and an instruction; the code object's qualified name, file and
//! line table are read from the live process (process_vm_readv), once per
//! code object while the process lives, and kept after it exits. Every
//! byte read comes from the target and is untrusted: lengths are capped,
//! the object's type is checked to be `code`, and text is decoded lossily.

use std::collections::HashMap;

use super::{Interpreter, LineTable};
use crate::procs::lookup::{Lookup, Reason};

/// What a code object says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Code {
    pub name: String,
    pub file: String,
    pub first_line: u32,
    table: Vec<u8>,
    lines: LineTable,
}

/// Why a code object could not be named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unnamed {
    /// The process exited before the code object was read.
    Gone,
    /// The address did not hold a code object (freed and reused, or the
    /// interpreter's layout is not what fgbpf expected).
    NotCode,
}

impl Reason for Unnamed {
    const GONE: Self = Unnamed::Gone;
}

/// Longest name, file name or line table read.
const MAX_TEXT: usize = 4096;
const MAX_TABLE: usize = 1 << 16;

/// Reads `len` bytes at `addr` of process `pid`.
pub fn read(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the local iovec covers `buf`, which lives through the call;
    // the remote one is only read by the kernel, in the other process.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(buf)
}

fn read_u64(pid: u32, addr: u64) -> Option<u64> {
    read(pid, addr, 8).map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
}

/// The code objects of one interpreter process, read as they are met.
pub struct CodeReader {
    pid: u32,
    interp: Interpreter,
    codes: Lookup<u64, Code, Unnamed>,
    /// Type objects seen, and whether each is `code`.
    types: HashMap<u64, bool>,
}

impl CodeReader {
    pub fn new(pid: u32, interp: Interpreter) -> Self {
        CodeReader {
            pid,
            interp,
            codes: Lookup::new(),
            types: HashMap::new(),
        }
    }

    pub fn interpreter(&self) -> &Interpreter {
        &self.interp
    }

    /// Reads the code object at `addr` unless it was read already.
    pub fn read(&mut self, addr: u64) {
        if self.codes.unread(&addr) {
            let code = self.read_code(addr);
            self.codes.keep(addr, code);
        }
    }

    /// The code object at `addr`, as read (the process may be gone).
    pub fn get(&self, addr: u64) -> Result<&Code, Unnamed> {
        self.codes.get(&addr)
    }

    fn read_code(&mut self, addr: u64) -> Result<Code, Unnamed> {
        let pid = self.pid;
        let l = self.interp.layout;
        let ty = read_u64(pid, addr + 8).ok_or(Unnamed::Gone)?;
        let is_code = match self.types.get(&ty) {
            Some(&k) => k,
            None => {
                // PyTypeObject: tp_name after the variable-size header.
                let k = read_u64(pid, ty + 24)
                    .and_then(|name| read(pid, name, 5))
                    .is_some_and(|n| n == b"code\0");
                self.types.insert(ty, k);
                k
            }
        };
        if !is_code {
            return Err(Unnamed::NotCode);
        }
        let field = |off: u16| read_u64(pid, addr + off as u64).ok_or(Unnamed::Gone);
        let name_obj = field(l.co_qualname.unwrap_or(l.co_name))?;
        let name = self.string(name_obj).ok_or(Unnamed::NotCode)?;
        let file = self.string(field(l.co_filename)?).ok_or(Unnamed::NotCode)?;
        let first = read(pid, addr + l.co_firstlineno as u64, 4).ok_or(Unnamed::Gone)?;
        let first_line = i32::from_ne_bytes(first.try_into().expect("4 bytes")).max(0) as u32;
        let table = self.bytes(field(l.co_linetable)?).unwrap_or_default();
        Ok(Code {
            name,
            file,
            first_line,
            table,
            lines: l.lines,
        })
    }

    /// A `str` object's text: compact strings only (all names are).
    fn string(&self, obj: u64) -> Option<String> {
        let l = self.interp.layout;
        let head = read(self.pid, obj + 16, 24)?;
        let len = u64::from_ne_bytes(head[..8].try_into().ok()?) as usize;
        let state = u32::from_ne_bytes(head[16..20].try_into().ok()?);
        let (kind, compact, ascii) = ((state >> 2) & 7, state >> 5 & 1 == 1, state >> 6 & 1 == 1);
        if !compact || len > MAX_TEXT || !matches!(kind, 1 | 2 | 4) {
            return None;
        }
        let at = obj + if ascii { l.ascii_data } else { l.compact_data } as u64;
        let raw = read(self.pid, at, len * kind as usize)?;
        Some(match kind {
            1 => raw.iter().map(|&b| b as char).collect(),
            2 => char::decode_utf16(
                raw.chunks_exact(2).map(|c| u16::from_ne_bytes([c[0], c[1]])),
            )
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
            _ => raw
                .chunks_exact(4)
                .map(|c| char::from_u32(u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('\u{fffd}'))
                .collect(),
        })
    }

    /// A `bytes` object's contents.
    fn bytes(&self, obj: u64) -> Option<Vec<u8>> {
        let len = read_u64(self.pid, obj + 16)? as usize;
        if len > MAX_TABLE {
            return None;
        }
        read(self.pid, obj + 32, len)
    }
}

impl Code {
    /// The line of instruction `instr` as the walker recorded it (f_lasti
    /// before 3.11, code units after); the first line when the table does
    /// not say.
    pub fn line(&self, instr: u64) -> u32 {
        let found = match self.lines {
            LineTable::Lnotab => lnotab_line(&self.table, self.first_line, instr),
            LineTable::Linetable310 => linetable310_line(&self.table, self.first_line, instr * 2),
            LineTable::Locations => location_line(&self.table, self.first_line, instr),
        };
        found.unwrap_or(self.first_line)
    }
}

/// 3.8-3.9: pairs (bytecode increment, signed line increment).
fn lnotab_line(t: &[u8], first: u32, offset: u64) -> Option<u32> {
    let mut line = first as i64;
    let mut addr = 0u64;
    for pair in t.chunks_exact(2) {
        addr += pair[0] as u64;
        if addr > offset {
            break;
        }
        line += pair[1] as i8 as i64;
    }
    u32::try_from(line).ok()
}

/// 3.10: pairs (bytecode length, signed line delta; -128: no line).
fn linetable310_line(t: &[u8], first: u32, offset: u64) -> Option<u32> {
    let mut line = first as i64;
    let mut start = 0u64;
    for pair in t.chunks_exact(2) {
        let end = start + pair[0] as u64;
        let delta = pair[1] as i8;
        let here = if delta == -128 {
            None
        } else {
            line += delta as i64;
            Some(line)
        };
        if start <= offset && offset < end {
            return here.and_then(|l| u32::try_from(l).ok());
        }
        start = end;
    }
    None
}

/// 3.11+: the location table of PEP 657, entries of 1-8 code units.
fn location_line(t: &[u8], first: u32, unit: u64) -> Option<u32> {
    let mut i = 0;
    let mut line = first as i64;
    let mut addr = 0u64;
    let mut next = |i: &mut usize| -> Option<u8> {
        let b = *t.get(*i)?;
        *i += 1;
        Some(b)
    };
    let varint = |i: &mut usize, next: &mut dyn FnMut(&mut usize) -> Option<u8>| -> Option<u64> {
        let mut b = next(i)?;
        let mut v = (b & 63) as u64;
        let mut shift = 6;
        while b & 64 != 0 && shift < 64 {
            b = next(i)?;
            v |= ((b & 63) as u64) << shift;
            shift += 6;
        }
        Some(v)
    };
    while i < t.len() {
        let b = next(&mut i)?;
        if b & 0x80 == 0 {
            return None;
        }
        let code = (b >> 3) & 15;
        let len = (b & 7) as u64 + 1;
        let here = match code {
            15 => None,
            14 | 13 => {
                let v = varint(&mut i, &mut next)?;
                line += if v & 1 == 1 { -((v >> 1) as i64) } else { (v >> 1) as i64 };
                if code == 14 {
                    for _ in 0..3 {
                        varint(&mut i, &mut next)?;
                    }
                }
                Some(line)
            }
            10..=12 => {
                line += code as i64 - 10;
                i += 2;
                Some(line)
            }
            _ => {
                i += 1;
                Some(line)
            }
        };
        if addr <= unit && unit < addr + len {
            return here.and_then(|l| u32::try_from(l).ok());
        }
        addr += len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lnotab_steps_lines_by_byte_offset() {
        // offsets 0-5 line 10, 6-13 line 12, 14+ line 11
        let t = [6, 2, 8, 0xff];
        assert_eq!(lnotab_line(&t, 10, 0), Some(10));
        assert_eq!(lnotab_line(&t, 10, 6), Some(12));
        assert_eq!(lnotab_line(&t, 10, 20), Some(11));
    }

    #[test]
    fn linetable_310_has_ranges_and_no_line_entries() {
        let t = [4, 1, 4, 0x80, 6, 2];
        assert_eq!(linetable310_line(&t, 5, 2), Some(6));
        assert_eq!(linetable310_line(&t, 5, 5), None);
        assert_eq!(linetable310_line(&t, 5, 9), Some(8));
    }

    #[test]
    fn location_table_forms() {
        // short form (code 0) 2 units; one-line form +1 (code 11) 1 unit;
        // no-column form (code 13) -2 over 3 units; long form (14) +5.
        let t = [
            0x80 | 1, 0,
            0x80 | (11 << 3), 1, 2,
            0x80 | (13 << 3) | 2, 5,
            0x80 | (14 << 3), 10, 0, 1, 1,
            0x80 | (15 << 3),
        ];
        assert_eq!(location_line(&t, 20, 0), Some(20));
        assert_eq!(location_line(&t, 20, 2), Some(21));
        assert_eq!(location_line(&t, 20, 4), Some(19));
        assert_eq!(location_line(&t, 20, 6), Some(24));
        assert_eq!(location_line(&t, 20, 7), None);
    }
}
