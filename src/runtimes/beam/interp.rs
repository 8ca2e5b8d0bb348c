//! The BEAM without its JIT (OTP 23, Debian 11's `erlang-base`): an
//! interpreter of threaded code. Its kernel half (`beam_interp` in
//! `beam.bpf.h`) gives, for a sample in the interpreter's loop, the
//! instruction pointer and the continuation pointers on the Erlang
//! process's stack: words of the loaded code. Here each is named by the
//! function whose code holds it. Every function's code follows a header
//! (`ErtsCodeInfo`: the `i_func_info` instruction, a breakpoint word, and
//! the function's module, name and arity), so the header is looked for
//! backwards from the word, read from outside the process, each candidate
//! checked: the instruction's exact address (learned from a trap export
//! of the emulator's, whose header holds the instruction's number, and
//! the emulator's table of instruction addresses), two atoms the node's
//! own atom table resolves, an arity below 256. A word not so named stays
//! unnamed and is counted. The module table and the code's line table are
//! not exported: no lines.

use std::collections::HashMap;

use object::{Object, ObjectSymbol};

use crate::procs::mem::Mem;

/// Where an emulator without the JIT keeps what is read here (addresses
/// in the process).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `process_main`, the interpreter's loop: [lo, hi).
    pub main: (u64, u64),
    /// `&beam_apply[1]`: where every Erlang process returns when it ends,
    /// the last word of its stack.
    pub normal_exit: u64,
    /// `beam_ops`: a pointer to the table of instructions' addresses.
    pub ops: u64,
    /// `erts_atom_table`.
    pub atoms: u64,
    /// `bif_return_trap_export`: an export whose header holds the number
    /// of the `i_func_info` instruction.
    pub trap: u64,
}

/// FG_BEAM_WORD of beam.h: a frame of Erlang code the interpreter runs,
/// the address of a word of its code in the low 58 bits; the runtime of
/// fgbpf.h's FG_RT_BEAM.
pub const RUNTIME: u64 = 3;

/// The address of code an FG_BEAM_WORD holds.
pub fn code_of(word: u64) -> Option<u64> {
    (crate::symbolize::is_runtime_word(word) && (word >> 60) & 3 == RUNTIME).then_some(word & ((1 << 58) - 1))
}

/// `struct process`: where OTP 23 keeps the start and end of a process's
/// heap (the stack is its top), after `ErtsPTabElementCommon` (0x50
/// bytes), `htop` and `stop` (Debian 11's `process_main` reads `stop` at
/// 0x58).
pub const HEAP_AT: u32 = 0x60;
pub const HEND_AT: u32 = 0x68;

/// The emulator's symbols, in the file (`bias` added): `Err` says which
/// is missing.
pub fn layout(obj: &object::File, bias: u64) -> Result<Layout, String> {
    let symbol = |name: &str| {
        obj.dynamic_symbols().find(|s| s.name() == Ok(name) && s.address() != 0).map(|s| (s.address() + bias, s.size())).ok_or(format!("its emulator exports no `{name}`"))
    };
    let (main, size) = symbol("process_main")?;
    if size == 0 {
        return Err("its `process_main` has no size".into());
    }
    Ok(Layout { main: (main, main + size), normal_exit: symbol("beam_apply")?.0 + 8, ops: symbol("beam_ops")?.0, atoms: symbol("erts_atom_table")?.0, trap: symbol("bif_return_trap_export")?.0 })
}

/// An atom's term: its index above the tag 0b001011.
fn atom_index(term: u64) -> Option<u32> {
    (term & 0x3f == 0x0b).then_some(term >> 6).and_then(|i| u32::try_from(i).ok())
}

/// Bytes read at a time, backwards from a word, and how far at most (a
/// function's code is rarely longer).
const PAGE: u64 = 4096;
const MAX_BACK: u64 = 1 << 20;
/// The header: 5 words.
const HEADER: u64 = 40;
/// The longest atom (255 characters, up to 4 bytes each).
const MAX_ATOM: usize = 1020;

/// One node's names: its functions, found from the words of its stacks.
pub struct Names {
    /// The `i_func_info` instruction's address.
    func_info: u64,
    /// The atom table (`erts_atom_table`), its index → atom pages, and
    /// how many atoms it held when last read (atoms are only ever added).
    table: u64,
    seg_table: u64,
    entries: u32,
    atoms: HashMap<u32, Option<String>>,
    /// A word → the header of the function holding it, or `None`.
    words: HashMap<u64, Option<u64>>,
    /// A function's header → its name, and the header's module, function
    /// and arity words as read.
    functions: HashMap<u64, (String, [u64; 3])>,
}

impl Names {
    /// Reads, from the live process, what naming needs: `Ok(None)` while
    /// its emulator has not started (its opcode table `beam_ops` unset, or
    /// the trap export not yet filled in), `Err` why it cannot be read.
    pub fn open(mem: &Mem, l: &Layout) -> Result<Option<Names>, String> {
        let table = mem.u64(l.ops).ok_or("its `beam_ops` could not be read")?;
        // The trap export's header: [i_func_info's number, 0, erlang,
        // name, arity] somewhere in its first words.
        let words: Vec<u64> = (0..12).map_while(|i| mem.u64(l.trap + 8 * i)).collect();
        let number = words
            .windows(5)
            .find(|w| w[0] < 4096 && w[1] == 0 && atom_index(w[2]).is_some() && atom_index(w[3]).is_some() && w[4] < 256)
            .map(|w| w[0]);
        let (Some(number), true) = (number, table != 0) else {
            if words.len() < 5 {
                return Err("its `bif_return_trap_export` could not be read".into());
            }
            return Ok(None);
        };
        let func_info = mem.u64(table + 8 * number).ok_or("its `beam_ops` could not be read")?;
        if !(l.main.0..l.main.1).contains(&func_info) {
            return Err(format!("its `i_func_info` ({number}) is at {func_info:#x}, outside process_main"));
        }
        // IndexTable: after its Hash (13 words), type and size, limit and
        // entries, seg_table.
        let entries = mem.u32(l.atoms + 116).ok_or("its atom table could not be read")?;
        let seg_table = mem.u64(l.atoms + 120).ok_or("its atom table could not be read")?;
        let mut names = Names { func_info, table: l.atoms, seg_table, entries, atoms: HashMap::new(), words: HashMap::new(), functions: HashMap::new() };
        let known = (names.atom(mem, 0), names.atom(mem, 1));
        if known != (Some("false".into()), Some("true".into())) {
            return Err(format!("its atom table's first atoms read {known:?}, not false and true"));
        }
        Ok(Some(names))
    }

    /// Atom `ix`'s text: `seg_table[ix / 1024][ix % 1024]`, an `Atom`
    /// whose index (at 16) must be `ix`, its length at 24 and its bytes at
    /// 32.
    fn atom(&mut self, mem: &Mem, ix: u32) -> Option<String> {
        if let Some(a) = self.atoms.get(&ix) {
            return a.clone();
        }
        // An atom made since the table was read (a module loaded since);
        // one not made yet is not kept as unreadable.
        if ix >= self.entries {
            self.entries = mem.u32(self.table + 116).unwrap_or(self.entries);
            self.seg_table = mem.u64(self.table + 120).unwrap_or(self.seg_table);
            if ix >= self.entries {
                return None;
            }
        }
        let read = || {
            let page = mem.u64(self.seg_table + 8 * (ix as u64 >> 10))?;
            let atom = mem.u64(page + 8 * (ix as u64 & 1023))?;
            if mem.u32(atom + 16)? != ix {
                return None;
            }
            let len = mem.u16(atom + 24)? as i16;
            let len = usize::try_from(len).ok().filter(|&n| n <= MAX_ATOM)?;
            let bytes = mem.bytes(mem.u64(atom + 32)?, len)?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        };
        let a = read();
        self.atoms.insert(ix, a.clone());
        a
    }

    /// Names the function whose code holds `word` (an instruction or a
    /// continuation pointer), once per word.
    pub fn see(&mut self, mem: &Mem, word: u64) {
        if self.words.contains_key(&word) {
            return;
        }
        let at = self.header_of(mem, word).map(|(at, name, mfa)| {
            self.functions.entry(at).or_insert((name, mfa));
            at
        });
        self.words.insert(word, at);
    }

    /// The nearest header before `word` (at least a header's length
    /// before it), and its function's name.
    fn header_of(&mut self, mem: &Mem, word: u64) -> Option<(u64, String, [u64; 3])> {
        if word & 7 != 0 || word <= PAGE + HEADER {
            return None;
        }
        let floor = word.saturating_sub(MAX_BACK).max(PAGE);
        // Pages read backwards from the word, each with the first words
        // of the one above it (a header may cross into it).
        let mut end = word;
        let mut above: Vec<u64> = Vec::new();
        loop {
            let start = ((end - 8) & !(PAGE - 1)).max(floor);
            let bytes = mem.bytes(start, (end - start) as usize)?;
            let mut ws: Vec<u64> = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
            let here = ws.len();
            ws.extend_from_slice(&above);
            for i in (0..here).rev() {
                let at = start + 8 * i as u64;
                if ws[i] != self.func_info {
                    continue;
                }
                // The nearest header: the word is its function's, or (in
                // the header itself, or a header that does not read
                // whole) no function's known. Never one further back,
                // whose code ends before this header.
                if at + HEADER > word || ws.len() < i + 5 {
                    return None;
                }
                let (m, f, arity) = (atom_index(ws[i + 2])?, atom_index(ws[i + 3])?, ws[i + 4]);
                if arity > 255 {
                    return None;
                }
                let (m, f) = (self.atom(mem, m)?, self.atom(mem, f)?);
                return Some((at, format!("{m}:{f}/{arity}"), [ws[i + 2], ws[i + 3], arity]));
            }
            if start <= floor {
                return None;
            }
            ws.truncate(4);
            above = ws;
            end = start;
        }
    }

    /// The name of the function whose code holds `word`, once seen.
    pub fn name(&self, word: u64) -> Option<&str> {
        self.words.get(&word).copied().flatten().and_then(|at| self.functions.get(&at)).map(|(name, _)| name.as_str())
    }

    /// Reads each function's header again (at the capture's end): one
    /// that no longer holds what it held (the module purged, its memory
    /// given to other code) leaves its words unnamed, since which code
    /// they were is no longer known. Headers that cannot be read (the
    /// node gone) are kept.
    pub fn recheck(&mut self, mem: &Mem) {
        let func_info = self.func_info;
        let gone: Vec<u64> = self
            .functions
            .iter()
            .filter(|(&at, (_, mfa))| {
                let read: Option<Vec<u64>> = [0, 2, 3, 4].iter().map(|i| mem.u64(at + 8 * i)).collect();
                read.is_some_and(|w| w[0] != func_info || w[1..] != mfa[..])
            })
            .map(|(&at, _)| at)
            .collect();
        for at in gone {
            self.functions.remove(&at);
        }
    }

    pub fn functions(&self) -> usize {
        self.functions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atom(ix: u64) -> u64 {
        ix << 6 | 0x0b
    }

    /// OTP 23's structures, laid out in this process's memory and read
    /// back through its /proc/PID/mem: an atom table, the instructions'
    /// table, a trap export, and code with function headers (one across
    /// a page's end).
    #[test]
    fn a_word_is_named_by_the_nearest_header_before_it() {
        let texts: [&[u8]; 6] = [b"false", b"true", b"busy", b"spin", b"inner", b"later"];
        // Atom: index at 16, length at 24, name at 32.
        let atoms: Vec<[u64; 5]> = texts.iter().enumerate().map(|(i, t)| [0, 0, i as u64, t.len() as u64, t.as_ptr() as u64]).collect();
        let page: Vec<u64> = atoms.iter().map(|a| a.as_ptr() as u64).collect();
        let seg_table = [page.as_ptr() as u64];
        let mut table = [0u64; 16];
        // One atom not yet made.
        table[14] = (texts.len() as u64 - 1) << 32;
        table[15] = seg_table.as_ptr() as u64;
        let (main, func_info) = ((0x10_0000, 0x20_0000), 0x12_3457);
        let mut ops = vec![0u64; 200];
        ops[174] = func_info;
        let ops_ptr = [ops.as_ptr() as u64];
        let trap = [0, 0, 0, 0xffff_ffff, 174, 0, atom(1), atom(0), 2, 0, 0, 0];
        let l = Layout { main, normal_exit: 0, ops: ops_ptr.as_ptr() as u64, atoms: table.as_ptr() as u64, trap: trap.as_ptr() as u64 };
        let mem = Mem::open(std::process::id()).unwrap();
        let mut names = Names::open(&mem, &l).unwrap().unwrap();

        let mut code = vec![0x3bu64; 4096];
        let base = code.as_ptr() as u64;
        let header = |code: &mut Vec<u64>, at: usize, f: u64, arity: u64| code[at..at + 5].copy_from_slice(&[func_info, 0, atom(2), atom(f), arity]);
        header(&mut code, 100, 4, 1);
        header(&mut code, 600, 3, 2);
        // One that crosses a page's end, 2 words before it.
        let across = (800..1400).find(|i| (base + 8 * *i as u64) % 4096 == 4096 - 16).unwrap();
        header(&mut code, across, 4, 3);
        // The instruction, then no atoms: a header that does not read
        // whole, after which no word is named (never by a function
        // further back, whose code ended before it).
        code[700..705].copy_from_slice(&[func_info, 0, 0x3f, 0x3f, 1]);
        let word = |i: usize| base + 8 * i as u64;
        // No header before it: first, before the reads below leave copies
        // of the headers in freed memory under `code`.
        let named = [(50, None), (605, Some("busy:spin/2")), (620, Some("busy:spin/2")), (604, None), (710, None)];
        for (at, want) in named.into_iter().chain([(150, Some("busy:inner/1")), (across + 5, Some("busy:inner/3")), (across + 300, Some("busy:inner/3"))]) {
            names.see(&mem, word(at));
            assert_eq!(names.name(word(at)), want, "word {at}");
        }
        // A function named by an atom made after the table was read.
        header(&mut code, across + 400, 5, 0);
        assert_eq!((names.see(&mem, word(across + 420)), names.name(word(across + 420))), ((), None), "an atom the table does not hold");
        // SAFETY: a write to this test's own array, which the reads
        // through /proc/PID/mem see.
        unsafe { std::ptr::write_volatile(&mut table[14], (texts.len() as u64) << 32) };
        names.see(&mem, word(across + 421));
        assert_eq!(names.name(word(across + 421)), Some("busy:later/0"));
        // A header that changed since (its module purged, other code
        // there): its words are no longer named.
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(&mut code[603], atom(4)) };
        names.recheck(&mem);
        assert_eq!((names.name(word(620)), names.name(word(150))), (None, Some("busy:inner/1")));
        // Unaligned: never code.
        names.see(&mem, word(620) + 4);
        assert_eq!(names.name(word(620) + 4), None);
        assert_eq!(code_of((2 << 62) | (3 << 60) | word(620)), Some(word(620)));
        assert_eq!(code_of((2 << 62) | (1 << 60) | word(620)), None, "another runtime's word");
        assert_eq!(code_of(word(620)), None);
    }

    /// A node found while its emulator starts is read again; one that
    /// cannot be read is refused at once.
    #[test]
    fn only_an_emulator_not_started_is_read_again() {
        let (main, func_info) = ((0x10_0000, 0x20_0000), 0x12_3457);
        let mut ops = vec![0u64; 200];
        ops[174] = func_info;
        let (set, unset) = ([ops.as_ptr() as u64], [0u64]);
        let (header, zeros) = ([0, 0, 0, 0xffff_ffff, 174, 0, atom(1), atom(0), 2, 0, 0, 0], [0u64; 12]);
        let mem = Mem::open(std::process::id()).unwrap();
        let open = |ops: u64, trap: u64, main| Names::open(&mem, &Layout { main, normal_exit: 0, ops, atoms: 0, trap }).map(|n| n.is_some());
        let here = |a: &[u64]| a.as_ptr() as u64;
        assert_eq!(open(here(&unset), here(&header), main), Ok(false), "beam_ops not set");
        assert_eq!(open(here(&set), here(&zeros), main), Ok(false), "the trap export not filled in");
        assert!(open(here(&set), here(&header), (0, 0x1000)).is_err_and(|e| e.contains("outside process_main")));
        assert!(open(16, here(&header), main).is_err_and(|e| e.contains("`beam_ops` could not be read")));
        assert!(open(here(&set), 16, main).is_err_and(|e| e.contains("could not be read")));
    }

    #[test]
    fn atoms_are_told_by_their_tag() {
        assert_eq!(atom_index(atom(7514)), Some(7514));
        assert_eq!(atom_index(0x3f), None, "a small integer");
        assert_eq!(atom_index(0x4800000093), None, "a pid");
    }
}
