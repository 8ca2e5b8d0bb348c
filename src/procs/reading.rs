//! Reading processes into the registry while they live: each announced
//! process's memory map (and the root and perf map it needs), a forked
//! child's taken from its parent, the re-reads of those that changed, and
//! their exits.

use std::fs::File;
use std::time::Instant;

use super::{maps, same_start, Proc, Region, Registry, RootId, Vma, REFRESH_BUDGET, REFRESH_EVERY};

impl Registry {
    /// Reads what naming `pid`'s frames (the process since `start`, as
    /// announced) will need while it lives. Call again after it execs;
    /// earlier mappings are kept where the new ones do not cover them.
    /// Gives the text of its maps it read (the walkers need it too);
    /// `None` when the process is gone.
    pub fn remember(&mut self, pid: u32, start: u32, name: &str) -> Option<String> {
        if pid == 0 {
            return None;
        }
        self.name(pid, start, name);
        self.read_maps(pid)
    }

    /// Takes what was read of `parent` for `child`, forked from it and
    /// running its image still (as the kernel tells), instead of reading
    /// the child's maps. False, for them to be read, unless `parent` was
    /// read, lives, and was as large then as the child (`size` bytes) was
    /// when announced: what the parent mapped since its last read, the
    /// child maps too but would not be named.
    /// `start`: the child's, as announced. `size` 0: taken whatever the
    /// parent mapped since, for a child whose own map of that time can no
    /// longer be read (it exec'd): code mapped since stays unnamed, the
    /// rest is named.
    pub fn inherit(&mut self, child: u32, start: u32, parent: u32, size: u64, name: &str) -> bool {
        let Some(from) = self.procs.get(&parent).filter(|p| p.alive) else {
            return false;
        };
        if child == 0 || (size != 0 && size != from.vsize) {
            return false;
        }
        let proc = Proc {
            start,
            vmas: from.vmas.clone(),
            // Asked of the child too, for a process that compiles code.
            ns_pid: from.ns_pid.map(|_| maps::ns_pid(child).unwrap_or(child)),
            root: from.root,
            root_known: from.root_known,
            perf_map: None,
            vsize: from.vsize,
            alive: true,
        };
        self.name(child, start, name);
        self.put(child, proc);
        self.inherited_count += 1;
        true
    }

    /// `pid` since `start` exited: its maps are not read again (what
    /// naming it needs is kept until [`Self::retire`]).
    pub fn exited(&mut self, pid: u32, start: u32) {
        if let Some(p) = self.procs.get_mut(&pid).filter(|p| same_start(p.start, start)) {
            p.alive = false;
        }
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
            // Another process under the PID is a change too.
            let changed = match maps::stat(pid) {
                Some(now) => self.procs.get(&pid).is_some_and(|p| p.vsize != now.vsize || !same_start(p.start, now.start)),
                None => true,
            };
            if changed && !self.read_process(pid) {
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.alive = false;
                }
            }
        }
    }

    /// Reads `pid`'s memory map and whatever it references that is not
    /// held yet; false when the process is gone.
    pub fn read_process(&mut self, pid: u32) -> bool {
        self.read_maps(pid).is_some()
    }

    /// [`Self::read_process`], giving the text of /proc/PID/maps it read.
    fn read_maps(&mut self, pid: u32) -> Option<String> {
        let text = maps::read(pid)?;
        self.read_from(pid, &text).then_some(text)
    }

    /// [`Self::read_process`] with its maps read already (`text`), as the
    /// unwind tables' re-reads do.
    pub fn read_from(&mut self, pid: u32, text: &str) -> bool {
        // A zombie keeps its /proc entry but has no address space left.
        if text.is_empty() {
            return false;
        }
        // Whose map it is: read after it, so a map read just before the
        // PID was given again is the older process's, under its start,
        // unless that one had exited by then (which its map, read then,
        // would have shown empty).
        let Some(start) = maps::stat(pid).map(|s| s.start) else {
            return false;
        };
        // Found when first needed (`root_known`).
        let mut root: Option<Option<RootId>> = None;
        let mut compiled = false;
        // What /proc/PID/stat's vsize says ([`maps::vsize`], which the
        // refresh compares with it), without reading it: the process's
        // mappings added up, [vsyscall] aside (the kernel's, in every
        // process's map but not its own memory).
        let mut size = 0u64;
        let mut vmas = Vec::new();
        for line in text.lines() {
            let Some(m) = maps::parse_line(line) else {
                continue;
            };
            if m.path != "[vsyscall]" {
                size = size.wrapping_add(m.end.wrapping_sub(m.start));
            }
            let region = match m.path {
                "[vdso]" => Region::Vdso,
                p if maps::is_anon(p) && !(m.exec && p.starts_with("/memfd:") && self.memfd_program(pid, &m)) => {
                    compiled |= m.exec;
                    Region::Anon
                }
                // A file, or a program run from memory (memfd).
                p if p.starts_with('/') && m.exec && m.inode != 0 => {
                    let b = match self.by_maps_key.get(&(m.dev, m.inode)) {
                        Some(&b) => b,
                        None => {
                            let r = match root {
                                Some(r) => r,
                                None => *root.insert(self.root_of(pid)),
                            };
                            self.open_binary(pid, &m, r)
                        }
                    };
                    Region::File(b)
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
        // A perf map names code a process compiled: one without is not
        // looked for (until a later read finds some).
        let mut ns_pid = None;
        if compiled {
            if root.is_none() {
                root = Some(self.root_of(pid));
            }
            ns_pid = Some(maps::ns_pid(pid).unwrap_or(pid));
        }
        let proc = Proc {
            start,
            vmas,
            ns_pid,
            root: root.flatten(),
            root_known: root.is_some(),
            perf_map: None,
            vsize: size,
            alive: true,
        };
        self.put(pid, proc);
        true
    }

    /// Whether the executable memory file mapped at `m` holds a program
    /// (an ELF file: what a container runtime re-executes itself from, or
    /// a program unpacked into memory) rather than a JIT's code (a
    /// double-mapped code heap: unnamed but by a perf map). Its first
    /// bytes are read once per file.
    fn memfd_program(&mut self, pid: u32, m: &maps::MapsLine<'_>) -> bool {
        use std::os::unix::fs::FileExt;
        /// Files remembered as code, at most: a process making memory
        /// files without end costs a re-check, not memory.
        const MAX_CODE: usize = 4096;
        let key = (m.dev, m.inode);
        if self.by_maps_key.contains_key(&key) {
            return true;
        }
        if self.memfd_code.contains(&key) {
            return false;
        }
        let Ok(file) = File::open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end)) else {
            return false;
        };
        let mut magic = [0u8; 4];
        if file.read_exact_at(&mut magic, 0).is_ok() && magic == *b"\x7fELF" {
            return true;
        }
        if self.memfd_code.len() >= MAX_CODE {
            self.memfd_code.clear();
        }
        self.memfd_code.insert(key);
        false
    }

    /// Holds `proc` as what is known of `pid` now, over what was: mappings
    /// gone since the last read still name the stacks taken before (a
    /// library unloaded, the image before execve), and a perf map seen
    /// stays open. What was known of another process under the PID is
    /// kept apart, for its own stacks, until it is retired.
    pub(super) fn put(&mut self, pid: u32, mut proc: Proc) {
        if let Some(r) = proc.root {
            self.root_users[r] += 1;
        }
        match self.procs.remove(&pid) {
            Some(mut old) if !same_start(old.start, proc.start) => {
                // Its own retiring lets it go.
                old.alive = false;
                self.older.insert((pid, old.start), old);
            }
            Some(old) => self.merge(old, &mut proc),
            None => {}
        }
        if let Some(ns_pid) = proc.ns_pid.filter(|_| proc.perf_map.is_none()) {
            proc.perf_map = File::open(format!("/proc/{pid}/root/tmp/perf-{ns_pid}.map")).ok();
        }
        self.procs.insert(pid, proc);
    }

    /// Takes into `proc` what was known of the same process before.
    fn merge(&mut self, old: Proc, proc: &mut Proc) {
        self.release_root(old.root);
        proc.perf_map = old.perf_map;
        proc.start = proc.start.max(old.start);
        for v in old.vmas {
            let i = proc.vmas.partition_point(|n: &Vma| n.end <= v.start);
            if proc.vmas.get(i).is_none_or(|n| n.start >= v.end) {
                proc.vmas.insert(i, v);
            }
        }
    }
}
