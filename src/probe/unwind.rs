//! Unwind tables in the kernel: for each process the probe sees, its
//! executable mappings go into `proc_unwind` and the rows of their binaries
//! into `unwind_rows` (src/bpf/unwind.bpf.h), which the BPF walker reads.
//! Rows are compiled once per binary (by device and inode) by
//! [`crate::procs::unwind`] and shared by every process that maps it: one
//! libc table for the whole system. Each table comes with its page index
//! (`unwind_pages`, see [`compile::Table::pages`]), which narrows the
//! walker's search to a few rows. Both arrays are written through shared
//! memory mappings, not one syscall per entry.

use std::collections::HashMap;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::types;
use crate::procs::elf::{bias_in, exec_segments, ExecSegment};
use crate::procs::maps;
use crate::procs::unwind::{self as compile, Row};

/// Bytes the kernel gives each element of an array map: the value size
/// rounded up to 8 (struct fg_unwind_row is 12 bytes, a page entry 4).
const ROW_STRIDE: usize = 16;
const PAGE_STRIDE: usize = 8;
/// How often tracked processes are checked for new code (dlopen).
const REFRESH_EVERY: Duration = Duration::from_secs(2);
/// When a newly tracked process is read again, after its first reading.
const YOUNG_STEPS: [Duration; 3] = [
    Duration::from_millis(20),
    Duration::from_millis(100),
    Duration::from_millis(500),
];

/// Where a binary's rows are in `unwind_rows`, and its page index in
/// `unwind_pages` (`npages` + 1 entries from `pages`).
#[derive(Clone, Copy, Debug)]
struct Placed {
    first: u32,
    count: u32,
    pages: u32,
    npages: u32,
    base: u64,
}

/// Why a binary has no rows in the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoTable {
    /// No .eh_frame (or it could not be read): frame pointers only.
    NoUnwindInfo(String),
    /// The rows array is full.
    NoRoom,
}

/// What the tables cover, for the summary and the report.
#[derive(Clone, Debug, Default)]
pub struct TableStats {
    pub binaries: usize,
    pub rows: u64,
    pub capacity: u64,
    pub build_time: Duration,
    /// Binaries left to frame pointers, with why (path → reason).
    pub without: Vec<(String, NoTable)>,
    /// Processes with more executable mappings than the walker holds.
    pub mappings_dropped: u64,
}

pub(super) struct Tables {
    rows: Shared,
    pages: Shared,
    by_binary: HashMap<(u64, u64), Result<Placed, NoTable>>,
    /// The executable segments of the binaries in `by_binary` with rows:
    /// a process that maps one again is placed without opening it.
    segments: HashMap<(u64, u64), Vec<ExecSegment>>,
    /// Tracked processes: the digest of their code mappings as last read
    /// and the `gen` written for them.
    tracked: HashMap<u32, (u64, u64)>,
    /// The last `gen` given to a process's mapping list.
    generations: u64,
    /// Processes tracked lately, re-read on [`YOUNG_STEPS`]: a program
    /// maps its libraries (and dlopens its modules) as it starts, after
    /// the exec that announced it.
    young: Vec<(u32, Instant, usize)>,
    /// Processes given their parent's mappings at fork, not read since.
    inherited: std::collections::HashSet<u32>,
    last_refresh: Instant,
    stats: TableStats,
    /// `file_tables`: each binary's rows by device and inode, for the
    /// walks of processes not read yet (src/bpf/files.bpf.h).
    files: libbpf_rs::MapHandle,
    /// Binaries walks by file found, built by path (see [`Self::build_found`]).
    asked: std::collections::HashSet<(u64, u64)>,
}

/// A BPF array map (BPF_F_MMAPABLE) mapped for writing, filled from the
/// start.
struct Shared {
    ptr: *mut u8,
    len_bytes: usize,
    stride: usize,
    capacity: u32,
    used: u32,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`.
        unsafe { libc::munmap(self.ptr.cast(), self.len_bytes) };
    }
}

impl Shared {
    fn map<M: MapCore>(map: &M, stride: usize, what: &str) -> Result<Shared, String> {
        use std::os::fd::AsRawFd;
        let capacity = map.max_entries();
        let page = 4096;
        let len_bytes = (capacity as usize * stride).div_ceil(page) * page;
        // SAFETY: maps the array map's memory, shared with the kernel; the
        // length covers its entries, rounded to pages as the kernel does.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!("mapping the {what}: {}", std::io::Error::last_os_error()));
        }
        Ok(Shared {
            ptr: ptr.cast(),
            len_bytes,
            stride,
            capacity,
            used: 0,
        })
    }

    fn room(&self, n: usize) -> bool {
        n as u64 <= u64::from(self.capacity - self.used)
    }

    /// Element `i` as a `T`, if written.
    fn get<T: plain::Plain + Default>(&self, i: u32) -> Option<T> {
        let size = std::mem::size_of::<T>();
        if i >= self.used || size > self.stride {
            return None;
        }
        let mut out = T::default();
        // SAFETY: i < used <= capacity, and the mapping holds capacity
        // elements of `stride` bytes; T is plain data of `size` bytes.
        unsafe {
            let src = self.ptr.add(i as usize * self.stride);
            std::ptr::copy_nonoverlapping(src, (&mut out as *mut T).cast::<u8>(), size);
        }
        Some(out)
    }

    /// Appends `items` (each at most `stride` bytes) and returns the index
    /// of the first. The caller has checked [`Self::room`].
    fn append<T: plain::Plain>(&mut self, items: &[T]) -> u32 {
        let size = std::mem::size_of::<T>();
        assert!(size <= self.stride && self.room(items.len()));
        let first = self.used;
        for (i, item) in items.iter().enumerate() {
            // SAFETY: first + i < capacity (asserted above), and the
            // mapping holds capacity elements of `stride` bytes; T is
            // plain data of `size` bytes.
            unsafe {
                let dst = self.ptr.add((first as usize + i) * self.stride);
                std::ptr::copy_nonoverlapping((item as *const T).cast::<u8>(), dst, size);
            }
        }
        self.used += items.len() as u32;
        first
    }
}

impl Tables {
    /// Maps the loaded `unwind_rows` and `unwind_pages` arrays for writing;
    /// `files` is the loaded `file_tables`.
    pub fn new<M: MapCore>(rows: &M, pages: &M, files: libbpf_rs::MapHandle) -> Result<Self, String> {
        let rows = Shared::map(rows, ROW_STRIDE, "unwind rows")?;
        let capacity = rows.capacity;
        Ok(Tables {
            rows,
            pages: Shared::map(pages, PAGE_STRIDE, "unwind page index")?,
            by_binary: HashMap::new(),
            segments: HashMap::new(),
            tracked: HashMap::new(),
            generations: 0,
            young: Vec::new(),
            inherited: std::collections::HashSet::new(),
            last_refresh: Instant::now(),
            stats: TableStats {
                capacity: capacity as u64,
                ..Default::default()
            },
            files,
            asked: std::collections::HashSet::new(),
        })
    }

    pub fn stats(&self) -> TableStats {
        self.stats.clone()
    }

    /// The row for `pc` in mapping `m` of a process's entry, as the BPF
    /// walker finds it (tables.bpf.h, `row_of`): the last of the binary's
    /// rows at or below `pc - m.load`. None without rows there.
    pub(super) fn row_for(&self, m: &types::fg_mapping, pc: u64) -> Option<Row> {
        let rel = pc.wrapping_sub(m.load);
        if m.count == 0 || rel > u64::from(u32::MAX) {
            return None;
        }
        let rel = rel as u32;
        let (mut lo, mut hi) = (0u32, m.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let row: Row = self.rows.get(m.first.checked_add(mid)?)?;
            if row.pc <= rel {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1).and_then(|i| self.rows.get(m.first + i))
    }

    /// Gives the walker the tables of the process's executable mappings
    /// (`maps`, the text of its /proc/PID/maps), building those of binaries
    /// not seen before. True when its code mappings changed since it was
    /// last read.
    pub fn track<M: MapCore>(&mut self, pid: u32, maps: &str, procs: &M) -> bool {
        if pid == 0 {
            return false;
        }
        // Called for processes just announced or tracked: a PID reused by
        // a new process is read afresh.
        let code: Vec<MapsLine> = maps.lines().filter_map(MapsLine::parse).collect();
        let digest = digest(&code);
        if self.tracked.get(&pid).is_some_and(|&(d, _)| d == digest) {
            return false;
        }
        let mut value = types::fg_proc_unwind::default();
        let max_mappings = value.maps.len();
        let mut n = 0;
        for m in &code {
            if n == max_mappings {
                // Counted once per process read, however often it is.
                if !self.tracked.contains_key(&pid) {
                    self.stats.mappings_dropped += 1;
                }
                continue;
            }
            let (table, load) = self.table_for(pid, m);
            let entry = &mut value.maps[n];
            entry.start = m.start;
            entry.end = m.end;
            if let Some((p, load)) = table.zip(load) {
                entry.first = p.first;
                entry.count = p.count;
                entry.pages = p.pages;
                entry.npages = p.npages;
                entry.load = load;
            }
            n += 1;
        }
        value.count = n as u32;
        value.flags = 1; // FG_PROC_READ
        // Never 0, never the same twice: the walker's row cache is keyed by it.
        self.generations += 1;
        value.gen = self.generations;
        // SAFETY: fg_proc_unwind is a plain struct of integers.
        let bytes = unsafe { plain::as_bytes(&value) };
        // New code (a first read, whose libraries the loader maps after
        // it): re-read on the young schedule, unless on it already (an
        // exec starts it again: [`Tables::young_again`]; code a process
        // maps and unmaps all the time must not keep it young).
        if procs.update(&pid.to_ne_bytes(), bytes, MapFlags::ANY).is_ok() {
            self.tracked.insert(pid, (digest, value.gen));
            self.inherited.remove(&pid);
            if !self.young.iter().any(|&(p, _, _)| p == pid) {
                self.young.push((pid, Instant::now(), 0));
            }
        }
        true
    }

    /// Takes for `child`, forked from `parent` and running its image
    /// still, the walker's mappings it was given at fork (its parent's,
    /// lifecycle.bpf.h: the same, as memory is copied) as read, instead of
    /// reading its maps. False when it has none: `parent` had none then,
    /// or the child exec'd or exited since (the kernel side let go of
    /// them; written again, they would keep a new process given the PID
    /// from its parent's).
    pub fn inherit<M: MapCore>(&mut self, child: u32, parent: u32, procs: &M) -> bool {
        let Some(&(digest, parent_gen)) = self.tracked.get(&parent) else { return false };
        let key = child.to_ne_bytes();
        let Ok(Some(bytes)) = procs.lookup(&key, MapFlags::ANY) else {
            return false;
        };
        let mut value = types::fg_proc_unwind::default();
        if plain::copy_from_bytes(&mut value, &bytes).is_err() {
            return false;
        }
        // The parent's entry as last written is the one it forked with:
        // a fork between a re-read and its writing gave the child the older.
        if value.gen != parent_gen {
            return false;
        }
        value.flags |= 1; // FG_PROC_READ
        // A generation of its own, as in track.
        self.generations += 1;
        value.gen = self.generations;
        // SAFETY: fg_proc_unwind is a plain struct of integers.
        let bytes = unsafe { plain::as_bytes(&value) };
        // Only over the entry still there: not for a child gone meanwhile.
        if procs.update(&key, bytes, MapFlags::EXIST).is_err() {
            return false;
        }
        self.tracked.insert(child, (digest, value.gen));
        self.inherited.insert(child);
        true
    }

    /// `pid` exited (its last thread did, with its memory): no more
    /// re-reading it, young or not. A process given its PID later is
    /// tracked afresh. Its entry in the walker's map went at its exit
    /// (lifecycle.bpf.h), and may be a new process's already (given its
    /// parent's at fork): left alone.
    pub fn exited(&mut self, pid: u32) {
        self.inherited.remove(&pid);
        if self.tracked.remove(&pid).is_some() {
            self.young.retain(|&(p, _, _)| p != pid);
        }
    }

    /// Builds the rows of the binary at `path` ahead of any process that
    /// maps it: a command's executable is compiled before it runs, so its
    /// first instructions are walked with tables (a large binary takes
    /// longer to compile than a short command takes to run). Files that
    /// cannot be read are left to [`Self::track`], which says why.
    pub fn prebuild(&mut self, path: &std::path::Path) {
        self.build_at(path, None);
    }

    /// The rows of the regular file at `path` (when given, only if it is
    /// the binary `want`: device and inode as /proc/PID/maps shows them).
    /// Opened without blocking: a path a process gave may name a FIFO.
    fn build_at(&mut self, path: &std::path::Path, want: Option<(u64, u64)>) {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path);
        let Ok(file) = opened else { return };
        let Ok(meta) = file.metadata() else { return };
        let key = (
            (libc::major(meta.dev()) as u64) << 32 | libc::minor(meta.dev()) as u64,
            meta.ino(),
        );
        if !meta.is_file() || self.by_binary.contains_key(&key) || want.is_some_and(|w| w != key) {
            return;
        }
        let Some(data) = crate::procs::elf::map(&file) else { return };
        if let Ok(placed) = self.build(&data) {
            self.by_binary.insert(key, Ok(placed));
            let segments = self.segments.entry(key).or_insert_with(|| exec_segments(&data));
            file_placed(&self.files, key, &placed, segments);
        }
    }

    /// Builds the rows of a binary a walk by file met without them
    /// (device and inode as /proc/PID/maps shows them), from the path its
    /// program was exec'd by, when that is still the same file: the next
    /// processes of a program that exited unread are walked whole. Tried
    /// once per binary.
    pub fn build_found(&mut self, key: (u64, u64), path: &std::path::Path) {
        if !self.by_binary.contains_key(&key) && self.asked.insert(key) {
            self.build_at(path, Some(key));
        }
    }

    /// `pid` exec'd: its new image's libraries are mapped after the exec,
    /// so its re-reads start from now (a command's launcher, `chroot` or
    /// `env`, read at its entry, execs the program a moment later, whose
    /// libraries a re-read on the launcher's schedule found hundreds of
    /// milliseconds late).
    pub fn young_again(&mut self, pid: u32) {
        self.young.retain(|&(p, _, _)| p != pid);
        self.young.push((pid, Instant::now(), 0));
    }

    /// The maps of the young processes due a re-read on their schedule
    /// (which steps on), read but not tracked yet: the caller gives them
    /// to the runtimes first (finding an interpreter takes milliseconds),
    /// then to [`Tables::track`] (building a new library's rows, up to a
    /// second: an interpreter found after it missed a short script's
    /// first half).
    pub fn due(&mut self) -> Vec<(u32, String)> {
        let due: Vec<u32> = self
            .young
            .iter_mut()
            .filter(|(_, since, step)| since.elapsed() >= YOUNG_STEPS[*step])
            .map(|(pid, _, step)| {
                *step += 1;
                *pid
            })
            .collect();
        self.young.retain(|(_, _, step)| *step < YOUNG_STEPS.len());
        due.into_iter().filter_map(|pid| Some((pid, maps::read(pid)?))).collect()
    }

    /// Re-reads tracked processes now and then, for code mapped since
    /// (dlopen), and forgets those that exited. Returns those whose code
    /// mappings changed, with the maps read, so that the symbolizer reads
    /// them again too.
    pub fn refresh<M: MapCore>(&mut self, procs: &M) -> Vec<(u32, String)> {
        let mut changed = Vec::new();
        if self.last_refresh.elapsed() < REFRESH_EVERY {
            return changed;
        }
        self.last_refresh = Instant::now();
        let pids: Vec<u32> = self.tracked.keys().copied().collect();
        for pid in pids {
            if let Some(text) = maps::read(pid) {
                if self.track(pid, &text, procs) {
                    changed.push((pid, text));
                }
            } else {
                // Gone: its entry went at its exit (lifecycle.bpf.h); the
                // PID's may be a new process's already.
                self.tracked.remove(&pid);
                self.inherited.remove(&pid);
            }
        }
        changed
    }

    /// The rows of the binary mapped at `m`, and the mapping's `load`
    /// (runtime address minus table pc).
    fn table_for(&mut self, pid: u32, m: &MapsLine) -> (Option<Placed>, Option<u64>) {
        let key = (m.dev, m.inode);
        // Known already (the vDSO, device 0, is read from memory).
        match (self.by_binary.get(&key), self.segments.get(&key)) {
            (Some(Err(_)), _) if m.path != VDSO => return (None, None),
            (Some(Ok(placed)), Some(segments)) => {
                let load = bias_in(segments, m.start, m.offset).map(|b| b.wrapping_add(placed.base));
                return (Some(*placed), load);
            }
            _ => {}
        }
        let mapped;
        let data: &[u8] = if m.path == VDSO {
            // Every process maps the kernel's one vDSO image: ours.
            match own_vdso() {
                Some(v) => v,
                None => return (None, None),
            }
        } else {
            let path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let Ok(file) = File::open(&path) else {
                return (None, None);
            };
            let Some(map) = crate::procs::elf::map(&file) else {
                return (None, None);
            };
            mapped = map;
            &mapped
        };
        let placed = match self.by_binary.get(&key) {
            Some(r) => r.clone(),
            None => {
                let r = self.build(data);
                if let Err(why) = &r {
                    self.stats.without.push((m.path.clone(), why.clone()));
                }
                self.by_binary.insert(key, r.clone());
                r
            }
        };
        let Ok(placed) = placed else {
            return (None, None);
        };
        let fresh = !self.segments.contains_key(&key);
        let segments = self.segments.entry(key).or_insert_with(|| exec_segments(data));
        if fresh {
            file_placed(&self.files, key, &placed, segments);
        }
        let load = bias_in(segments, m.start, m.offset).map(|b| b.wrapping_add(placed.base));
        (Some(placed), load)
    }

    fn build(&mut self, data: &[u8]) -> Result<Placed, NoTable> {
        let started = Instant::now();
        let table = compile::compile(data).map_err(|e| NoTable::NoUnwindInfo(e.to_string()));
        self.stats.build_time += started.elapsed();
        let table = table?;
        let index = table.pages();
        if !self.rows.room(table.rows.len()) || !self.pages.room(index.len()) {
            return Err(NoTable::NoRoom);
        }
        let count = table.rows.len() as u32;
        let first = self.rows.append::<Row>(&table.rows);
        let pages = self.pages.append::<u32>(&index);
        self.stats.binaries += 1;
        self.stats.rows += count as u64;
        Ok(Placed {
            first,
            count,
            pages,
            npages: index.len() as u32 - 1,
            base: table.base,
        })
    }
}

/// An executable line of /proc/PID/maps with code the walker may meet:
/// a file, or the vDSO.
struct MapsLine {
    start: u64,
    end: u64,
    offset: u64,
    dev: u64,
    inode: u64,
    path: String,
}

impl MapsLine {
    fn parse(line: &str) -> Option<MapsLine> {
        let m = maps::parse_line(line)?;
        let file = m.inode != 0 && m.path.starts_with('/');
        if !m.exec || !(file || m.path == VDSO) {
            return None;
        }
        Some(MapsLine {
            start: m.start,
            end: m.end,
            offset: m.offset,
            dev: m.dev,
            inode: m.inode,
            path: m.path.to_string(),
        })
    }
}

const VDSO: &str = "[vdso]";

/// This process's vDSO image, which is every process's: the kernel maps
/// the same one into all of them (at different addresses).
fn own_vdso() -> Option<&'static [u8]> {
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    let range = maps::own_vdso()?;
    if range.start != base || range.end <= range.start {
        return None;
    }
    // SAFETY: the vDSO is mapped readable in this process for its whole
    // life, over `range`, and never written.
    Some(unsafe {
        std::slice::from_raw_parts(range.start as *const u8, (range.end - range.start) as usize)
    })
}

/// Writes where a binary's rows are in `file_tables`, for walks by file
/// (src/bpf/files.bpf.h): with its largest executable segment, in which a
/// mapping's offset must lie for the rows to be used. A binary whose table
/// the map has no room for is walked by frame pointers there, as one
/// without rows.
fn file_placed(files: &libbpf_rs::MapHandle, key: (u64, u64), placed: &Placed, segments: &[ExecSegment]) {
    const PAGE: u64 = 4096;
    let Some(seg) = segments.iter().max_by_key(|s| s.size) else { return };
    let value = types::fg_file_table {
        seg_lo: seg.offset & !(PAGE - 1),
        seg_hi: seg.offset.saturating_add(seg.size.max(1)),
        adjust: seg.offset.wrapping_sub(seg.vaddr).wrapping_add(placed.base),
        first: placed.first,
        count: placed.count,
        pages: placed.pages,
        npages: placed.npages,
    };
    let k = types::fg_file_key { dev: key.0, ino: key.1 };
    // SAFETY: both are plain structs of integers.
    let (k, v) = unsafe { (plain::as_bytes(&k), plain::as_bytes(&value)) };
    let _ = files.update(k, v, MapFlags::ANY);
}

fn digest(lines: &[MapsLine]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for l in lines {
        (l.start, l.end, l.offset, l.inode).hash(&mut h);
    }
    h.finish()
}
