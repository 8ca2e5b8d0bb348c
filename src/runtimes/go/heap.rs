//! Go's own heap profile, read from outside: the runtime samples its
//! allocations (one every `runtime.MemProfileRate` bytes on average, 512
//! KiB unless the program sets it) and keeps one bucket per stack and size
//! in the list `runtime.mbuckets` heads (linked by `allnext`; buckets are
//! never freed). A bucket is six words (next, allnext, type, hash, size,
//! the stack's length), the stack's return addresses, then its counts:
//! `active` (as of the last completed GC, what Go's heap profile reports)
//! and three `future` cycles not yet published, each allocations, frees,
//! allocated bytes and freed bytes. That layout is the same from Go 1.9
//! to 1.25; every bucket read is checked against it (its type, its bytes
//! being its count times its size) and one that fails is counted, not
//! used. Every read is bounded: the process is untrusted and runs
//! meanwhile.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::profile::raw::{More, RawStack};

use super::goroutines::{read_one, word};

/// Buckets read at most (more are counted).
pub const MAX_BUCKETS: usize = 1 << 20;
/// Frames of one bucket's stack at most (Go 1.23's `profstackdepth`
/// allows up to 1,024).
const MAX_STACK: u64 = 1024;
/// Go's memProfile bucket type.
const MEM_PROFILE: u64 = 1;
/// Bytes of a bucket's header and of its counts (4 cycles of 4 words).
const HEADER: usize = 48;
const COUNTS: usize = 128;

/// One bucket's counts: allocations and frees (objects), all of one size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub allocs: u64,
    pub frees: u64,
}

/// One bucket as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Return addresses, leaf first (the caller of the runtime's
    /// allocation functions first, once Go's own frames are passed).
    pub pcs: Vec<u64>,
    pub size: u64,
    /// As of the last completed GC (in use is `allocs - frees` there).
    pub active: Counts,
    /// Everything recorded so far: `active` and the cycles not yet
    /// published (allocations made since the last GC).
    pub total: Counts,
}

/// What one read of a process's heap profile found, by bucket address.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub buckets: HashMap<u64, Bucket>,
    /// `runtime.MemProfileRate` when read.
    pub rate: u64,
    /// Buckets that did not read as the layout says (or faulted), and
    /// those beyond [`MAX_BUCKETS`].
    pub bad: usize,
    pub beyond: usize,
}

/// Reads the heap profile of `pid` from `runtime.mbuckets` at `head` and
/// `runtime.MemProfileRate` at `rate`.
pub fn read(pid: u32, head: u64, rate: u64) -> Result<Profile, String> {
    let pid = Pid::from_raw(pid as i32);
    let mut w = [0u8; 8];
    if !read_one(pid, rate, &mut w) {
        return Err("its runtime.MemProfileRate could not be read".into());
    }
    let mut out = Profile { rate: u64::from_ne_bytes(w), ..Profile::default() };
    if !read_one(pid, head, &mut w) {
        return Err("its heap profile's buckets (runtime.mbuckets) could not be read".into());
    }
    let mut at = u64::from_ne_bytes(w);
    let mut header = [0u8; HEADER];
    while at != 0 {
        if out.buckets.len() + out.bad >= MAX_BUCKETS {
            out.beyond += 1;
            // Counted on, not read: the rest of the list's length.
            if out.beyond >= MAX_BUCKETS || !read_one(pid, at.wrapping_add(8), &mut w) {
                break;
            }
            at = u64::from_ne_bytes(w);
            continue;
        }
        if out.buckets.contains_key(&at) || !read_one(pid, at, &mut header) {
            // A loop, or a fault: the list cannot be followed further.
            out.bad += 1;
            break;
        }
        let (allnext, kind, size, depth) = (word(&header, 8), word(&header, 16), word(&header, 32), word(&header, 40));
        // A bucket read while the runtime updates it reads wrong: read
        // again, a few times.
        match (0..3).find_map(|_| bucket(pid, at, kind, size, depth)) {
            Some(b) => {
                out.buckets.insert(at, b);
            }
            None => out.bad += 1,
        }
        at = allnext;
    }
    Ok(out)
}

/// The stack and counts of the bucket at `at`, if it reads as one.
fn bucket(pid: Pid, at: u64, kind: u64, size: u64, depth: u64) -> Option<Bucket> {
    if kind != MEM_PROFILE || size == 0 || depth == 0 || depth > MAX_STACK {
        return None;
    }
    let mut rest = vec![0u8; depth as usize * 8 + COUNTS];
    if !read_one(pid, at.wrapping_add(HEADER as u64), &mut rest) {
        return None;
    }
    let pcs: Vec<u64> = (0..depth as usize).map(|i| word(&rest, i * 8)).collect();
    let base = depth as usize * 8;
    let mut cycles = [Counts::default(); 4];
    for (i, c) in cycles.iter_mut().enumerate() {
        let at = base + i * 32;
        let (allocs, frees, alloc_bytes, free_bytes) = (word(&rest, at), word(&rest, at + 8), word(&rest, at + 16), word(&rest, at + 24));
        // Each cycle's bytes are its counts times the one size: read
        // mid-update, or not a bucket.
        if allocs.checked_mul(size) != Some(alloc_bytes) || frees.checked_mul(size) != Some(free_bytes) {
            return None;
        }
        *c = Counts { allocs, frees };
    }
    let total = cycles.iter().fold(Counts::default(), |t, c| Counts { allocs: t.allocs.saturating_add(c.allocs), frees: t.frees.saturating_add(c.frees) });
    if cycles[0].frees > cycles[0].allocs {
        return None;
    }
    Some(Bucket { pcs, size, active: cycles[0], total })
}

/// What the capture window adds: per bucket of `end`, its allocations
/// since `start` (all of them for a bucket `start` does not have, or
/// whose stack or size differ).
pub fn allocated_since(start: &Profile, end: &Profile) -> Vec<(u64, u64)> {
    end.buckets
        .iter()
        .map(|(&at, b)| {
            let before = start.buckets.get(&at).filter(|s| s.size == b.size && s.pcs == b.pcs).map_or(0, |s| s.total.allocs);
            (at, b.total.allocs.saturating_sub(before))
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// How often a process's heap profile is read during a capture: the last
/// read stands for the end of one that exits.
const EVERY: Duration = Duration::from_secs(1);

/// A Go binary's functions (run-time start and end, sorted), from its
/// symbol table: which PCs lie in one function.
#[derive(Clone, Debug, Default)]
pub struct Funcs(Vec<(u64, u64)>);

impl Funcs {
    pub fn of(file: &std::fs::File, bias: u64) -> Funcs {
        use object::{Object, ObjectSymbol, SymbolKind};
        let Some(data) = crate::procs::elf::map(file) else { return Funcs::default() };
        let Ok(obj) = object::File::parse(&*data) else { return Funcs::default() };
        let mut v: Vec<(u64, u64)> = obj
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .map(|s| (s.address().wrapping_add(bias), s.address().wrapping_add(bias).wrapping_add(s.size())))
            .collect();
        v.sort_unstable();
        Funcs(v)
    }

    fn of_pc(&self, pc: u64) -> Option<usize> {
        let i = self.0.partition_point(|&(start, _)| start <= pc).checked_sub(1)?;
        (pc < self.0[i].1).then_some(i)
    }
}

/// Whether the bytes before `pc` (`code`: the 8 ending at it) end in a
/// call instruction, as a return address's do: `call rel32`, or `call`
/// through a register or memory (opcode FF, ModRM reg 2), with or without
/// a REX prefix. An address Go lists for an inlined call (its caller's
/// inline mark plus one) is not preceded by one.
fn follows_call(code: &[u8; 8]) -> bool {
    let at = |back: usize| code[8 - back];
    let modrm_call = |m: u8| (m >> 3) & 7 == 2;
    // FF /2: the ModRM byte's length with its SIB and displacement.
    let len_of = |m: u8, sib: Option<u8>| -> usize {
        let (md, rm) = (m >> 6, m & 7);
        let sib_len = usize::from(md != 3 && rm == 4);
        let base5 = sib.is_some_and(|s| s & 7 == 5);
        let disp = match md {
            0 if rm == 5 || (rm == 4 && base5) => 4,
            1 => 1,
            2 => 4,
            _ => 0,
        };
        2 + sib_len + disp
    };
    if at(5) == 0xE8 {
        return true;
    }
    (2..=7).any(|n| {
        let (ff, m) = (at(n), at(n - 1));
        ff == 0xFF && modrm_call(m) && len_of(m, (n >= 3).then(|| at(n - 2))) == n
    })
}

/// One Go process's heap profile over a capture: read when found, every
/// [`EVERY`], and at the end.
pub struct Watch {
    pid: u32,
    head: u64,
    rate: u64,
    /// `runtime.disableMemoryProfiling`, 0 if none.
    off: u64,
    funcs: Funcs,
    /// Whether each PC read follows a call (read while the process lives).
    calls: HashMap<u64, bool>,
    start: Option<Profile>,
    last: Option<Profile>,
    last_at: Instant,
    /// Why it could not be read, at the last try.
    why: Option<String>,
    done: bool,
}

impl Watch {
    /// Reads `pid`'s heap profile now (the window's start).
    pub fn new(pid: u32, (head, rate): (u64, u64), off: u64, funcs: Funcs) -> Watch {
        let mut w = Watch { pid, head, rate, off, funcs, calls: HashMap::new(), start: None, last: None, last_at: Instant::now(), why: None, done: false };
        w.read();
        w.start = w.last.take();
        w
    }

    fn read(&mut self) {
        self.last_at = Instant::now();
        match read(self.pid, self.head, self.rate) {
            Ok(p) => {
                let pid = Pid::from_raw(self.pid as i32);
                for &pc in p.buckets.values().flat_map(|b| b.pcs.iter().skip(1)) {
                    self.calls.entry(pc).or_insert_with(|| {
                        let mut code = [0u8; 8];
                        // Unreadable: taken for a return address (kept).
                        !read_one(pid, pc.wrapping_sub(8), &mut code) || follows_call(&code)
                    });
                }
                self.last = Some(p);
                self.why = None;
            }
            // Gone, or not readable: what was read is kept.
            Err(why) => {
                self.why = Some(why);
                self.done = self.last.is_some() || self.start.is_some();
            }
        }
    }

    /// Reads again if due (`all`: now, at the capture's end).
    pub fn tick(&mut self, all: bool) {
        if !self.done && (all || self.last_at.elapsed() >= EVERY) {
            self.read();
        }
    }

    /// The process exited: it is not read again.
    pub fn exited(&mut self) {
        self.done = true;
    }

    /// A bucket's PCs as fgbpf walks stacks, one per physical frame: the
    /// leaf stepped back into its call (all are return addresses; the
    /// symbolizer steps back the callers), and the addresses Go lists for
    /// calls inlined into a function (not after a call instruction, in
    /// the same function as the PC below) left out: the function's own PC
    /// names them from DWARF.
    fn physical(&self, pcs: &[u64]) -> Arc<[u64]> {
        let mut out: Vec<u64> = Vec::with_capacity(pcs.len());
        for (i, &pc) in pcs.iter().enumerate() {
            if i == 0 {
                out.push(pc.saturating_sub(1));
                continue;
            }
            let below = out.last().copied().unwrap_or(0);
            let same = self.funcs.of_pc(pc.wrapping_sub(1)).is_some_and(|f| self.funcs.of_pc(below.wrapping_sub(1)) == Some(f) || self.funcs.of_pc(below) == Some(f));
            if same && self.calls.get(&pc) == Some(&false) {
                continue;
            }
            out.push(pc);
        }
        out.into()
    }

    /// The window's stacks (see [`crate::profile::heap::Counted`]): each
    /// bucket's allocations since the start, and its objects in use as
    /// of the last read's GC; and what the summary says of it.
    pub fn stacks(&self) -> (Vec<RawStack>, String) {
        let (Some(start), Some(end)) = (&self.start, self.last.as_ref().or(self.start.as_ref())) else {
            let why = self.why.as_deref().unwrap_or("it was not read");
            return (Vec::new(), format!("its heap profile not read: {why}"));
        };
        let comm: Arc<str> = Arc::from("go heap");
        let stack = |b: &Bucket, what: &str, n: u64| RawStack {
            pid: self.pid,
            tid: self.pid,
            comm: comm.clone(),
            // Return addresses all: the leaf's too is stepped back into
            // its call, as the symbolizer does its callers.
            user: self.physical(&b.pcs),
            weight: n,
            more: Some(Box::new(More { group: Some(format!("{what} {} {}", b.size, end.rate.max(1))), ..More::default() })),
            ..RawStack::default()
        };
        let mut out: Vec<RawStack> = allocated_since(start, end).into_iter().map(|(at, n)| stack(&end.buckets[&at], "go-alloc", n)).collect();
        out.extend(end.buckets.values().filter(|b| b.active.allocs > b.active.frees).map(|b| stack(b, "go-inuse", b.active.allocs - b.active.frees)));
        let mut note = format!(
            "its own heap profile read ({} stacks by size, one allocation sampled every {} bytes on average): allocated is what the window added; in use is the runtime's account as of its last completed GC, allocations from before the capture included",
            end.buckets.len(),
            end.rate
        );
        if end.bad + end.beyond > 0 {
            note.push_str(&format!("; {} buckets not read ({} did not read as Go's layout, {} beyond {MAX_BUCKETS})", end.bad + end.beyond, end.bad, end.beyond));
        }
        if end.rate == 0 {
            let mut flag = [0u8; 1];
            let linker = self.off != 0 && read_one(Pid::from_raw(self.pid as i32), self.off, &mut flag) && flag[0] != 0;
            note.push_str(if linker {
                "; it records no allocation: Go's linker turned its heap profile off (runtime.MemProfileRate 0), the program linking neither runtime/pprof nor net/http/pprof nor runtime.MemProfile"
            } else {
                "; it records no allocation: the program set runtime.MemProfileRate to 0"
            });
        }
        (out, note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket_of(pcs: &[u64], size: u64, total: u64) -> Bucket {
        Bucket { pcs: pcs.to_vec(), size, active: Counts::default(), total: Counts { allocs: total, frees: 0 } }
    }

    #[test]
    fn the_window_is_what_the_end_adds_to_the_start() {
        let mut start = Profile::default();
        start.buckets.insert(1, bucket_of(&[10], 64, 5));
        start.buckets.insert(2, bucket_of(&[20], 64, 7));
        let mut end = Profile::default();
        end.buckets.insert(1, bucket_of(&[10], 64, 9));
        end.buckets.insert(2, bucket_of(&[20], 64, 7));
        end.buckets.insert(3, bucket_of(&[30], 8, 2));
        // A bucket at an address reused for another stack is all new.
        end.buckets.insert(4, bucket_of(&[40], 8, 3));
        start.buckets.insert(4, bucket_of(&[41], 8, 1));
        let mut got = allocated_since(&start, &end);
        got.sort_unstable();
        assert_eq!(got, vec![(1, 4), (3, 2), (4, 3)]);
    }

    #[test]
    fn return_addresses_follow_calls_and_inline_marks_do_not() {
        let code = |tail: &[u8]| {
            let mut c = [0x90u8; 8];
            c[8 - tail.len()..].copy_from_slice(tail);
            c
        };
        // call rel32; call rcx; call r12; call [rdx]; call [rax+8];
        // call [rip+x]; call [rsp+8] (SIB).
        for tail in [&[0xE8, 1, 2, 3, 4][..], &[0xFF, 0xD1], &[0x41, 0xFF, 0xD4], &[0xFF, 0x12], &[0xFF, 0x50, 0x08], &[0xFF, 0x15, 1, 2, 3, 4], &[0xFF, 0x54, 0x24, 0x08]] {
            assert!(follows_call(&code(tail)), "{tail:x?}");
        }
        // Go's inline mark (a nop) or the middle of a mov: no call.
        for tail in [&[0x90][..], &[0x48, 0x89, 0x44, 0x24, 0x08, 0x48]] {
            assert!(!follows_call(&code(tail)), "{tail:x?}");
        }
    }

    #[test]
    fn this_process_is_no_go_heap() {
        // Address 8 is never mapped: the read fails, and says which.
        let err = read(std::process::id(), 8, 8).unwrap_err();
        assert!(err.contains("MemProfileRate"), "{err}");
    }
}
