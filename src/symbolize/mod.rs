//! Names raw addresses and builds the [`Profile`]: kernel frames from
//! kallsyms; user frames from the ELF symbols and DWARF (inlined functions,
//! Rust and C++ demangling) of the files each process had mapped, or of
//! their separate debug files; JIT frames from the runtimes' perf maps.
//! What a process's frames need is taken while it lives (its memory map, an
//! open descriptor on each mapped binary, its root directory), so processes
//! that exit, binaries deleted by a deploy and files that exist only inside
//! a container all still resolve after the capture. Each distinct offset
//! of each distinct binary is symbolized once, however many processes map
//! it.

use std::collections::HashMap;
use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer as Blazesym};
use blazesym::Pid;

use crate::profile::{RawStack, State};
use crate::profile::{
    Frame, FrameId, FrameKind, Profile, Stack, Thread, ThreadId, Unit, Unresolved,
    UnresolvedReason, UNKNOWN,
};

/// The directories distributions install separate debug files under.
const SYSTEM_DEBUG_DIRS: &[&str] = &["/usr/lib/debug", "/lib/debug"];

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Extra directories searched for separate debug files, before the
    /// system ones: `DIR/.build-id/xx/yyyy.debug` by build ID, and by
    /// `.gnu_debuglink` name.
    pub debug_dirs: Vec<PathBuf>,
}

type BinaryId = usize;
type RootId = usize;

/// Identity of an open file: the same binary reached through different
/// paths, processes or namespaces is parsed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl FileKey {
    fn of(file: &File) -> Option<FileKey> {
        let m = file.metadata().ok()?;
        Some(FileKey {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        })
    }
}

/// A file some process mapped executable.
struct Binary {
    /// Its file name, for `module+0xOFFSET` frames and reports.
    name: String,
    /// Held open from while a process mapped it: reopened through
    /// /proc/self/fd, it stays readable after the process exits, after
    /// the file is deleted, and outside the process's mount namespace.
    file: Option<File>,
    /// Where to read it when no descriptor could be kept.
    fallback: Option<PathBuf>,
    elf: Option<elf::ElfInfo>,
    /// A separate debug file, found by build ID or debuglink.
    debug: Option<File>,
}

impl Binary {
    fn path(&self) -> Option<PathBuf> {
        match &self.file {
            Some(f) => Some(fd_path(f)),
            None => self.fallback.clone(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Region {
    File(BinaryId),
    /// Memory with no file behind it: where JIT compilers put code.
    Anon,
    Vdso,
}

#[derive(Clone, Copy, Debug)]
struct Vma {
    start: u64,
    end: u64,
    offset: u64,
    region: Region,
}

/// What was read about a process while it lived.
struct Proc {
    /// Sorted by start and disjoint.
    vmas: Vec<Vma>,
    /// Its PID as it sees itself, which names its perf map.
    ns_pid: u32,
    /// Its root directory when it is not ours (a container, a chroot).
    root: Option<RootId>,
    /// Its perf map, held open once seen: a /tmp private to its mount
    /// namespace goes away with the namespace, the open file does not.
    perf_map: Option<File>,
    /// Virtual memory size when the map was read: when it changes, the
    /// map has.
    vsize: u64,
    /// False once it is known to have exited.
    alive: bool,
}

/// An address in the kernel's text on x86-64 (its default base); only
/// used to make blazesym load the kernel's symbols early.
const KERNEL_TEXT_GUESS: u64 = 0xffff_ffff_8100_0000;
/// How often [`Symbolizer::refresh`] looks for changed memory maps, and
/// how long one look may take: reading every process's map each time
/// would cost a busy host more than the capture itself.
const REFRESH_EVERY: Duration = Duration::from_millis(500);
const REFRESH_BUDGET: Duration = Duration::from_millis(5);

/// A symbolizer that lives through a capture: processes are remembered
/// while they run, so they can be named after they exit.
pub struct Symbolizer {
    blazesym: Blazesym,
    /// Host directories searched for debug files, in order.
    debug_dirs: Vec<PathBuf>,
    /// Process names announced during the capture.
    names: HashMap<u32, String>,
    procs: HashMap<u32, Proc>,
    binaries: Vec<Binary>,
    /// (device, inode) as /proc/PID/maps shows them: a file already held
    /// is recognised without a system call.
    by_maps_key: HashMap<(u64, u64), BinaryId>,
    by_file_key: HashMap<FileKey, BinaryId>,
    /// Open root directories of other mount namespaces or chroots, kept so
    /// that perf maps inside them can be read after the process exits.
    roots: Vec<File>,
    root_ids: HashMap<(String, u64, u64), RootId>,
    own_root: Option<(String, u64, u64)>,
    /// This process's vDSO: every process of a kernel maps the same one.
    own_vdso: Option<Range<u64>>,
    last_refresh: Instant,
    /// Where the next refresh resumes, in PID order.
    refresh_from: u32,
}

/// What a user address was found to be.
#[derive(Clone, Copy, Debug)]
enum Target {
    Binary(BinaryId, u64),
    Jit,
    Vdso(u64),
    Unmapped,
    Gone,
}

/// Frames of one address before interning.
type Resolution = (Vec<Frame>, Option<UnresolvedReason>);

impl Symbolizer {
    pub fn new(opts: &Options) -> Self {
        let mut debug_dirs = opts.debug_dirs.clone();
        debug_dirs.extend(SYSTEM_DEBUG_DIRS.iter().map(PathBuf::from));
        let blazesym = Blazesym::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true)
            .set_debug_dirs(Some(&debug_dirs))
            .build();
        raise_fd_limit();
        Symbolizer {
            blazesym,
            debug_dirs,
            names: HashMap::new(),
            procs: HashMap::new(),
            binaries: Vec::new(),
            by_maps_key: HashMap::new(),
            by_file_key: HashMap::new(),
            roots: Vec::new(),
            root_ids: HashMap::new(),
            own_root: root_key("self"),
            own_vdso: own_vdso(),
            last_refresh: Instant::now(),
            refresh_from: 0,
        }
    }

    /// Reads and indexes the kernel's symbols now, during the capture,
    /// rather than after it: parsing kallsyms is most of the time between
    /// the end of a capture and its flamegraph.
    pub fn prepare_kernel(&mut self) {
        let src = Source::Kernel(Kernel::default());
        // Any address does: the first lookup loads the whole table, which
        // blazesym then keeps.
        let _ = self
            .blazesym
            .symbolize(&src, Input::AbsAddr(&[KERNEL_TEXT_GUESS]));
    }

    /// Reads, during the capture rather than after it, what naming a
    /// targeted process's frames will take: its memory map, and the
    /// symbols and debug information of every binary it maps. For the
    /// processes a capture targets only, whose code fills its stacks: with
    /// a C library's debug information installed, loading it was most of
    /// the wait for a short capture's flamegraph.
    pub fn prepare_process(&mut self, pid: u32) {
        if !self.procs.contains_key(&pid) && !self.read_process(pid) {
            return;
        }
        let Some(p) = self.procs.get(&pid) else {
            return;
        };
        let mut firsts: Vec<(BinaryId, u64)> = Vec::new();
        for v in &p.vmas {
            if let Region::File(b) = v.region {
                if !firsts.iter().any(|&(seen, _)| seen == b) {
                    firsts.push((b, v.offset));
                }
            }
        }
        for (b, offset) in firsts {
            // blazesym keeps what it loads for the file; the result of
            // naming this one offset does not matter.
            let _ = self.symbolize_binary(&self.binaries[b], &[offset]);
        }
    }

    /// Reads what naming `pid`'s frames will need (its mappings, an open
    /// descriptor on each binary, its root) while it lives. Call again
    /// after it execs; earlier mappings are kept where the new ones do not
    /// cover them.
    pub fn remember(&mut self, pid: u32, name: &str) {
        if pid == 0 {
            return;
        }
        if !name.is_empty() {
            self.names.insert(pid, name.to_string());
        }
        self.read_process(pid);
    }

    /// Re-reads the memory maps of remembered processes that changed since
    /// they were read, so that libraries and JIT code mapped later (Node
    /// remaps its builtins after start-up) still resolve if the process
    /// exits before the capture ends. Call it often during the capture
    /// (every poll): it limits itself to a few milliseconds twice a second.
    pub fn refresh(&mut self) {
        if self.last_refresh.elapsed() < REFRESH_EVERY {
            return;
        }
        let start = Instant::now();
        self.last_refresh = start;
        let mut pids: Vec<u32> = self
            .procs
            .iter()
            .filter(|(_, p)| p.alive)
            .map(|(&pid, _)| pid)
            .collect();
        pids.sort_unstable();
        let first = pids.partition_point(|&p| p < self.refresh_from);
        pids.rotate_left(first);
        self.refresh_from = 0;
        for pid in pids {
            if start.elapsed() >= REFRESH_BUDGET {
                self.refresh_from = pid;
                break;
            }
            let changed = match vsize(pid) {
                Some(size) => self.procs.get(&pid).is_some_and(|p| p.vsize != size),
                None => true,
            };
            if changed && !self.read_process(pid) {
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.alive = false;
                }
            }
        }
    }

    /// Names every frame of `raw` and returns the profile, with the
    /// samples whose leaf frame stayed unnamed in [`Profile::unresolved`].
    pub fn profile(&mut self, raw: &[RawStack], unit: Unit) -> Profile {
        let mut profile = Profile::new(unit);
        // Libraries and JIT code mapped since a process was last read.
        let mut pids: Vec<u32> = raw
            .iter()
            .filter(|r| !r.user.is_empty() && r.pid != 0)
            .map(|r| r.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        for &pid in &pids {
            self.read_process(pid);
        }
        let hasher = AddrHashBuilder::new();
        let mut table = Table::default();
        let kernel = self.kernel_frames(raw, &mut profile, &mut table, hasher);
        let user = self.user_frames(raw, &mut profile, &mut table, hasher);
        let mut next_user = 0;

        let mut thread_ids: HashMap<(u32, u32, &str), ThreadId> = HashMap::new();
        let mut process_names: HashMap<u32, String> = HashMap::new();
        // Per process, unresolved weight by reason.
        let mut accounts: HashMap<u32, HashMap<UnresolvedReason, u64>> = HashMap::new();
        for r in raw {
            let thread = match thread_ids.get(&(r.pid, r.tid, r.comm.as_str())) {
                Some(&t) => t,
                None => {
                    let process = process_names
                        .entry(r.pid)
                        .or_insert_with(|| self.process_name(r))
                        .clone();
                    let t = profile.intern_thread(Thread {
                        pid: r.pid,
                        tid: r.tid,
                        process,
                        name: r.comm.clone(),
                    });
                    thread_ids.insert((r.pid, r.tid, r.comm.as_str()), t);
                    t
                }
            };
            // This stack's slots, in the order user_frames recorded them.
            let slots = &user.frame_slots[next_user..next_user + r.user.len()];
            next_user += r.user.len();
            let mut frames = Vec::with_capacity(r.user.len() + r.kernel.len() + 2);
            if let Some(note) = r.root_note {
                frames.push(profile.intern_frame(Frame::new(note, FrameKind::Pseudo)));
            }
            for &slot in slots.iter().rev() {
                frames.extend_from_slice(table.frames(user.entries[slot as usize]));
            }
            for (i, &ip) in r.kernel.iter().enumerate().rev() {
                frames.extend_from_slice(table.frames(kernel[&caller_adjusted(ip, i)]));
            }
            for name in r.kernel_names.iter().rev() {
                frames.push(profile.intern_frame(Frame::new(name.as_str(), FrameKind::Kernel)));
            }
            if let Some(note) = r.state.map(State::frame) {
                frames.push(profile.intern_frame(Frame::new(note, FrameKind::Pseudo)));
            }
            // The user leaf says which code of the process ran or waited;
            // kernel leaves nearly always resolve and would hide it.
            let reason = match (slots.first(), r.kernel.first()) {
                (Some(&slot), _) => table.unresolved(user.entries[slot as usize]),
                (None, Some(&ip)) if r.kernel_names.is_empty() => table.unresolved(kernel[&ip]),
                _ => None,
            };
            if let Some(reason) = reason.filter(|_| r.weight > 0) {
                *accounts
                    .entry(r.pid)
                    .or_default()
                    .entry(reason.clone())
                    .or_default() += r.weight;
            }
            profile.push(Stack {
                thread: Some(thread),
                frames,
                weight: r.weight,
            });
        }
        profile.coalesce();
        profile.unresolved = unresolved_list(accounts, &process_names);
        profile
    }

    fn process_name(&self, r: &RawStack) -> String {
        if let Some(name) = self.names.get(&r.pid) {
            return name.clone();
        }
        match fs::read_to_string(format!("/proc/{}/comm", r.pid)) {
            Ok(name) if r.pid != 0 => name.trim_end_matches('\n').to_string(),
            _ if r.pid == 0 => "[idle]".to_string(),
            _ => r.comm.clone(),
        }
    }

    /// Names every distinct kernel address of `raw`: address -> entry of
    /// `table`.
    fn kernel_frames(
        &self,
        raw: &[RawStack],
        profile: &mut Profile,
        table: &mut Table,
        hasher: AddrHashBuilder,
    ) -> AddrMap<u32> {
        let mut names = AddrMap::with_hasher(hasher);
        for r in raw {
            for a in adjusted(&r.kernel) {
                names.insert(a, UNNAMED);
            }
        }
        if names.is_empty() {
            return names;
        }
        let addrs: Vec<u64> = names.keys().copied().collect();
        let src = Source::Kernel(Kernel::default());
        let syms = self
            .blazesym
            .symbolize(&src, Input::AbsAddr(&addrs))
            .unwrap_or_default();
        for (i, a) in addrs.into_iter().enumerate() {
            let entry = match syms.get(i) {
                Some(Symbolized::Sym(sym)) if !sym.name.is_empty() => {
                    table.add(profile, sym_frames(sym, FrameKind::Kernel), None)
                }
                _ => table.add(
                    profile,
                    vec![Frame::new(UNKNOWN, FrameKind::Kernel)],
                    Some(UnresolvedReason::Kernel),
                ),
            };
            names.insert(a, entry);
        }
        names
    }

    /// Names every distinct (process, address) of the user stacks of `raw`.
    fn user_frames(
        &self,
        raw: &[RawStack],
        profile: &mut Profile,
        table: &mut Table,
        hasher: AddrHashBuilder,
    ) -> UserNames {
        // Each distinct (pid, address) gets a slot; each frame of `raw`
        // records its slot, so that stacks are later assembled without a
        // second lookup per frame.
        let mut slots_of: HashMap<u32, AddrMap<u32>> = HashMap::new();
        let mut slot_keys: Vec<(u32, u64)> = Vec::new();
        let mut frame_slots = Vec::with_capacity(raw.iter().map(|r| r.user.len()).sum());
        for r in raw.iter().filter(|r| !r.user.is_empty()) {
            let slots = slots_of
                .entry(r.pid)
                .or_insert_with(|| AddrMap::with_hasher(hasher));
            for a in adjusted(&r.user) {
                let slot = *slots.entry(a).or_insert_with(|| {
                    slot_keys.push((r.pid, a));
                    (slot_keys.len() - 1) as u32
                });
                frame_slots.push(slot);
            }
        }
        drop(slots_of);

        // Where each address lives; each binary's offsets gathered from
        // every process that maps it.
        let targets: Vec<Target> = slot_keys
            .iter()
            .map(|&(pid, addr)| self.locate(pid, addr))
            .collect();
        let mut wanted: HashMap<BinaryId, Vec<u64>> = HashMap::new();
        let mut vdso_offsets = Vec::new();
        for t in &targets {
            match *t {
                Target::Binary(b, off) => wanted.entry(b).or_default().push(off),
                Target::Vdso(off) => vdso_offsets.push(off),
                _ => {}
            }
        }
        let mut by_offset: AddrMap<u32> = AddrMap::with_hasher(hasher);
        for (b, offsets) in wanted {
            let offsets = unique(offsets);
            let named = self.symbolize_binary(&self.binaries[b], &offsets);
            for (off, (frames, unresolved)) in offsets.into_iter().zip(named) {
                by_offset.insert(binary_key(b, off), table.add(profile, frames, unresolved));
            }
        }
        let vdso_offsets = unique(vdso_offsets);
        let mut vdso: AddrMap<u32> = AddrMap::with_hasher(hasher);
        for (off, (frames, unresolved)) in vdso_offsets
            .iter()
            .copied()
            .zip(self.symbolize_vdso(&vdso_offsets))
        {
            vdso.insert(off, table.add(profile, frames, unresolved));
        }

        let mut perf_maps: HashMap<u32, Option<perf_map::PerfMap>> = HashMap::new();
        let entries = slot_keys
            .iter()
            .zip(targets)
            .map(|(&(pid, addr), target)| match target {
                Target::Binary(b, off) => by_offset[&binary_key(b, off)],
                Target::Vdso(off) => vdso[&off],
                Target::Gone => table.unknown(profile, UnresolvedReason::ProcessGone),
                Target::Jit | Target::Unmapped => {
                    let map = perf_maps.entry(pid).or_insert_with(|| self.perf_map(pid));
                    match map.as_ref().map(|m| m.find(addr)) {
                        Some(Some(name)) => table.jit(profile, name),
                        Some(None) if matches!(target, Target::Jit) => {
                            table.unknown(profile, UnresolvedReason::NotInPerfMap)
                        }
                        None if matches!(target, Target::Jit) => {
                            table.unknown(profile, UnresolvedReason::JitWithoutPerfMap)
                        }
                        _ => table.unknown(profile, UnresolvedReason::Unmapped),
                    }
                }
            })
            .collect();
        UserNames {
            frame_slots,
            entries,
        }
    }

    fn locate(&self, pid: u32, addr: u64) -> Target {
        let Some(proc) = self.procs.get(&pid) else {
            return Target::Gone;
        };
        let i = proc.vmas.partition_point(|v| v.start <= addr);
        let Some(vma) = i.checked_sub(1).map(|i| &proc.vmas[i]) else {
            return Target::Unmapped;
        };
        if addr >= vma.end {
            return Target::Unmapped;
        }
        match vma.region {
            Region::File(b) => Target::Binary(b, addr - vma.start + vma.offset),
            Region::Anon => Target::Jit,
            Region::Vdso => Target::Vdso(addr - vma.start),
        }
    }

    /// Names `offsets` (file offsets) of one binary: from its separate
    /// debug file first when there is one, then from the binary itself.
    fn symbolize_binary(&self, bin: &Binary, offsets: &[u64]) -> Vec<Resolution> {
        let mut out: Vec<Option<Vec<Frame>>> = vec![None; offsets.len()];
        let path = bin.path();
        if let Some(path) = &path {
            match &bin.elf {
                Some(elf) => {
                    let virt: Vec<Option<u64>> = offsets.iter().map(|&o| elf.virt(o)).collect();
                    if let Some(debug) = &bin.debug {
                        self.fill(&mut out, &virt, &fd_path(debug), true);
                    }
                    self.fill(&mut out, &virt, path, true);
                }
                None => {
                    // Not an ELF layout fgbpf reads: let blazesym map the
                    // offsets itself.
                    let src = Source::Elf(Elf::new(path.clone()));
                    if let Ok(syms) = self.blazesym.symbolize(&src, Input::FileOffset(offsets)) {
                        for (slot, sym) in out.iter_mut().zip(&syms) {
                            *slot = named_sym(sym, FrameKind::User);
                        }
                    }
                }
            }
        }
        // Unnamed code is named by where its function starts, so that one
        // function of a stripped binary stays one frame.
        let starts = match (&bin.elf, &bin.file) {
            (Some(elf), Some(file)) if out.iter().any(Option::is_none) => elf.function_starts(file),
            _ => Vec::new(),
        };
        let function_offset = |off: u64| -> u64 {
            let Some(elf) = &bin.elf else { return off };
            let Some(virt) = elf.virt(off) else {
                return off;
            };
            let i = starts.partition_point(|&s| s <= virt);
            i.checked_sub(1)
                .and_then(|i| elf.file_offset(starts[i]))
                .unwrap_or(off)
        };
        out.into_iter()
            .zip(offsets)
            .map(|(frames, &off)| match frames {
                Some(frames) => (frames, None),
                None => {
                    let off = function_offset(off);
                    let reason = if path.is_some() {
                        UnresolvedReason::NoSymbols {
                            module: bin.name.clone(),
                        }
                    } else {
                        UnresolvedReason::Unreadable {
                            module: bin.name.clone(),
                        }
                    };
                    (
                        vec![Frame::new(
                            format!("{}+{off:#x}", bin.name),
                            FrameKind::User,
                        )],
                        Some(reason),
                    )
                }
            })
            .collect()
    }

    /// Names the still unnamed entries of `out` from the ELF file at
    /// `path`, given their virtual addresses in it.
    fn fill(&self, out: &mut [Option<Vec<Frame>>], virt: &[Option<u64>], path: &Path, debug: bool) {
        let todo: Vec<usize> = (0..out.len())
            .filter(|&i| out[i].is_none() && virt[i].is_some())
            .collect();
        if todo.is_empty() {
            return;
        }
        let addrs: Vec<u64> = todo.iter().map(|&i| virt[i].unwrap_or(0)).collect();
        let mut src = Elf::new(path);
        src.debug_syms = debug;
        match self
            .blazesym
            .symbolize(&Source::Elf(src), Input::VirtOffset(&addrs))
        {
            Ok(syms) => {
                for (&i, sym) in todo.iter().zip(&syms) {
                    out[i] = named_sym(sym, FrameKind::User);
                }
            }
            // A broken debug link or unreadable DWARF: the ELF symbols
            // alone may still name these.
            Err(_) if debug => self.fill(out, virt, path, false),
            Err(_) => {}
        }
    }

    fn symbolize_vdso(&self, offsets: &[u64]) -> Vec<Resolution> {
        let unknown = |off: u64| {
            (
                vec![Frame::new(format!("[vdso]+{off:#x}"), FrameKind::User)],
                Some(UnresolvedReason::NoSymbols {
                    module: "[vdso]".into(),
                }),
            )
        };
        let Some(own) = &self.own_vdso else {
            return offsets.iter().map(|&o| unknown(o)).collect();
        };
        let addrs: Vec<u64> = offsets.iter().map(|&o| own.start + o).collect();
        let src = Source::Process(Process::new(Pid::Slf));
        let syms = self
            .blazesym
            .symbolize(&src, Input::AbsAddr(&addrs))
            .unwrap_or_default();
        offsets
            .iter()
            .enumerate()
            .map(
                |(i, &off)| match syms.get(i).and_then(|s| named_sym(s, FrameKind::User)) {
                    Some(frames) => (frames, None),
                    None => unknown(off),
                },
            )
            .collect()
    }

    /// The process's perf map, read now: JIT runtimes append to it for as
    /// long as they run. Read inside the process's own root, through the
    /// descriptor kept on it, so it is found in containers and after exit.
    fn perf_map(&self, pid: u32) -> Option<perf_map::PerfMap> {
        let proc = self.procs.get(&pid)?;
        let path = match &proc.perf_map {
            Some(file) => fd_path(file),
            None => {
                let rel = format!("tmp/perf-{}.map", proc.ns_pid);
                match proc.root {
                    Some(root) => fd_path(&self.roots[root]).join(rel),
                    None => Path::new("/").join(rel),
                }
            }
        };
        let text = fs::read(path).ok()?;
        Some(perf_map::PerfMap::parse(&text))
    }

    /// Reads `pid`'s memory map and whatever it references that is not
    /// held yet; false when the process is gone.
    fn read_process(&mut self, pid: u32) -> bool {
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return false;
        };
        // A zombie keeps its /proc entry but has no address space left.
        if maps.is_empty() {
            return false;
        }
        let root = self.root_of(pid);
        let ns_pid = ns_pid(pid).unwrap_or(pid);
        let size = vsize(pid).unwrap_or(0);
        let mut vmas = Vec::new();
        for line in maps.lines() {
            let Some(m) = maps_line(line) else { continue };
            let region = match m.path {
                "[vdso]" => Region::Vdso,
                p if is_anon(p) => Region::Anon,
                p if p.starts_with('/') && m.exec && m.inode != 0 => {
                    Region::File(self.binary(pid, &m, root))
                }
                _ => continue,
            };
            vmas.push(Vma {
                start: m.start,
                end: m.end,
                offset: m.offset,
                region,
            });
        }
        let mut perf_map = None;
        if let Some(old) = self.procs.remove(&pid) {
            perf_map = old.perf_map;
            // Mappings gone since the last read still name the stacks
            // taken before (a library unloaded, the image before execve).
            for v in old.vmas {
                let i = vmas.partition_point(|n: &Vma| n.end <= v.start);
                if vmas.get(i).is_none_or(|n| n.start >= v.end) {
                    vmas.insert(i, v);
                }
            }
        }
        if perf_map.is_none() {
            perf_map = File::open(format!("/proc/{pid}/root/tmp/perf-{ns_pid}.map")).ok();
        }
        self.procs.insert(
            pid,
            Proc {
                vmas,
                ns_pid,
                root,
                perf_map,
                vsize: size,
                alive: true,
            },
        );
        true
    }

    /// The binary behind an executable mapping, opened on first sight.
    fn binary(&mut self, pid: u32, m: &MapsLine<'_>, root: Option<RootId>) -> BinaryId {
        let maps_key = (m.dev, m.inode);
        if let Some(&b) = self.by_maps_key.get(&maps_key) {
            return b;
        }
        let path = m.path.strip_suffix(" (deleted)").unwrap_or(m.path);
        let root_path = root.map(|r| fd_path(&self.roots[r]));
        // map_files reaches the very file mapped, deleted or not, whatever
        // mount namespace it lives in; the paths are for kernels or
        // privileges that refuse it.
        let in_root = match &root_path {
            Some(r) => r.join(path.trim_start_matches('/')),
            None => PathBuf::from(path),
        };
        let opened = File::open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
            .or_else(|_| File::open(format!("/proc/{pid}/root{path}")))
            .or_else(|_| File::open(&in_root));
        let name = Path::new(path)
            .file_name()
            .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
        let file = opened.ok();
        let key = file.as_ref().and_then(FileKey::of);
        if let Some(b) = key.and_then(|k| self.by_file_key.get(&k).copied()) {
            self.by_maps_key.insert(maps_key, b);
            return b;
        }
        let elf = file.as_ref().and_then(elf::ElfInfo::read);
        let debug = match (&elf, &file) {
            (Some(info), Some(_)) if !info.has_dwarf => {
                self.find_debug_file(info, path, root_path.as_deref(), key)
            }
            _ => None,
        };
        // Without a descriptor, only a path that outlives the process
        // will do.
        let fallback =
            (file.is_none() && root.is_none() && path == m.path).then(|| PathBuf::from(path));
        let b = self.binaries.len();
        self.binaries.push(Binary {
            name,
            file,
            fallback,
            elf,
            debug,
        });
        self.by_maps_key.insert(maps_key, b);
        if let Some(k) = key {
            self.by_file_key.insert(k, b);
        }
        b
    }

    /// A separate debug file for a binary the process sees at `path`: by
    /// build ID, then by debuglink name next to the binary and under the
    /// debug directories, on the host and inside the process's root.
    fn find_debug_file(
        &self,
        info: &elf::ElfInfo,
        path: &str,
        root: Option<&Path>,
        own: Option<FileKey>,
    ) -> Option<File> {
        let mut dirs = self.debug_dirs.clone();
        if let Some(root) = root {
            dirs.extend(
                SYSTEM_DEBUG_DIRS
                    .iter()
                    .map(|d| root.join(d.trim_start_matches('/'))),
            );
        }
        let mut candidates: Vec<(PathBuf, Option<u32>)> = Vec::new();
        if let Some(id) = info.build_id.as_deref().filter(|id| id.len() >= 2) {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let rel = format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..]);
            candidates.extend(dirs.iter().map(|d| (d.join(&rel), None)));
        }
        if let Some((link, crc)) = &info.debuglink {
            let dir = Path::new(path).parent().unwrap_or(Path::new("/"));
            let rel_dir = dir.strip_prefix("/").unwrap_or(dir);
            let base = root.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
            candidates.push((base.join(rel_dir).join(link), Some(*crc)));
            candidates.push((base.join(rel_dir).join(".debug").join(link), Some(*crc)));
            candidates.extend(
                dirs.iter()
                    .map(|d| (d.join(rel_dir).join(link), Some(*crc))),
            );
        }
        candidates.into_iter().find_map(|(p, crc)| {
            let file = File::open(&p).ok()?;
            if own.is_some() && FileKey::of(&file) == own {
                return None;
            }
            let debug = elf::ElfInfo::read(&file)?;
            if !debug.has_dwarf && !debug.has_symtab {
                return None;
            }
            let matches = match (&info.build_id, &debug.build_id, crc) {
                (Some(a), Some(b), _) => a == b,
                (_, _, Some(crc)) => elf::crc32(&file) == Some(crc),
                // Found under the binary's build ID, and carries none to
                // contradict it.
                _ => true,
            };
            matches.then_some(file)
        })
    }

    /// The process's root directory when it differs from fgbpf's (another
    /// mount namespace or a chroot), held open.
    fn root_of(&mut self, pid: u32) -> Option<RootId> {
        let key = root_key(&pid.to_string())?;
        if Some(&key) == self.own_root.as_ref() {
            return None;
        }
        if let Some(&r) = self.root_ids.get(&key) {
            return Some(r);
        }
        let dir = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(format!("/proc/{pid}/root"))
            .ok()?;
        let r = self.roots.len();
        self.roots.push(dir);
        self.root_ids.insert(key, r);
        Some(r)
    }
}

/// One line of /proc/PID/maps.
struct MapsLine<'a> {
    start: u64,
    end: u64,
    exec: bool,
    offset: u64,
    dev: u64,
    inode: u64,
    path: &'a str,
}

fn maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start();
        let end = t.find(' ').unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        f
    };
    let (range, perms, offset, dev, inode) = (field(), field(), field(), field(), field());
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        exec: perms.as_bytes().get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev: (u64::from_str_radix(major, 16).ok()? << 32) | u64::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
        path: rest.trim_start(),
    })
}

/// Mappings JIT compilers put code in: anonymous memory, named or not,
/// and memory-backed files.
fn is_anon(path: &str) -> bool {
    path.is_empty()
        || path.starts_with("[anon")
        || path == "[heap]"
        || path.starts_with("/memfd:")
        || path.starts_with("/dev/zero")
}

/// The namespace-independent identity of a process's root: its mount
/// namespace and root directory.
fn root_key(pid: &str) -> Option<(String, u64, u64)> {
    let ns = fs::read_link(format!("/proc/{pid}/ns/mnt")).ok()?;
    let m = fs::metadata(format!("/proc/{pid}/root/")).ok()?;
    Some((ns.to_string_lossy().into_owned(), m.dev(), m.ino()))
}

/// Virtual memory size, from /proc/PID/stat: far cheaper to read than the
/// memory map.
fn vsize(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name, in parentheses, may hold spaces: count fields after it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(20)?.parse().ok()
}

/// The PID the process sees itself as (innermost PID namespace).
fn ns_pid(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NStgid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

fn own_vdso() -> Option<Range<u64>> {
    let maps = fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(maps_line)
        .find(|m| m.path == "[vdso]")
        .map(|m| m.start..m.end)
}

/// Binaries are held open for the whole capture, one descriptor each (two
/// once parsed): a busy host maps more distinct files than the usual soft
/// limit of 1024.
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid, initialized struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn fd_path(file: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// The user frames of a capture, named: each frame's slot (in the order
/// of the stacks and their frames, leaf first), and each slot's entry in
/// the [`Table`].
struct UserNames {
    frame_slots: Vec<u32>,
    entries: Vec<u32>,
}

/// An entry of [`Table`] not filled in yet.
const UNNAMED: u32 = u32::MAX;

/// What distinct addresses were named: each entry a run of interned frames
/// (root first) and, when unnamed, why. Entries are few (one per distinct
/// binary offset, JIT symbol or reason) and contiguous, so that the
/// millions of frame lookups of a large capture stay in cache.
#[derive(Default)]
struct Table {
    frames: Vec<FrameId>,
    entries: Vec<(u32, u32, Option<UnresolvedReason>)>,
    unknown: HashMap<UnresolvedReason, u32>,
    jit: HashMap<String, u32>,
}

impl Table {
    fn add(
        &mut self,
        profile: &mut Profile,
        frames: Vec<Frame>,
        why: Option<UnresolvedReason>,
    ) -> u32 {
        let start = self.frames.len() as u32;
        self.frames
            .extend(frames.into_iter().map(|f| profile.intern_frame(f)));
        self.entries
            .push((start, self.frames.len() as u32 - start, why));
        (self.entries.len() - 1) as u32
    }

    fn unknown(&mut self, profile: &mut Profile, why: UnresolvedReason) -> u32 {
        if let Some(&e) = self.unknown.get(&why) {
            return e;
        }
        let e = self.add(
            profile,
            vec![Frame::new(UNKNOWN, FrameKind::User)],
            Some(why.clone()),
        );
        self.unknown.insert(why, e);
        e
    }

    fn jit(&mut self, profile: &mut Profile, name: &str) -> u32 {
        if let Some(&e) = self.jit.get(name) {
            return e;
        }
        let e = self.add(profile, vec![Frame::new(name, FrameKind::Jit)], None);
        self.jit.insert(name.to_string(), e);
        e
    }

    fn frames(&self, entry: u32) -> &[FrameId] {
        let (start, len, _) = self.entries[entry as usize];
        &self.frames[start as usize..(start + len) as usize]
    }

    fn unresolved(&self, entry: u32) -> Option<&UnresolvedReason> {
        self.entries[entry as usize].2.as_ref()
    }
}

/// One key for a binary and an offset in it: offsets stay far below 2^48.
fn binary_key(b: BinaryId, off: u64) -> u64 {
    ((b as u64) << 48) ^ off
}

/// Maps keyed by address, looked up millions of times per capture: SipHash
/// would cost more than the lookups themselves. Keyed with a random seed
/// and fully mixed, since the addresses come from the profiled processes'
/// stacks, which they control.
type AddrMap<V> = HashMap<u64, V, AddrHashBuilder>;

#[derive(Clone, Copy)]
struct AddrHashBuilder(u64);

impl AddrHashBuilder {
    fn new() -> Self {
        AddrHashBuilder(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64))
    }
}

impl BuildHasher for AddrHashBuilder {
    type Hasher = AddrHasher;
    fn build_hasher(&self) -> AddrHasher {
        AddrHasher(self.0)
    }
}

struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, n: u64) {
        // The splitmix64 finalizer: every input bit reaches every output bit.
        let mut z = self.0 ^ n;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.0 = z ^ (z >> 31);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn named_sym(sym: &Symbolized<'_>, kind: FrameKind) -> Option<Vec<Frame>> {
    match sym {
        Symbolized::Sym(sym) if !sym.name.is_empty() => Some(sym_frames(sym, kind)),
        _ => None,
    }
}

fn unresolved_list(
    accounts: HashMap<u32, HashMap<UnresolvedReason, u64>>,
    names: &HashMap<u32, String>,
) -> Vec<Unresolved> {
    let mut list: Vec<Unresolved> = accounts
        .into_iter()
        .map(|(pid, reasons)| {
            let mut reasons: Vec<(UnresolvedReason, u64)> = reasons.into_iter().collect();
            reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            Unresolved {
                pid,
                process: names.get(&pid).cloned().unwrap_or_default(),
                reasons,
            }
        })
        .collect();
    list.sort_by(|a, b| b.weight().cmp(&a.weight()).then_with(|| a.pid.cmp(&b.pid)));
    list
}

/// Return addresses point after the call; step back into the call
/// instruction so callers resolve to the calling function and line.
fn caller_adjusted(ip: u64, index_from_leaf: usize) -> u64 {
    if index_from_leaf == 0 {
        ip
    } else {
        ip.saturating_sub(1)
    }
}

fn adjusted(ips: &[u64]) -> impl Iterator<Item = u64> + '_ {
    ips.iter()
        .enumerate()
        .map(|(i, &ip)| caller_adjusted(ip, i))
}

fn unique(addrs: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut v: Vec<u64> = addrs.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The frames for one address, root first: the function, then the
/// functions inlined into it at that address.
fn sym_frames(sym: &Sym<'_>, kind: FrameKind) -> Vec<Frame> {
    let mut frames = vec![Frame::new(sym.name.to_string(), kind)];
    let inline_kind = if kind == FrameKind::Kernel {
        FrameKind::Kernel
    } else {
        FrameKind::Inlined
    };
    frames.extend(
        sym.inlined
            .iter()
            .map(|f| Frame::new(f.name.to_string(), inline_kind)),
    );
    frames
}

/// Perf maps (`/tmp/perf-PID.map`): one `START SIZE NAME` line per piece
/// of JIT code, in hex, appended as the runtime compiles.
mod perf_map {
    pub struct PerfMap {
        /// (start, end, name), sorted by start.
        entries: Vec<(u64, u64, String)>,
    }

    /// How far back a lookup looks for an entry still covering an
    /// address past closer starts (code regions nest rarely and shallowly).
    const LOOKBACK: usize = 8;

    impl PerfMap {
        pub fn parse(text: &[u8]) -> PerfMap {
            let text = String::from_utf8_lossy(text);
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let mut entries: Vec<(u64, u64, usize, String)> = text
                .lines()
                .enumerate()
                .filter_map(|(n, line)| {
                    let mut parts = line.splitn(3, ' ');
                    let start = hex(parts.next()?)?;
                    let size = hex(parts.next()?)?;
                    let name = parts.next()?.trim();
                    (!name.is_empty()).then(|| {
                        (
                            start,
                            start.saturating_add(size.max(1)),
                            n,
                            name.to_string(),
                        )
                    })
                })
                .collect();
            // Code moves and address ranges get reused: for one start the
            // line written last describes what is there now.
            entries.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
            let mut dedup: Vec<(u64, u64, String)> = Vec::with_capacity(entries.len());
            for (start, end, _, name) in entries {
                match dedup.last_mut() {
                    Some(last) if last.0 == start => *last = (start, end, name),
                    _ => dedup.push((start, end, name)),
                }
            }
            PerfMap { entries: dedup }
        }

        pub fn find(&self, addr: u64) -> Option<&str> {
            let i = self.entries.partition_point(|e| e.0 <= addr);
            self.entries[..i]
                .iter()
                .rev()
                .take(LOOKBACK)
                .find(|e| addr < e.1)
                .map(|e| e.2.as_str())
        }
    }
}

/// Just enough of ELF64 (little-endian) to map file offsets to the
/// addresses symbols use, and to find and check separate debug files.
mod elf {
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    pub struct ElfInfo {
        /// PT_LOAD segments: (file offset, file size, virtual address).
        loads: Vec<(u64, u64, u64)>,
        pub build_id: Option<Vec<u8>>,
        /// `.gnu_debuglink`: the debug file's name and CRC32.
        pub debuglink: Option<(String, u32)>,
        /// PT_GNU_EH_FRAME: (file offset, size, virtual address).
        eh_frame_hdr: Option<(u64, u64, u64)>,
        pub has_symtab: bool,
        pub has_dwarf: bool,
    }

    const PT_LOAD: u32 = 1;
    const PT_NOTE: u32 = 4;
    const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
    const SHT_SYMTAB: u32 = 2;
    const SHT_NOTE: u32 = 7;
    const SHT_NOBITS: u32 = 8;
    const NT_GNU_BUILD_ID: u32 = 3;
    /// Bounds on header tables and notes read, against corrupt files.
    const MAX_TABLE: u64 = 1 << 20;
    /// Bound on an unwind table's search index (8 bytes per function).
    const MAX_EH_FRAME_HDR: u64 = 64 << 20;

    fn u16_at(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes([b[at], b[at + 1]])
    }
    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
    }

    fn read_at(file: &File, offset: u64, len: u64) -> Option<Vec<u8>> {
        read_bounded(file, offset, len, MAX_TABLE)
    }

    fn read_bounded(file: &File, offset: u64, len: u64, max: u64) -> Option<Vec<u8>> {
        if len > max {
            return None;
        }
        let mut buf = vec![0; len as usize];
        file.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
    }

    impl ElfInfo {
        pub fn read(file: &File) -> Option<ElfInfo> {
            let eh = read_at(file, 0, 64)?;
            if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
                return None;
            }
            let (phoff, shoff) = (u64_at(&eh, 0x20), u64_at(&eh, 0x28));
            let (phentsize, phnum) = (u16_at(&eh, 0x36) as u64, u16_at(&eh, 0x38) as u64);
            let (shentsize, shnum) = (u16_at(&eh, 0x3a) as u64, u16_at(&eh, 0x3c) as u64);
            let shstrndx = u16_at(&eh, 0x3e) as u64;
            let mut info = ElfInfo {
                loads: Vec::new(),
                build_id: None,
                debuglink: None,
                eh_frame_hdr: None,
                has_symtab: false,
                has_dwarf: false,
            };
            let mut note_segments = Vec::new();
            if phnum > 0 && phentsize >= 56 {
                let table = read_at(file, phoff, phentsize * phnum)?;
                for ph in table.chunks_exact(phentsize as usize) {
                    let (offset, vaddr, filesz) = (u64_at(ph, 8), u64_at(ph, 16), u64_at(ph, 32));
                    match u32_at(ph, 0) {
                        PT_LOAD => info.loads.push((offset, filesz, vaddr)),
                        PT_NOTE => note_segments.push((offset, filesz)),
                        PT_GNU_EH_FRAME => info.eh_frame_hdr = Some((offset, filesz, vaddr)),
                        _ => {}
                    }
                }
            }
            if shnum > 0 && shentsize >= 64 && shstrndx < shnum {
                let table = read_at(file, shoff, shentsize * shnum)?;
                let sh = |i: u64| &table[(i * shentsize) as usize..][..64];
                let strtab = sh(shstrndx);
                let names =
                    read_at(file, u64_at(strtab, 24), u64_at(strtab, 32)).unwrap_or_default();
                for i in 0..shnum {
                    let s = sh(i);
                    let name_at = u32_at(s, 0) as usize;
                    let name = names
                        .get(name_at..)
                        .and_then(|n| n.split(|&b| b == 0).next())
                        .unwrap_or_default();
                    let (kind, offset, size) = (u32_at(s, 4), u64_at(s, 24), u64_at(s, 32));
                    let stored = kind != SHT_NOBITS && size > 0;
                    match name {
                        b".debug_info" | b".zdebug_info" if stored => info.has_dwarf = true,
                        b".symtab" if kind == SHT_SYMTAB && size > 0 => info.has_symtab = true,
                        b".gnu_debuglink" if stored => {
                            info.debuglink =
                                read_at(file, offset, size).and_then(|d| debuglink(&d));
                        }
                        _ if kind == SHT_NOTE && stored && info.build_id.is_none() => {
                            info.build_id = read_at(file, offset, size).and_then(|d| build_id(&d));
                        }
                        _ => {}
                    }
                }
            }
            for (offset, size) in note_segments {
                if info.build_id.is_some() {
                    break;
                }
                info.build_id = read_at(file, offset, size).and_then(|d| build_id(&d));
            }
            Some(info)
        }

        /// The virtual address the byte at `offset` of the file is loaded
        /// at, as symbol tables and DWARF give addresses.
        pub fn virt(&self, offset: u64) -> Option<u64> {
            self.loads
                .iter()
                .find(|&&(off, size, _)| offset >= off && offset - off < size)
                .map(|&(off, _, vaddr)| offset - off + vaddr)
        }

        /// The file offset of the byte loaded at virtual address `virt`.
        pub fn file_offset(&self, virt: u64) -> Option<u64> {
            self.loads
                .iter()
                .find(|&&(_, size, vaddr)| virt >= vaddr && virt - vaddr < size)
                .map(|&(off, _, vaddr)| virt - vaddr + off)
        }

        /// Start addresses of the functions the unwind tables describe,
        /// sorted: stripped binaries keep them, which tells where the
        /// function holding an address begins.
        pub fn function_starts(&self, file: &File) -> Vec<u64> {
            let Some((offset, size, vaddr)) = self.eh_frame_hdr else {
                return Vec::new();
            };
            let Some(hdr) = read_bounded(file, offset, size, MAX_EH_FRAME_HDR) else {
                return Vec::new();
            };
            let mut starts = eh_frame_hdr_starts(&hdr, vaddr).unwrap_or_default();
            starts.sort_unstable();
            starts
        }
    }

    /// Size of a fixed-size DWARF pointer encoding (`DW_EH_PE_*`).
    fn encoded_size(enc: u8) -> Option<usize> {
        match enc & 0x0f {
            0x02 | 0x0a => Some(2),
            0x03 | 0x0b => Some(4),
            0x04 | 0x0c => Some(8),
            _ => None,
        }
    }

    /// The binary search table of `.eh_frame_hdr`, in the only encoding
    /// linkers emit for it: 4-byte signed offsets from the header.
    fn eh_frame_hdr_starts(hdr: &[u8], hdr_vaddr: u64) -> Option<Vec<u64>> {
        const UDATA4: u8 = 0x03;
        const DATAREL_SDATA4: u8 = 0x3b;
        let (version, ptr_enc, count_enc, table_enc) = (*hdr.first()?, hdr[1], hdr[2], hdr[3]);
        if version != 1 || count_enc != UDATA4 || table_enc != DATAREL_SDATA4 {
            return None;
        }
        let count_at = 4 + encoded_size(ptr_enc)?;
        let count = u32_at(hdr.get(..count_at + 4)?, count_at) as usize;
        let table = hdr.get(count_at + 4..)?.get(..count.checked_mul(8)?)?;
        Some(
            table
                .chunks_exact(8)
                .map(|e| {
                    hdr_vaddr.wrapping_add_signed(i32::from_le_bytes(
                        e[..4].try_into().expect("4 bytes"),
                    ) as i64)
                })
                .collect(),
        )
    }

    fn build_id(notes: &[u8]) -> Option<Vec<u8>> {
        let mut at = 0;
        let align = |n: usize| n.div_ceil(4) * 4;
        while at + 12 <= notes.len() {
            let namesz = u32_at(notes, at) as usize;
            let descsz = u32_at(notes, at + 4) as usize;
            let kind = u32_at(notes, at + 8);
            let name_at = at + 12;
            let desc_at = name_at.checked_add(align(namesz))?;
            let next = desc_at.checked_add(align(descsz))?;
            if desc_at + descsz > notes.len() {
                return None;
            }
            if kind == NT_GNU_BUILD_ID && &notes[name_at..name_at + namesz] == b"GNU\0" {
                return Some(notes[desc_at..desc_at + descsz].to_vec());
            }
            at = next;
        }
        None
    }

    fn debuglink(data: &[u8]) -> Option<(String, u32)> {
        let end = data.iter().position(|&b| b == 0)?;
        let name = std::str::from_utf8(&data[..end]).ok()?;
        let crc_at = (end + 1).div_ceil(4) * 4;
        let crc = u32::from_le_bytes(data.get(crc_at..crc_at + 4)?.try_into().ok()?);
        (!name.is_empty() && !name.contains('/')).then(|| (name.to_string(), crc))
    }

    /// The CRC32 a debuglink records: of the whole debug file.
    pub fn crc32(file: &File) -> Option<u32> {
        let table: Vec<u32> = (0..256u32)
            .map(|n| {
                (0..8).fold(n, |c, _| {
                    if c & 1 != 0 {
                        0xEDB8_8320 ^ (c >> 1)
                    } else {
                        c >> 1
                    }
                })
            })
            .collect();
        let mut crc = !0u32;
        let mut buf = vec![0u8; 1 << 16];
        // Positional reads: the descriptor's offset is shared.
        let mut pos = 0u64;
        loop {
            let n = file.read_at(&mut buf, pos).ok()?;
            if n == 0 {
                break;
            }
            pos += n as u64;
            for &b in &buf[..n] {
                crc = table[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
            }
        }
        Some(!crc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_step_back_into_the_call() {
        let v: Vec<u64> = adjusted(&[0x1000, 0x2000, 0x3000]).collect();
        assert_eq!(v, vec![0x1000, 0x1fff, 0x2fff]);
    }

    #[test]
    fn maps_lines_parse_with_spaces_and_deleted_files() {
        let m =
            maps_line("7f00-7f80 r-xp 00001000 fd:01 1234   /opt/my app/bin (deleted)").unwrap();
        assert_eq!(
            (m.start, m.end, m.offset, m.inode),
            (0x7f00, 0x7f80, 0x1000, 1234)
        );
        assert!(m.exec);
        assert_eq!(m.dev, (0xfd << 32) | 1);
        assert_eq!(m.path, "/opt/my app/bin (deleted)");
        let anon = maps_line("7f00-7f80 rw-p 00000000 00:00 0").unwrap();
        assert!(!anon.exec && is_anon(anon.path));
        assert!(!is_anon("[stack]") && is_anon("[anon:v8]"));
    }

    #[test]
    fn perf_map_last_line_wins_and_sizes_bound() {
        let m = perf_map::PerfMap::parse(
            b"1000 100 old\n2000 10 JS:*hot /x.js:1\n1000 80 LazyCompile:new\n0x3000 0x20 py::f:/a.py\nbad line\n",
        );
        assert_eq!(m.find(0x1010), Some("LazyCompile:new"));
        assert_eq!(m.find(0x1090), None);
        assert_eq!(m.find(0x200f), Some("JS:*hot /x.js:1"));
        assert_eq!(m.find(0x2010), None);
        assert_eq!(m.find(0x3010), Some("py::f:/a.py"));
        assert_eq!(m.find(0x10), None);
    }

    #[test]
    fn own_binary_reads_as_elf_with_build_id_and_symbols() {
        let exe = File::open("/proc/self/exe").unwrap();
        let info = elf::ElfInfo::read(&exe).unwrap();
        assert!(info.has_symtab);
        let addr = own_function_marker as *const () as usize as u64;
        // The file offset of a function maps back to its link-time address.
        let maps = fs::read_to_string("/proc/self/maps").unwrap();
        let m = maps
            .lines()
            .filter_map(maps_line)
            .find(|m| m.start <= addr && addr < m.end)
            .unwrap();
        let off = addr - m.start + m.offset;
        let virt = info.virt(off).unwrap();
        assert_eq!(virt & 0xfff, addr & 0xfff);
    }

    #[inline(never)]
    fn own_function_marker() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn crc32_matches_the_reference_value() {
        let dir = std::env::temp_dir().join(format!("fgbpf-crc-{}", std::process::id()));
        fs::write(&dir, b"123456789").unwrap();
        let crc = elf::crc32(&File::open(&dir).unwrap());
        fs::remove_file(&dir).unwrap();
        assert_eq!(crc, Some(0xCBF4_3926));
    }

    #[test]
    fn symbolizes_own_function_through_pid() {
        // A frame of this test binary, named exactly as a capture names a
        // target's frames: remembered, then symbolized.
        let addr = symbolizes_own_function_through_pid as *const () as usize as u64;
        let pid = std::process::id();
        let mut s = Symbolizer::new(&Options::default());
        s.remember(pid, "self");
        let raw = RawStack {
            pid,
            tid: pid,
            comm: "self".into(),
            user: vec![addr, 0x10],
            weight: 3,
            ..Default::default()
        };
        let p = s.profile(&[raw], Unit::Samples);
        let names: Vec<String> = p.stacks()[0]
            .frames
            .iter()
            .map(|&f| p.frame(f).to_string())
            .collect();
        assert!(
            names
                .iter()
                .any(|n| n.contains("symbolizes_own_function_through_pid")),
            "{names:?}"
        );
        // The caller frame at 0x10 is in no mapping; the leaf resolved.
        assert!(p.unresolved.is_empty(), "{:?}", p.unresolved);
    }

    #[test]
    fn unknown_process_is_reported_gone() {
        let mut s = Symbolizer::new(&Options::default());
        // PIDs above pid_max never exist.
        let raw = RawStack {
            pid: 0x7fff_fff0,
            tid: 0x7fff_fff0,
            comm: "ghost".into(),
            user: vec![0x401000],
            weight: 5,
            ..Default::default()
        };
        let p = s.profile(&[raw], Unit::Samples);
        assert_eq!(p.unresolved.len(), 1);
        assert_eq!(
            p.unresolved[0].reasons,
            vec![(UnresolvedReason::ProcessGone, 5)]
        );
        assert_eq!(p.unresolved[0].process, "ghost");
    }
}
