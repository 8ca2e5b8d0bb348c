//! Naming the Ruby frames the BPF walker recorded: each is an iseq (a
//! method's, block's or script's instruction sequence) and a pc, or a C
//! method's entry. What names an iseq (its label, its file, its line
//! table) is read from the live process once, when the walker announces
//! it, and kept after the process exits: a half-second script is named
//! too. Every byte comes from the target and is untrusted: the object's
//! type is checked in its flags, lengths are capped, text is decoded
//! lossily, and a line table that does not check out leaves the frame at
//! its method's first line.

mod class;

use std::collections::HashMap;

use super::Layout;
use crate::procs::lookup::{Lookup, Reason};
use crate::procs::mem::Mem;

/// Ruby's object types (RBasic flags & T_MASK) and imemo kinds.
const T_MASK: u64 = 0x1f;
const T_STRING: u64 = 0x05;
const T_ARRAY: u64 = 0x07;
const T_HASH: u64 = 0x08;
const T_IMEMO: u64 = 0x1a;
const FL_USHIFT: u64 = 12;
const IMEMO_MENT: u64 = 6;
const IMEMO_ISEQ: u64 = 7;
/// rb_iseq_constant_body's type of a top-level iseq.
const ISEQ_TYPE_TOP: u32 = 0;
/// RString: a heap string's flag; an embedded one's length bits before
/// 3.2 (then a len field, `Layout::str_len`).
const RSTRING_NOEMBED: u64 = 1 << 13;
const RSTRING_EMBED_LEN_SHIFT: u64 = 14;
const RSTRING_EMBED_LEN_MASK: u64 = 0x1f;
/// RArray: an embedded array's flag and where its length bits start
/// (`Layout::array_embed_len_bits` of them).
const RARRAY_EMBED: u64 = 1 << 13;
const RARRAY_EMBED_LEN_SHIFT: u64 = 15;

/// Longest label or path read; most instructions a line table is read for.
const MAX_TEXT: usize = 4096;
const MAX_INSNS: u64 = 1 << 20;
const MAX_INFO: u64 = 1 << 16;

/// The succinct index of an iseq's line table (iseq.c): 54 positions'
/// ranks packed 7 bits each in 6 words, then blocks of 512 bits, each a
/// rank (u32, padded), 7 small-block ranks of 9 bits, and 8 words.
const IMMEDIATE: u64 = 54;
const BLOCK_BITS: u64 = 512;
const BLOCK_BYTES: u64 = 80;

/// What an iseq says of itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Iseq {
    pub label: String,
    /// The method's name in the label (`run` in `block in run`).
    pub base_label: String,
    /// The iseq of the method a block is in (its own for a method's).
    pub local: u64,
    pub file: String,
    pub first_line: u32,
    /// A top-level iseq (ISEQ_TYPE_TOP: the VM's own bottom frame, a
    /// required file's top level).
    pub top: bool,
    encoded: u64,
    size: u64,
    /// line_no of each insn_info entry, and the succinct index mapping a
    /// position to its entry (empty: one entry).
    lines: Vec<i32>,
    index: Vec<u8>,
}

impl Iseq {
    /// The line the instruction at `pc_bits` (bits 3-20 of the frame's pc,
    /// as the walker kept them) is on; the first line when unknown.
    pub fn line(&self, pc_bits: u64, bits: u32) -> u32 {
        let n = self.index(pc_bits, bits);
        if n > self.size {
            return self.first_line;
        }
        // The pc is past the instruction it runs (vm_core.h's calc_pos).
        let pos = n.saturating_sub(1);
        let entry = match self.lines.len() {
            0 => return self.first_line,
            1 => Some(0),
            _ => rank(&self.index, pos).and_then(|r| r.checked_sub(1)),
        };
        match entry.and_then(|e| self.lines.get(e as usize)) {
            Some(&l) if l > 0 => l as u32,
            _ => self.first_line,
        }
    }
}

impl Iseq {
    /// The pc's index among the iseq's instructions' VALUEs: pc and
    /// iseq_encoded are both VALUE-aligned, so their difference in VALUEs,
    /// modulo the bits kept.
    pub fn index(&self, pc_bits: u64, bits: u32) -> u64 {
        pc_bits.wrapping_sub(self.encoded >> 3) & ((1u64 << bits) - 1)
    }
}

/// The number of positions at or below `pos` in a succinct index
/// (iseq.c's succ_index_lookup).
fn rank(index: &[u8], pos: u64) -> Option<u64> {
    let word = |at: u64| -> Option<u64> {
        let at = usize::try_from(at).ok()?;
        Some(u64::from_le_bytes(index.get(at..at + 8)?.try_into().ok()?))
    };
    if pos < IMMEDIATE {
        return Some((word(pos / 9 * 8)? >> (pos % 9 * 7)) & 0x7f);
    }
    let x = pos - IMMEDIATE;
    let block = IMMEDIATE / 9 * 8 + x / BLOCK_BITS * BLOCK_BYTES;
    let bit = x % BLOCK_BITS;
    let small = bit / 64;
    let base = u64::from(u32::try_from(word(block)? & 0xffff_ffff).ok()?);
    let small_rank = if small == 0 {
        0
    } else {
        (word(block + 8)? >> ((small - 1) * 9)) & 0x1ff
    };
    let bits = word(block + 16 + small * 8)?;
    let popcount = u64::from((bits << (63 - bit % 64)).count_ones());
    Some(base + small_rank + popcount)
}

/// Why an object could not be named.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unnamed {
    /// The process exited before the object was read.
    Gone,
    /// The address did not hold what its word said (freed and reused, or
    /// a layout that is not what fgbpf expected).
    NotIseq,
    /// A C method whose name was not found: Ruby's symbol table was not
    /// found, or does not hold its id.
    CMethod,
}

impl Reason for Unnamed {
    const GONE: Self = Unnamed::Gone;
}

/// symbol.c: ids are kept in chunks of 512, two VALUEs each (the name's
/// String, its Symbol); ids above the operators' (tLAST_OP_ID, the
/// layout's `last_op_id`) carry their serial above 4 scope bits.
const ID_ENTRY_UNIT: u64 = 512;
const ID_ENTRY_SIZE: u64 = 2;
const ID_SCOPE_SHIFT: u64 = 4;

/// The iseqs and C methods of one Ruby process, read as they are met.
pub struct Reader {
    mem: Option<Mem>,
    layout: Layout,
    /// libruby's .data (address, bytes), and where Ruby's symbol table
    /// was found there when first needed; or when it was last looked for
    /// and not found (a VM still booting interns symbols as it is read).
    data: (u64, u64),
    symbols: Option<Result<u64, std::time::Instant>>,
    iseqs: Lookup<u64, Iseq, Unnamed>,
    methods: Lookup<u64, String, Unnamed>,
    /// A method's iseq's qualified name (`Worker#run`), from the method
    /// entry the walker saw its frame run.
    qualified: HashMap<u64, String>,
    /// Whether a JIT's code (YJIT's, RJIT's) was seen mapped, and when its
    /// maps were last looked at.
    jit: bool,
    jit_looked: Option<std::time::Instant>,
}

impl Reader {
    pub fn new(pid: u32, layout: Layout, data: (u64, u64)) -> Self {
        Reader {
            mem: Mem::open(pid).ok(),
            layout,
            data,
            symbols: None,
            iseqs: Lookup::new(),
            methods: Lookup::new(),
            qualified: HashMap::new(),
            jit: false,
            jit_looked: None,
        }
    }

    /// Whether the process was seen running a JIT: memory mapped
    /// executable that no file backs (YJIT's and RJIT's code; the
    /// interpreter alone maps none). A JIT-compiled method saves its pc
    /// only at some calls, so its frame's line may be another's.
    pub fn jit(&self) -> bool {
        self.jit
    }

    /// Looks at the process's maps for a JIT's code, at most once a second
    /// until seen.
    fn look_for_jit(&mut self) {
        if self.jit || self.jit_looked.is_some_and(|t| t.elapsed().as_secs() < 1) {
            return;
        }
        self.jit_looked = Some(std::time::Instant::now());
        let Some(pid) = self.mem.as_ref().map(Mem::pid) else { return };
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return };
        self.jit = maps.lines().filter_map(crate::procs::maps::parse_line).any(|m| m.exec && m.inode == 0 && !m.path.starts_with('['));
    }

    /// Reads an iseq, with `me` the method entry of a method frame that
    /// ran it (0: none), once.
    pub fn read_iseq_of(&mut self, addr: u64, me: u64) {
        self.read(addr, false);
        if me == 0 || self.qualified.contains_key(&addr) {
            return;
        }
        let Some(name) = self.iseq(addr).ok().map(|i| i.base_label.clone()) else { return };
        if let Some(q) = self.qualified(me, Some(addr), &name) {
            self.qualified.insert(addr, q);
        }
    }

    /// An iseq's label as Ruby's profiling API writes it: the method's
    /// class in it where it is known (`Worker#run`, `Worker.crunch`,
    /// `block in Worker#run`), else as the iseq has it.
    pub fn label(&self, addr: u64) -> Result<String, Unnamed> {
        let iseq = self.iseq(addr)?;
        let method = self.qualified.get(&addr).map(|q| (q, &iseq.base_label)).or_else(|| {
            let local = self.iseq(iseq.local).ok()?;
            Some((self.qualified.get(&iseq.local)?, &local.base_label))
        });
        // The label is a prefix (`block in `) and the method's name.
        match method {
            Some((q, base)) if *base == iseq.base_label && iseq.label.ends_with(base.as_str()) => {
                Ok(format!("{}{q}", &iseq.label[..iseq.label.len() - base.len()]))
            }
            _ => Ok(iseq.label.clone()),
        }
    }

    /// Reads an announced object (an iseq, or with `cfunc` a method
    /// entry), once.
    pub fn read(&mut self, addr: u64, cfunc: bool) {
        self.look_for_jit();
        if cfunc {
            if self.methods.unread(&addr) {
                let m = self.read_method(addr);
                self.methods.keep(addr, m);
            }
        } else if self.iseqs.unread(&addr) {
            let i = self.read_iseq(addr).ok_or(Unnamed::NotIseq);
            // A read that failed because the process is gone may succeed
            // for no one: keep it as gone.
            let alive = self.alive();
            self.iseqs.keep_unless_gone(addr, i, alive);
        }
    }

    pub fn iseq(&self, addr: u64) -> Result<&Iseq, Unnamed> {
        self.iseqs.get(&addr)
    }

    pub fn method(&self, addr: u64) -> Result<&str, Unnamed> {
        self.methods.get(&addr).map(String::as_str)
    }

    fn alive(&self) -> bool {
        self.mem.as_ref().is_some_and(|m| std::path::Path::new(&format!("/proc/{}", m.pid())).exists())
    }

    fn read_method(&mut self, addr: u64) -> Result<String, Unnamed> {
        let mem = self.mem.as_ref().ok_or(Unnamed::Gone)?;
        let l = &self.layout;
        let flags = mem.u64(addr).ok_or(Unnamed::Gone)?;
        if flags & T_MASK != T_IMEMO || (flags >> FL_USHIFT) & 0xf != IMEMO_MENT {
            return Err(Unnamed::NotIseq);
        }
        let def = mem.u64(addr + u64::from(l.me_def)).ok_or(Unnamed::NotIseq)?;
        let id = mem.u64(def + u64::from(l.def_original_id)).ok_or(Unnamed::NotIseq)?;
        let (ids, last) = self.symbols().ok_or(Unnamed::CMethod)?;
        let name = self.id_name(ids, last, id).ok_or(Unnamed::CMethod)?;
        Ok(self.qualified(addr, None, &name).unwrap_or(name))
    }

    /// Ruby's symbol table (its `ids` Array and last serial, read now:
    /// the serial grows as the program interns names), found where it
    /// was the first time; looked for again at most every 100 ms while
    /// not found.
    fn symbols(&mut self) -> Option<(u64, u64)> {
        let at = match self.symbols {
            Some(Ok(at)) => at,
            Some(Err(when)) if when.elapsed() < std::time::Duration::from_millis(100) => return None,
            _ => {
                let found = self.find_symbols();
                self.symbols = Some(found.ok_or_else(std::time::Instant::now));
                found?
            }
        };
        let mem = self.mem.as_ref()?;
        Some((mem.u64(at + 16)?, u64::from(mem.u32(at)?)))
    }

    /// Ruby's symbol table (symbol.c's rb_symbols_t: the last serial as a
    /// u32, the str_sym table, the `ids` Array, the dynamic symbols'
    /// Hash), found in libruby's .data by what it holds: an Array of one
    /// chunk per 512 serials, then a Hash. None unless exactly one place
    /// checks out; else where.
    fn find_symbols(&self) -> Option<u64> {
        let mem = self.mem.as_ref()?;
        let (at, len) = self.data;
        if !(32..=1 << 20).contains(&len) {
            return None;
        }
        let bytes = mem.bytes(at, len as usize)?;
        let word = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let mut found = None;
        for o in (0..bytes.len() - 31).step_by(8) {
            let last = word(o) & 0xffff_ffff;
            let (ids, hash) = (word(o + 16), word(o + 24));
            if last == 0 || last > 1 << 24 || ids == 0 || ids & 7 != 0 || hash == 0 || hash & 7 != 0 {
                continue;
            }
            let is = |obj: u64, t: u64| mem.u64(obj).is_some_and(|f| f & T_MASK == t);
            if !is(ids, T_ARRAY) || !is(hash, T_HASH) {
                continue;
            }
            if self.array(ids).map(|(n, _)| n) != Some(last / ID_ENTRY_UNIT + 1) {
                continue;
            }
            if found.is_some() {
                return None;
            }
            found = Some(at + o as u64);
        }
        found
    }

    /// The name of a method id: its String in the symbol table.
    fn id_name(&self, ids: u64, last: u64, id: u64) -> Option<String> {
        let mem = self.mem.as_ref()?;
        let serial = if id > self.layout.last_op_id { id >> ID_SCOPE_SHIFT } else { id };
        if serial == 0 || serial > last {
            return None;
        }
        let (chunks, items) = self.array(ids)?;
        let chunk_at = serial / ID_ENTRY_UNIT;
        if chunk_at >= chunks {
            return None;
        }
        let chunk = mem.u64(items + chunk_at * 8)?;
        let (n, entries) = self.array(chunk)?;
        let pos = serial % ID_ENTRY_UNIT * ID_ENTRY_SIZE;
        if pos >= n {
            return None;
        }
        self.string(mem.u64(entries + pos * 8)?)
    }

    /// An Array's length and where its elements are; None when `obj` is
    /// not an Array.
    fn array(&self, obj: u64) -> Option<(u64, u64)> {
        let mem = self.mem.as_ref()?;
        let flags = mem.u64(obj)?;
        if flags & T_MASK != T_ARRAY {
            return None;
        }
        if flags & RARRAY_EMBED != 0 {
            let mask = (1u64 << self.layout.array_embed_len_bits) - 1;
            Some(((flags >> RARRAY_EMBED_LEN_SHIFT) & mask, obj + 16))
        } else {
            Some((mem.u64(obj + 16)?, mem.u64(obj + 32)?))
        }
    }

    fn read_iseq(&self, addr: u64) -> Option<Iseq> {
        let mem = self.mem.as_ref()?;
        let l = &self.layout;
        let flags = mem.u64(addr)?;
        if flags & T_MASK != T_IMEMO || (flags >> FL_USHIFT) & 0xf != IMEMO_ISEQ {
            return None;
        }
        let body = mem.u64(addr + u64::from(l.iseq_body))?;
        let top = mem.u32(body)? == ISEQ_TYPE_TOP;
        let size = u64::from(mem.u32(body + u64::from(l.body_size))?);
        let encoded = mem.u64(body + u64::from(l.body_encoded))?;
        let loc = body + u64::from(l.body_location);
        let pathobj = mem.u64(loc)?;
        let base_label = mem.u64(loc + 8).and_then(|b| self.string(b)).unwrap_or_default();
        let label = self.string(mem.u64(loc + 16)?)?;
        let local = mem.u64(body + u64::from(l.body_local_iseq)).unwrap_or(0);
        // An int from 3.2; before, a Fixnum: (n << 1) | 1.
        let first_line = if l.first_lineno_int {
            u32::try_from(mem.i32(loc + 24)?).unwrap_or(0)
        } else {
            let first = mem.u64(loc + 24)?;
            if first & 1 == 1 { u32::try_from(first >> 1).unwrap_or(0) } else { 0 }
        };
        let path = self.path(pathobj).unwrap_or_default();
        let file = path.rsplit('/').next().unwrap_or(&path).to_string();
        let (lines, index) = self.line_table(body, size).unwrap_or_default();
        Some(Iseq {
            label,
            base_label,
            local,
            file,
            first_line,
            top,
            encoded,
            size,
            lines,
            index,
        })
    }

    /// The insn_info entries' lines and the succinct index over them.
    fn line_table(&self, body: u64, size: u64) -> Option<(Vec<i32>, Vec<u8>)> {
        let mem = self.mem.as_ref()?;
        let l = &self.layout;
        if size == 0 || size > MAX_INSNS {
            return None;
        }
        let info = body + u64::from(l.body_insns_info);
        let entries = mem.u64(info)?;
        let count = u64::from(mem.u32(info + 16)?);
        let table = mem.u64(info + 24)?;
        if count == 0 || count > MAX_INFO.min(size + 1) {
            return None;
        }
        let stride = u64::from(l.insn_info_size);
        let raw = mem.bytes(entries, usize::try_from(count * stride).ok()?)?;
        let lines = raw
            .chunks_exact(stride as usize)
            .map(|e| i32::from_le_bytes(e[..4].try_into().expect("4 bytes")))
            .collect();
        if count == 1 {
            return Some((lines, Vec::new()));
        }
        // The index covers positions up to the last entry's, at most the
        // iseq's size: read for that size, else its immediate part only.
        let full = if size < IMMEDIATE {
            size.div_ceil(9) * 8
        } else {
            IMMEDIATE / 9 * 8 + (size - IMMEDIATE).div_ceil(BLOCK_BITS) * BLOCK_BYTES
        };
        let index = mem
            .bytes(table, full as usize)
            .or_else(|| mem.bytes(table, (full.min(IMMEDIATE / 9 * 8)) as usize))?;
        Some((lines, index))
    }

    /// A path object: a String, or an Array whose first element is one.
    fn path(&self, obj: u64) -> Option<String> {
        let mem = self.mem.as_ref()?;
        let flags = mem.u64(obj)?;
        match flags & T_MASK {
            T_STRING => self.string(obj),
            T_ARRAY => {
                let (len, items) = self.array(obj)?;
                if len == 0 {
                    return None;
                }
                self.string(mem.u64(items)?)
            }
            _ => None,
        }
    }

    /// A String's text, lossily; None when `obj` is not a String.
    fn string(&self, obj: u64) -> Option<String> {
        let mem = self.mem.as_ref()?;
        let flags = mem.u64(obj)?;
        if flags & T_MASK != T_STRING {
            return None;
        }
        let l = &self.layout;
        let (embed, ptr) = (obj + u64::from(l.str_embed), obj + u64::from(l.str_ptr));
        let (len, at) = match (flags & RSTRING_NOEMBED != 0, l.str_len) {
            // Before 3.2: a heap string's len where an embedded one's
            // bytes are; an embedded one's in its flags.
            (true, 0) => (mem.u64(embed)?, mem.u64(ptr)?),
            (false, 0) => ((flags >> RSTRING_EMBED_LEN_SHIFT) & RSTRING_EMBED_LEN_MASK, embed),
            (true, at) => (mem.u64(obj + u64::from(at))?, mem.u64(ptr)?),
            (false, at) => (mem.u64(obj + u64::from(at))?, embed),
        };
        let len = usize::try_from(len).ok()?.min(MAX_TEXT);
        let bytes = mem.bytes(at, len)?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A succinct index of positions, built as iseq.c's
    /// succ_index_table_create builds one.
    fn index_of(positions: &[u64], max: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let ranks = |x: u64| positions.iter().filter(|&&p| p <= x).count() as u64;
        for w in 0..IMMEDIATE / 9 {
            let mut word = 0u64;
            for i in 0..9 {
                word |= ranks(w * 9 + i) << (i * 7);
            }
            out.extend_from_slice(&word.to_le_bytes());
        }
        let blocks = (max.saturating_sub(IMMEDIATE)).div_ceil(BLOCK_BITS);
        for b in 0..blocks {
            let start = IMMEDIATE + b * BLOCK_BITS;
            let base = ranks(start - 1);
            let mut small_ranks = 0u64;
            let mut bits = [0u64; 8];
            for (k, word) in bits.iter_mut().enumerate() {
                for j in 0..64 {
                    if positions.contains(&(start + k as u64 * 64 + j)) {
                        *word |= 1 << j;
                    }
                }
            }
            for k in 1..8u64 {
                let r = ranks(start + k * 64 - 1) - base;
                small_ranks |= r << ((k - 1) * 9);
            }
            out.extend_from_slice(&(base as u32).to_le_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&small_ranks.to_le_bytes());
            for w in bits {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        out
    }

    #[test]
    fn ranks_read_the_succinct_index_as_ruby_builds_it() {
        let positions = [0, 3, 7, 40, 53, 54, 60, 200, 599, 700, 1100];
        let index = index_of(&positions, 1200);
        for x in 0..1200 {
            let want = positions.iter().filter(|&&p| p <= x).count() as u64;
            assert_eq!(rank(&index, x), Some(want), "position {x}");
        }
    }

    #[test]
    fn blocks_take_the_class_of_the_method_they_are_in() {
        let iseq = |label: &str, base: &str, local: u64| Iseq {
            label: label.into(),
            base_label: base.into(),
            local,
            file: "klass.rb".into(),
            first_line: 1,
            top: false,
            encoded: 0,
            size: 0,
            lines: Vec::new(),
            index: Vec::new(),
        };
        let mut r = Reader::new(0, super::super::LAYOUT_31, (0, 0));
        r.iseqs.keep(0x10, Ok(iseq("run", "run", 0x10)));
        r.iseqs.keep(0x20, Ok(iseq("block (2 levels) in run", "run", 0x10)));
        r.iseqs.keep(0x30, Ok(iseq("block in other", "other", 0x10)));
        r.iseqs.keep(0x40, Ok(iseq("helper", "helper", 0x40)));
        r.qualified.insert(0x10, "Jobs::Worker#run".into());
        assert_eq!(r.label(0x10).unwrap(), "Jobs::Worker#run");
        assert_eq!(r.label(0x20).unwrap(), "block (2 levels) in Jobs::Worker#run");
        assert_eq!(r.label(0x30).unwrap(), "block in other", "a block not of its local iseq's method keeps its label");
        assert_eq!(r.label(0x40).unwrap(), "helper", "no method entry seen: the bare label");
    }

    #[test]
    fn a_pc_is_on_the_line_of_the_entry_before_it() {
        let positions = [0, 4, 9];
        let iseq = Iseq {
            label: "inner".into(),
            base_label: "inner".into(),
            local: 0,
            file: "busy.rb".into(),
            first_line: 3,
            top: false,
            encoded: 0x1000,
            size: 12,
            lines: vec![3, 4, 5],
            index: index_of(&positions, 12),
        };
        let pc = |i: u64| ((0x1000 + i * 8) >> 3) & ((1 << 18) - 1);
        // The pc points past the instruction running.
        assert_eq!(iseq.line(pc(1), 18), 3);
        assert_eq!(iseq.line(pc(5), 18), 4);
        assert_eq!(iseq.line(pc(11), 18), 5);
        assert_eq!(iseq.line(pc(40), 18), 3, "past the iseq: its first line");
    }
}
