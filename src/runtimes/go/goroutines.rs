//! Reading a live Go process's goroutines from outside, without stopping
//! it: `runtime.allgs`, each goroutine's status, wait reason and saved
//! registers, and its stack walked by frame pointers (Go keeps them on
//! amd64) from where it parked. Everything is read with batched
//! `process_vm_readv` calls (one per 1,024 pieces), the goroutines by the
//! run of heap pages they lie in and each stack's used part in one piece,
//! so that 100,000 goroutines cost a few hundred system calls; every count,
//! pointer and string read is bounded and checked, the process being
//! untrusted and running meanwhile (a goroutine read mid-change is read
//! wrong at worst, never followed out of its own stack).

use std::io::IoSliceMut;
use std::sync::Mutex;

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

use super::Runtime;

/// Goroutines read at most (more are counted, not read).
pub const MAX_GOROUTINES: usize = 1 << 20;
/// Frames walked of one goroutine at most.
pub const MAX_DEPTH: usize = 128;
/// Bytes of a goroutine's stack read at most, from where it parked.
const MAX_STACK: usize = 64 << 10;
/// Pieces in one process_vm_readv call (the kernel's UIO_MAXIOV).
const BATCH: usize = 1024;

/// What a goroutine was doing when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Running,
    Runnable,
    Syscall,
    /// Parked, with the runtime's wait reason (an index into its
    /// `waitReasonStrings`).
    Waiting(u8),
}

/// One goroutine as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Goroutine {
    pub id: u64,
    pub state: State,
    /// Instruction pointers, leaf first: where it parked and the return
    /// addresses above. A running goroutine's stack is its thread's (the
    /// on-CPU view has it): only the function it started in is given.
    pub pcs: Vec<u64>,
    /// The walk stopped at MAX_DEPTH.
    pub cut: bool,
}

/// What one read found.
#[derive(Debug, Default)]
pub struct Read {
    pub goroutines: Vec<Goroutine>,
    /// Goroutines beyond MAX_GOROUTINES, and those whose `g` could not be
    /// read (freed or moved meanwhile).
    pub not_read: usize,
}

/// One Go process's goroutines, read again and again.
pub struct Reader {
    pid: Pid,
    rt: Runtime,
    /// The runtime's wait reasons by index, read once; `None` where one
    /// could not be read.
    reasons: Option<Vec<Option<&'static str>>>,
}

impl Reader {
    pub fn new(pid: u32, rt: Runtime) -> Reader {
        Reader {
            pid: Pid::from_raw(pid as i32),
            rt,
            reasons: None,
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The text of wait reason `i` as the runtime spells it (`chan
    /// receive`, `sleep`, `select`...), if it could be read.
    pub fn reason(&mut self, i: u8) -> Option<&'static str> {
        if self.reasons.is_none() {
            self.reasons = Some(self.read_reasons());
        }
        self.reasons.as_ref()?.get(usize::from(i)).copied().flatten()
    }

    fn read_reasons(&self) -> Vec<Option<&'static str>> {
        let n = self.rt.reasons_len as usize;
        let mut headers = vec![0u8; n * 16];
        if n == 0 || !read_one(self.pid, self.rt.reasons, &mut headers) {
            return Vec::new();
        }
        let wanted: Vec<(u64, usize)> = (0..n)
            .map(|i| (word(&headers, i * 16), word(&headers, i * 16 + 8)))
            .map(|(p, len)| (p, if len == 0 || len > 64 { 0 } else { len as usize }))
            .collect();
        let mut bufs: Vec<Vec<u8>> = wanted.iter().map(|&(_, len)| vec![0; len]).collect();
        let ok = read_many(self.pid, &wanted.iter().map(|&(p, _)| p).collect::<Vec<_>>(), &mut bufs);
        bufs.iter()
            .zip(ok)
            .map(|(b, ok)| {
                let printable = !b.is_empty() && b.iter().all(|&c| c.is_ascii_graphic() || c == b' ');
                (ok && printable).then(|| intern(&String::from_utf8_lossy(b)))
            })
            .collect()
    }

    /// Every goroutine now. `Err` when the runtime's list cannot be read
    /// (the process is gone, or its memory is not what the binary says).
    pub fn read(&mut self) -> Result<Read, String> {
        let mut head = [0u8; 24];
        if !read_one(self.pid, self.rt.allgs, &mut head) {
            return Err("its goroutine list (runtime.allgs) could not be read".into());
        }
        let (array, len, cap) = (word(&head, 0), word(&head, 8) as usize, word(&head, 16) as usize);
        if len > cap || (len > 0 && array == 0) {
            return Err("its goroutine list (runtime.allgs) is not a slice".into());
        }
        let mut out = Read {
            not_read: len.saturating_sub(MAX_GOROUTINES),
            ..Read::default()
        };
        let len = len.min(MAX_GOROUTINES);
        let mut pointers = vec![0u8; len * 8];
        if len > 0 && !read_one(self.pid, array, &mut pointers) {
            return Err("its goroutine list (runtime.allgs) could not be read".into());
        }
        let gs: Vec<u64> = pointers.chunks_exact(8).map(|c| word(c, 0)).filter(|&g| g != 0).collect();
        let l = self.rt.layout;
        let size = usize::from(l.size);
        // The g's lie side by side in the heap's spans: read by the page
        // run, each page once.
        let heap = Ranges::read(self.pid, gs.iter().map(|&g| (g, size)));
        // (goroutine, bp, the stack's used part) of those to walk.
        let mut walks = Vec::new();
        for &g in &gs {
            let Some(b) = heap.get(g, size) else {
                out.not_read += 1;
                continue;
            };
            let at = |o: u16| word(b, usize::from(o));
            let status = u32::from_ne_bytes(b[usize::from(l.status)..usize::from(l.status) + 4].try_into().unwrap_or_default()) & !0x1000;
            let state = match status {
                1 | 8 | 9 => State::Runnable,
                2 => State::Running,
                3 => State::Syscall,
                4 => State::Waiting(b[usize::from(l.wait_reason)]),
                // Idle, dead (kept for reuse), or unknown.
                _ => continue,
            };
            let (pcs, bp) = match state {
                State::Running => (vec![at(l.start_pc)], 0),
                // Its saved frame pointer is not kept at a system call.
                State::Syscall => (vec![at(l.syscall_pc)], 0),
                _ => (vec![at(l.sched_pc)], at(l.sched_bp)),
            };
            if pcs[0] == 0 {
                continue;
            }
            out.goroutines.push(Goroutine {
                id: at(l.goid),
                state,
                pcs,
                cut: false,
            });
            // Its frames lie between where it parked and its stack's top
            // (at most MAX_STACK read).
            let (sp, hi) = (at(l.sched_sp).max(at(l.stack_lo)), at(l.stack_hi));
            if bp != 0 && sp < hi {
                let top = hi.min(sp.saturating_add(MAX_STACK as u64));
                walks.push((out.goroutines.len() - 1, bp, (sp, top)));
            }
        }
        drop(heap);
        // Each stack's used part in one piece, then walked here; a few
        // thousand at a time, for what is held to stay small.
        for chunk in walks.chunks(4096) {
            let stacks = Ranges::read(self.pid, chunk.iter().map(|&(_, _, (sp, top))| (sp, (top - sp) as usize)));
            for &(g, bp, (sp, top)) in chunk {
                if let Some(stack) = stacks.get(sp, (top - sp) as usize) {
                    walk(&mut out.goroutines[g], stack, bp, (sp, top));
                }
            }
        }
        Ok(out)
    }
}

/// Walks a goroutine's frames in its stack's used part (`stack`, read
/// from `sp` to `top`) from frame pointer `bp`: [bp] holds the caller's
/// bp, [bp+8] the return address; a frame pointer must stay in the stack
/// read, aligned, and rise.
fn walk(frames: &mut Goroutine, stack: &[u8], mut bp: u64, (sp, top): (u64, u64)) {
    while bp >= sp && bp % 8 == 0 && bp.saturating_add(16) <= top {
        if frames.pcs.len() >= MAX_DEPTH {
            frames.cut = true;
            return;
        }
        let at = (bp - sp) as usize;
        let (caller_bp, ret) = (word(stack, at), word(stack, at + 8));
        if ret == 0 {
            return;
        }
        frames.pcs.push(ret);
        if caller_bp <= bp {
            return;
        }
        bp = caller_bp;
    }
}

/// Pieces of another process's memory, read together: the ranges wanted
/// merged where they touch or nearly (within [`GAP`]) into runs of at most
/// [`RUN`] bytes, read in batches; a run that faults is read again range by
/// range, so that one freed page loses only what was on it.
struct Ranges {
    /// Runs read: (start, bytes), by start.
    runs: Vec<(u64, Vec<u8>)>,
}

/// Bytes between two ranges read along with them rather than apart.
const GAP: u64 = 512;
/// Bytes of one run at most.
const RUN: u64 = 64 << 10;

impl Ranges {
    fn read(pid: Pid, wanted: impl Iterator<Item = (u64, usize)>) -> Ranges {
        let mut wanted: Vec<(u64, u64)> = wanted
            .filter(|&(a, len)| len > 0 && a.checked_add(len as u64).is_some())
            .map(|(a, len)| (a, a + len as u64))
            .collect();
        wanted.sort_unstable();
        // Runs as (start, end, first wanted, last wanted + 1).
        let mut runs: Vec<(u64, u64, usize, usize)> = Vec::new();
        for (i, &(a, e)) in wanted.iter().enumerate() {
            match runs.last_mut() {
                Some(r) if a <= r.1.saturating_add(GAP) && e.max(r.1) - r.0 <= RUN => {
                    r.1 = r.1.max(e);
                    r.3 = i + 1;
                }
                _ => runs.push((a, e, i, i + 1)),
            }
        }
        let mut bufs: Vec<Vec<u8>> = runs.iter().map(|r| vec![0; (r.1 - r.0) as usize]).collect();
        let ok = read_many(pid, &runs.iter().map(|r| r.0).collect::<Vec<_>>(), &mut bufs);
        let mut out: Vec<(u64, Vec<u8>)> = Vec::with_capacity(runs.len());
        let mut again = Vec::new();
        for ((r, b), ok) in runs.iter().zip(bufs).zip(ok) {
            if ok {
                out.push((r.0, b));
            } else {
                again.extend_from_slice(&wanted[r.2..r.3]);
            }
        }
        if !again.is_empty() {
            let mut bufs: Vec<Vec<u8>> = again.iter().map(|&(a, e)| vec![0; (e - a) as usize]).collect();
            let ok = read_many(pid, &again.iter().map(|&(a, _)| a).collect::<Vec<_>>(), &mut bufs);
            out.extend(again.iter().zip(bufs).zip(ok).filter(|(_, ok)| *ok).map(|((&(a, _), b), _)| (a, b)));
            out.sort_unstable_by_key(|(a, _)| *a);
        }
        Ranges { runs: out }
    }

    /// The `len` bytes at `addr`, if a run read holds them.
    fn get(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let i = self.runs.partition_point(|(a, _)| *a <= addr).checked_sub(1)?;
        let (start, bytes) = &self.runs[i];
        let from = (addr - start) as usize;
        bytes.get(from..from.checked_add(len)?)
    }
}

/// The native-endian word at `i` of `b` (the caller keeps `i + 8` within
/// `b`: every offset read is below the layout's size).
pub(super) fn word(b: &[u8], i: usize) -> u64 {
    b.get(i..i + 8).and_then(|w| w.try_into().ok()).map_or(0, u64::from_ne_bytes)
}

/// Reads `buf.len()` bytes at `addr`; false on any fault or short read.
pub(super) fn read_one(pid: Pid, addr: u64, buf: &mut [u8]) -> bool {
    let remote = [RemoteIoVec { base: addr as usize, len: buf.len() }];
    let mut local = [IoSliceMut::new(buf)];
    process_vm_readv(pid, &mut local, &remote).is_ok_and(|n| n == remote[0].len)
}

/// Fills each of `bufs` from the address beside it, in batches; whether
/// each was read whole. The kernel transfers whole pieces in order and
/// stops at the first that faults: the pieces after it are asked again.
fn read_many(pid: Pid, addrs: &[u64], bufs: &mut [Vec<u8>]) -> Vec<bool> {
    let mut ok = vec![false; addrs.len()];
    let mut from = 0;
    while from < addrs.len() {
        let to = (from + BATCH).min(addrs.len());
        let remote: Vec<RemoteIoVec> = addrs[from..to]
            .iter()
            .zip(&bufs[from..to])
            .map(|(&a, b)| RemoteIoVec { base: a as usize, len: b.len() })
            .collect();
        let mut local: Vec<IoSliceMut<'_>> = bufs[from..to].iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let mut left = match process_vm_readv(pid, &mut local, &remote) {
            Ok(n) => n,
            // Gone: nothing more to read.
            Err(nix::errno::Errno::ESRCH) => break,
            // The first piece faulted.
            Err(_) => 0,
        };
        let mut i = from;
        while i < to && left >= remote[i - from].len {
            left -= remote[i - from].len;
            ok[i] = true;
            i += 1;
        }
        // The piece at `i` faulted: go on after it.
        from = if i < to { i + 1 } else { to };
    }
    ok
}

/// Wait reasons are a few dozen short texts per Go version: kept for the
/// capture's life as the state frames of goroutine stacks (`[chan
/// receive]`). At most MAX_REASONS distinct; any further one reads as
/// `[waiting]`.
fn intern(text: &str) -> &'static str {
    const MAX_REASONS: usize = 512;
    static TEXTS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut texts = TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    let framed = format!("[{text}]");
    if let Some(t) = texts.iter().find(|t| **t == framed) {
        return t;
    }
    if texts.len() >= MAX_REASONS {
        return "[waiting]";
    }
    let t: &'static str = Box::leak(framed.into_boxed_str());
    texts.push(t);
    t
}

/// The pseudo-frame ending a goroutine's stack: its state, or its wait
/// reason (`[chan receive]`), `[waiting]` when that could not be read.
pub fn state_frame(reader: &mut Reader, state: State) -> &'static str {
    match state {
        State::Running => "[running]",
        State::Runnable => "[runnable]",
        State::Syscall => "[syscall]",
        State::Waiting(i) => reader.reason(i).unwrap_or("[waiting]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_reads_of_own_memory_skip_the_faulting_pieces_only() {
        let a = [1u8, 2, 3, 4];
        let b = [9u8; 8];
        let me = Pid::this();
        let addrs = [a.as_ptr() as u64, 8, b.as_ptr() as u64];
        let mut bufs = vec![vec![0; 4], vec![0; 4], vec![0; 8]];
        assert_eq!(read_many(me, &addrs, &mut bufs), vec![true, false, true]);
        assert_eq!(bufs[0], a);
        assert_eq!(bufs[2], b);
        // More pieces than one call takes.
        let many: Vec<u64> = (0..2500).map(|_| a.as_ptr() as u64).collect();
        let mut bufs = vec![vec![0; 4]; many.len()];
        assert!(read_many(me, &many, &mut bufs).iter().all(|&ok| ok));
        assert!(bufs.iter().all(|b| b == &a));
    }

    #[test]
    fn ranges_read_near_pieces_together_and_lose_only_what_faults() {
        let data: Vec<u8> = (0..=255u8).cycle().take(8192).collect();
        let base = data.as_ptr() as u64;
        let me = Pid::this();
        // Two pieces 100 bytes apart (one run), one far, one unmapped.
        let r = Ranges::read(me, [(base, 16), (base + 116, 16), (base + 6000, 8), (8, 8)].into_iter());
        assert_eq!(r.get(base, 16), Some(&data[..16]));
        assert_eq!(r.get(base + 116, 16), Some(&data[116..132]));
        assert_eq!(r.get(base + 6000, 8), Some(&data[6000..6008]));
        assert_eq!(r.get(8, 8), None);
        // Not asked, not given, even between pieces of one run.
        assert_eq!(r.get(base + 6000, 9), None);
    }

    #[test]
    fn a_stack_is_walked_by_rising_frame_pointers_and_nowhere_else() {
        // Frames at 0x1010 -> 0x1030 -> 0x1050 (bp 0 ends it).
        let sp = 0x1000u64;
        let mut stack = vec![0u8; 0x80];
        let mut put = |at: u64, v: u64| stack[(at - sp) as usize..(at - sp) as usize + 8].copy_from_slice(&v.to_ne_bytes());
        put(0x1010, 0x1030);
        put(0x1018, 0xaaa);
        put(0x1030, 0x1050);
        put(0x1038, 0xbbb);
        put(0x1050, 0);
        put(0x1058, 0xccc);
        let mut g = Goroutine { id: 1, state: State::Waiting(0), pcs: vec![0x999], cut: false };
        walk(&mut g, &stack, 0x1010, (sp, sp + 0x80));
        assert_eq!(g.pcs, vec![0x999, 0xaaa, 0xbbb, 0xccc]);
        // A frame pointer that goes down, or out of the stack read, ends it.
        let mut stack2 = stack.clone();
        stack2[0x30..0x38].copy_from_slice(&0x1000u64.to_ne_bytes());
        let mut g = Goroutine { id: 1, state: State::Waiting(0), pcs: vec![], cut: false };
        walk(&mut g, &stack2, 0x1010, (sp, sp + 0x80));
        assert_eq!(g.pcs, vec![0xaaa, 0xbbb]);
        let mut g = Goroutine { id: 1, state: State::Waiting(0), pcs: vec![], cut: false };
        walk(&mut g, &stack, 0x2000, (sp, sp + 0x80));
        assert!(g.pcs.is_empty());
    }

    #[test]
    fn wait_reasons_are_framed_once_and_bounded() {
        let a = intern("chan receive");
        assert_eq!(a, "[chan receive]");
        assert!(std::ptr::eq(a, intern("chan receive")));
    }
}
