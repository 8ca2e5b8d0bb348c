//! The probe: fgbpf's one BPF object (`src/bpf/fgbpf.bpf.c`) and everything
//! that touches it. [`Probe::start`] opens, sizes, loads and attaches the
//! programs a capture needs; while it runs, [`Probe::tick`] drains the
//! double-buffered counts and [`Probe::poll_processes`] reads process
//! announcements; [`Probe::finish`] hands over every stack as
//! [`RawStack`](crate::profile::RawStack)s. Nothing here names a frame or builds a profile.

mod counts;
mod error;
mod losses;
mod fallback;
mod late;
mod files;
mod flight;
mod libbpf;
pub mod drain;
pub mod events;
pub mod alloc;
pub mod features;
mod force;
mod offcpu;
mod options;
mod recorded;
pub mod perf;
pub mod points;
mod processes;
mod programs;
mod read;
mod totals;
#[cfg(test)]
mod stack_depth;
mod seeds;
mod staged;
pub mod targets;
mod track;
mod unwind;
mod wakers;
mod words;

use std::time::{Duration, Instant};

use libbpf_rs::skel::OpenSkel;
use libbpf_rs::Link;

use counts::Counts;
use crate::procs::groups::Groups;
use events::ProcWatcher;
pub(crate) use libbpf::bpf_error;
use libbpf::{object_storage, quiet_libbpf, random_seed, raise_memlock};
use words::raw_state;
pub use error::CaptureError;
use crate::bpf::FgbpfSkel;
use crate::runtimes::Runtimes;

pub use seeds::SeedCounts;
pub use options::{OffcpuOptions, OncpuOptions, Options, DEFAULT_EVENTS_RING, DEFAULT_SLICE};
pub use recorded::Recorded;
pub use targets::Targets;
pub use unwind::{NoTable, TableStats};

/// The probe's counters (struct fg_stats of src/bpf/fgbpf.h), summed over
/// CPUs.
pub use crate::bpf::types::fg_stats as Stats;

/// Default entries of the stack store (distinct user and kernel stacks).
pub const DEFAULT_MAX_STACKS: u32 = 16384;
/// Default entries of each counts buffer (distinct thread + stack + state
/// keys between two drains).
pub const DEFAULT_MAX_ENTRIES: u32 = 65536;
/// Default rows of the unwind-table array (16 bytes each in the kernel, 32
/// MB in all): about 30 typical binaries (libc 28k rows, python3.11 65k),
/// or libLLVM (980k) with room to spare.
pub const DEFAULT_MAX_UNWIND_ROWS: u32 = 1 << 21;
/// How often the counts are drained while the capture runs.
pub const DRAIN_EVERY: Duration = Duration::from_secs(1);
/// Long waits held for a recorder that has not taken them.
const MAX_LONG_WAITS: usize = 1024;
/// `FG_KNOWN` of `enum fg_known` (src/bpf/fgbpf.h): a process announced with its image.
const FG_KNOWN: u8 = 1;

/// A running (or stopped) capture. Dropping it detaches and unloads
/// everything it attached.
pub struct Probe {
    // Field order is drop order: the ring buffer and links go before the
    // skeleton whose maps and programs they use.
    watcher: ProcWatcher,
    links: Vec<Link>,
    skel: FgbpfSkel<'static>,
    counts: Counts,
    tables: Option<unwind::Tables>,
    /// Why the kernel refused the table walker, when it did.
    tables_refused: Option<String>,
    /// Why the runtimes' walkers asked for were not loaded.
    walkers_refused: crate::runtimes::Refused,
    runtimes: Runtimes,
    /// A staged start's second load, still to come ([`Probe::join_walkers`]).
    pending: Option<staged::Pending>,
    /// Its programs, and when they joined, after the first load's.
    twin: Option<FgbpfSkel<'static>>,
    walkers_joined: Option<Duration>,
    /// The fallbacks taken on this kernel.
    paths: features::Paths,
    opts: Options,
    /// From the start of loading to the last program attached.
    pub attach_time: Duration,
    /// CPUs the sampler runs on (0 without the sampler).
    pub cpus: usize,
    /// When recording stopped: blocks still open are counted up to here,
    /// however long draining takes.
    stopped_at: Option<u64>,
    /// `--wait-above`'s long waits not yet taken (pid, wait).
    long_waits: Vec<(u32, events::LongWait)>,
    /// Processes announced gone by the last poll.
    exited: Vec<(u32, u32)>,
    /// The program attached to sched_switch, for what the kernel counted
    /// of it (its recursion misses).
    switch_prog: Option<std::os::fd::OwnedFd>,
    /// The stacks of the waits begun before the capture (seeds.rs).
    seeds: seeds::Seeds,
}

impl Probe {
    /// Loads the object for `paths`, then attaches it if `agree()` says
    /// so (`None` otherwise, before anything runs).
    fn start_with(
        opts: &Options,
        paths: &features::Paths,
        agree: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Self>, CaptureError> {
        let started = Instant::now();
        raise_memlock();
        quiet_libbpf();
        let mut open = paths
            .open(object_storage())
            .map_err(|e| bpf_error("opening the BPF object", e))?;
        paths.configure(&mut open)?;
        let btf = !paths.raw_tp.taken();
        let off = opts.offcpu.as_ref();
        {
            let ro = crate::bpf::rodata(&mut open);
            ro.filter_pids = opts.targets.by_pid();
            ro.filter_tids = !opts.targets.tids.is_empty();
            ro.follow_children = opts.targets.follow_children;
            ro.self_pid = std::process::id();
            ro.tick_ns = crate::procs::maps::tick_ns();
            if let Some(scope) = &opts.targets.scope {
                ro.scope_cgroup = scope.id;
                ro.scope_subsys = scope.v1_subsys.map_or(-1, |i| i as i32);
            }
            ro.group_cgroup = opts.group_cgroup;
            ro.weight_arg = opts.event_weight;
            if let Some(a) = &opts.alloc {
                ro.alloc_mean = a.mean.max(1);
                ro.alloc_exp.copy_from_slice(&alloc::exp_table());
            }
            ro.user_stacks = opts.user_stacks;
            ro.kern_stacks = opts.kernel_stacks;
            ro.stack_seed = random_seed();
            ro.slice_ns = (opts.slice.as_nanos() as u64).max(1);
            ro.include_idle = opts.oncpu.as_ref().is_some_and(|o| o.include_idle);
            if let Some(off) = off {
                ro.min_block_ns = off.min_block.as_nanos() as u64;
                ro.max_block_ns = off.max_block.map_or(u64::MAX, |d| d.as_nanos() as u64);
                ro.state_mask = off.states.iter().fold(0, |m, s| m | 1 << raw_state(*s));
                ro.sample_every = off.sample_every.max(1);
                ro.record_wakers = off.wakers;
                ro.skip_kthreads = off.skips_kernel_threads(&opts.targets);
                ro.measure_runs = opts.measures_runs();
                ro.announce_wait_ns = off.announce_wait.map_or(0, |d| (d.as_nanos() as u64).max(1));
            }
        }
        let size = |map: &mut libbpf_rs::OpenMapMut, n: u32, what: &str| {
            map.set_max_entries(n)
                .map_err(|e| bpf_error(&format!("sizing the {what} map"), e))
        };
        let (max_stacks, max_entries) = opts.map_sizes(perf::online_cpus()?.len());
        size(&mut open.maps.stacks, max_stacks, "stack")?;
        size(&mut open.maps.counts0, max_entries, "counts")?;
        size(&mut open.maps.counts1, max_entries, "counts")?;
        // The blocked threads: off-CPU only.
        size(&mut open.maps.starts, if off.is_some() { 65536 } else { 1 }, "blocked-thread")?;
        size(&mut open.maps.unwind_rows, opts.max_unwind_rows.max(1), "unwind rows")?;
        // A ring buffer's size is a power of two pages (a perf buffer's
        // is set per CPU by the reader).
        if !paths.perf_buffer.taken() {
            size(&mut open.maps.proc_events, opts.events_ring.next_power_of_two().max(4096), "process event")?;
        }
        // A table's page index has a fifth to a third as many entries as
        // it has rows (src/procs/unwind/tests.rs prints them).
        size(&mut open.maps.unwind_pages, (opts.max_unwind_rows / 2).max(1), "unwind page index")?;
        let wakers = off.is_some_and(|o| o.wakers);
        // Distinct wakers (thread and stacks) are about as many as stacks.
        size(&mut open.maps.wakers, if wakers { max_stacks } else { 1 }, "wakers")?;
        if let Some(a) = &opts.alloc {
            size(&mut open.maps.alloc_threads, 65536, "allocating-thread")?;
            size(&mut open.maps.alloc_live, a.max_live.max(1), "live-allocation")?;
        }
        let programs = programs::Programs {
            btf,
            compat: paths.compat.taken(),
            walkers: paths.compat.taken() && opts.user_stacks && opts.max_unwind_rows > 0,
            oncpu: opts.oncpu.is_some(),
            offcpu: off.is_some(),
            wakers,
            staged: false,
            seeds: off.is_some() && paths.task_iter && opts.user_stacks && !opts.targets.follow_children,
            files: paths.find_vma && !paths.compat.taken() && opts.user_stacks && opts.max_unwind_rows > 0,
            events: points::Uses::of(&opts.events),
            alloc: opts.alloc.is_some(),
        };
        programs.events.check(paths.compat.taken())?;
        // The table walker and the runtimes' walkers load second when they
        // can (staged.rs).
        let walkers = opts.runtimes_on().walkers;
        let rows = if opts.user_stacks { opts.max_unwind_rows } else { 0 };
        let pending = staged::pending(&programs, walkers, rows, &opts.targets).filter(|_| opts.staged_start);
        let programs = programs::Programs {
            staged: pending.is_some(),
            ..programs
        };
        programs.autoload(&mut open.progs);
        let ro = crate::bpf::rodata(&mut open);
        ro.staged = pending.is_some();
        ro.use_tables = rows > 0 && pending.is_none();
        // Walks by file take the rows of the tables: none without them.
        ro.by_files = programs.files;
        match pending {
            Some(_) => crate::runtimes::Walkers::NONE.set(ro),
            None => walkers.set(ro),
        }
        if pending.is_some() {
            staged::leave_out(open.open_object_mut())?;
        }

        let mut skel = open
            .load()
            .map_err(|e| bpf_error("loading the BPF object", e))?;
        if !agree() {
            return Ok(None);
        }
        programs.fill_walkers(&skel)?;
        opts.targets
            .fill(&skel.maps.target_pids, &skel.maps.target_tids)?;
        let mut tables = None;
        if rows > 0 && pending.is_none() {
            tables = Some(
                unwind::Tables::new(&skel.maps.unwind_rows, &skel.maps.unwind_pages, files::handle(&skel)?)
                    .map_err(CaptureError::new)?,
            );
        }
        let mut runtimes = Runtimes::new(&opts.runtimes_on());
        // The named targets' tables and interpreters are there before their
        // first sample.
        for &pid in &opts.targets.pids {
            track::track(&mut skel, tables.as_mut(), &mut runtimes, pid);
        }
        let groups = match opts.group_cgroup {
            true => Some(Groups::new(opts.targets.scope.as_ref()).map_err(CaptureError::new)?),
            false => None,
        };
        // Slices count from here, the capture's time 0: nothing runs yet.
        let origin = words::monotonic_ns();
        if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
            bss.slice_origin = origin;
        }
        // Before any program runs: a perf buffer drops what is sent
        // before it is read.
        let watcher = ProcWatcher::new(&skel.maps.proc_events, paths.perf_buffer.taken())?;
        let mut links = Vec::new();
        let mut switch_prog = None;
        for (prog, what) in programs.tracepoints(&skel) {
            let link = prog.attach().map_err(|e| bpf_error(&format!("attaching to {what}"), e))?;
            links.push(link);
            if what == "sched_switch" {
                switch_prog = std::os::fd::AsFd::as_fd(prog).try_clone_to_owned().ok();
            }
        }
        if programs.files && !programs.staged {
            links.extend(files::attach_libc_start(&skel));
        }
        links.extend(points::attach(&skel, &opts.events, opts.targets.only_pid())?);
        if let Some(a) = &opts.alloc {
            links.extend(alloc::attach(&skel, a)?);
        }
        let mut cpus = 0;
        if let Some(on) = &opts.oncpu {
            for cpu in perf::online_cpus()? {
                let Some(fd) = perf::open_cpu_clock(cpu, on.frequency)? else {
                    continue;
                };
                // libbpf owns the perf fd from here and closes it with the link.
                let link = programs.sampler(&skel).attach_perf_event(fd).map_err(|e| {
                    // SAFETY: fd was opened above and not handed over.
                    unsafe { libc::close(fd) };
                    bpf_error(&format!("attaching the sampler to CPU {cpu}"), e)
                })?;
                links.push(link);
                cpus += 1;
            }
            if cpus == 0 {
                return Err(CaptureError::new(
                    "no online CPU accepted a cpu-clock perf event",
                ));
            }
        }
        let mut probe = Probe {
            watcher,
            links,
            skel,
            counts: Counts::new(
                counts::Slicing {
                    origin,
                    width: opts.slice,
                    widened: 1,
                },
                groups,
            )
            .naming_events(opts.events.iter().map(|e| e.text.clone()).collect())
            .naming_allocations(opts.alloc.is_some()),
            tables,
            tables_refused: None,
            walkers_refused: Default::default(),
            runtimes,
            pending,
            twin: None,
            walkers_joined: None,
            paths: paths.clone(),
            opts: opts.clone(),
            attach_time: started.elapsed(),
            cpus,
            stopped_at: None,
            long_waits: Vec::new(),
            exited: Vec::new(),
            switch_prog,
            seeds: seeds::Seeds::default(),
        };
        // A command started by fgbpf has no history before the capture.
        if off.is_some() && !opts.targets.follow_children {
            probe.seed_threads(origin, programs.seeds);
        }
        Ok(Some(probe))
    }

    /// Completes a staged start (staged.rs): loads the table walker and the
    /// runtimes' walkers, which the running programs then call, and the
    /// unwind tables' maps. Call it once sampling has begun; a kernel that
    /// refuses them leaves the capture as it is, said in the summary.
    pub fn join_walkers(&mut self) {
        let Some(pending) = self.pending.take() else { return };
        let joined = staged::join(&self.skel, &self.paths, &pending);
        let (wanted, got) = (pending.walkers, joined.walkers);
        if let (Some(twin), true) = (&joined.twin, joined.tables) {
            let made = files::handle(&self.skel).and_then(|files| {
                unwind::Tables::new(&twin.maps.unwind_rows, &twin.maps.unwind_pages, files).map_err(CaptureError::new)
            });
            match made {
                Ok(t) => self.tables = Some(t),
                Err(e) => {
                    self.tables_refused = Some(e.to_string());
                }
            }
        }
        if let Some(why) = joined.refused {
            if pending.rows > 0 && !joined.tables {
                self.tables_refused.get_or_insert(why.clone());
            }
            self.walkers_refused.refuse(wanted.without(got), &why);
        }
        if let Some(twin) = joined.twin.as_ref().filter(|_| pending.programs.files) {
            self.links.extend(files::attach_libc_start(twin));
        }
        if joined.twin.is_some() {
            // From the capture's time 0, as its slices and timeline count.
            let origin = self.counts.slicing().origin;
            self.walkers_joined = Some(Duration::from_nanos(words::monotonic_ns().saturating_sub(origin)));
        }
        self.twin = joined.twin;
    }

    pub fn stats(&self) -> Stats {
        drain::sum_per_cpu(&self.skel.maps.stats)
    }

    /// Progress figures for a status line, e.g. "1234 samples".
    pub fn progress(&self) -> String {
        let st = self.stats();
        let mut parts = Vec::new();
        if self.opts.oncpu.is_some() {
            parts.push(format!("{} samples", st.samples));
        }
        if self.opts.offcpu.is_some() {
            parts.push(format!("{} off-CPU intervals", st.recorded));
        }
        parts.join(", ")
    }

    /// Drains the counts if [`DRAIN_EVERY`] has passed since the last
    /// drain, so that the kernel's counts maps only ever hold one
    /// interval's keys, and re-reads the maps of processes on the unwind
    /// tables' schedule. Call it from the capture loop. Returns the
    /// processes it re-read (young ones, and those whose code mappings
    /// changed), with the maps read, for the symbolizer to take too.
    pub fn tick(&mut self) -> Vec<(u32, String)> {
        // Half the buffer in use: room for the keys the loop's next 50 ms
        // bring while it drains.
        let high = u64::from(libbpf_rs::MapCore::max_entries(&self.skel.maps.counts0) / 2);
        self.counts.tick(&mut self.skel, high);
        let reread = track::reread(&mut self.skel, self.tables.as_mut(), &mut self.runtimes);
        let pids: Vec<u32> = reread.iter().map(|(pid, _)| *pid).collect();
        self.walk_seeds(Some(&pids));
        self.runtimes.refresh(&mut self.skel);
        if self.runtimes.reads_fresh() {
            let fresh = self.counts.take_fresh();
            self.runtimes.fresh(fresh);
        }
        reread
    }

    /// Moves the capture's time 0 to now: for a `-- COMMAND` capture, whose
    /// targets do not run before the command is released (its held child
    /// is no target until its `execve`), so no weight is counted before.
    pub fn restart_window(&mut self) {
        let origin = words::monotonic_ns();
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            let p: *mut u64 = &mut bss.slice_origin;
            // SAFETY: `slice_origin` lives in the .bss map that libbpf
            // mapped into this process, aligned; BPF programs read it
            // concurrently, so it is written with a volatile store.
            unsafe { std::ptr::write_volatile(p, origin) };
        }
        self.counts.restart(origin);
    }

    /// From the capture's time 0, just before the programs were attached,
    /// to [`Self::stop`] (or now, before it): the window they recorded.
    pub fn recorded_window(&self) -> Duration {
        let end = self.stopped_at.unwrap_or_else(words::monotonic_ns);
        Duration::from_nanos(end.saturating_sub(self.counts.slicing().origin))
    }

    /// Stops recording; what was gathered stays readable for
    /// [`Self::finish`].
    pub fn stop(&mut self) {
        // Recording stops as the first program is detached: taken before,
        // for letting go of a uprobe takes the kernel tens of milliseconds,
        // which blocks still open must not be counted.
        let at = words::monotonic_ns();
        self.links.clear();
        if self.stopped_at.is_none() {
            self.runtimes.stopped();
        }
        self.stopped_at.get_or_insert(at);
    }

    /// Reads every counted stack, plus the off-CPU blocks still open. Call
    /// after [`Self::stop`] so the maps hold still.
    pub fn finish(&mut self) -> Recorded {
        let now = self.stopped_at.unwrap_or_else(words::monotonic_ns);
        self.counts.drain_all(&self.skel);
        let totals = self.counts.take_totals();
        self.read(now, Some(totals), 0)
    }

    /// What was recorded up to the last drain, read while recording goes
    /// on (for `top`), with the blocks still open counted to now.
    pub fn snapshot(&mut self) -> Recorded {
        self.snapshot_from(0)
    }

    /// A [`Self::snapshot`] of what reaches slice `first` and after (with
    /// some before: keep what is wanted with [`Recorded::keep_slices`]).
    pub fn snapshot_from(&mut self, first: u32) -> Recorded {
        self.read(self.stopped_at.unwrap_or_else(words::monotonic_ns), None, first)
    }

    /// Drains every count now (after [`Self::stop`]: all of them), so that
    /// a [`Self::snapshot`] holds the whole recording.
    pub fn drain_now(&mut self) {
        self.counts.drain_all(&self.skel);
    }

    /// The slice, as spans count now, that the capture's time `at` falls
    /// in.
    pub fn slice_at(&self, at: Duration) -> u32 {
        let slicing = self.counts.slicing();
        let ns = slicing.origin.saturating_add(at.as_nanos().min(u64::MAX as u128) as u64);
        slicing.span(ns, ns, 0).first
    }

    /// The capture's time of the last drain: every count taken before it
    /// is in [`Self::snapshot`]. `None` before the first.
    pub fn drained_through(&self) -> Option<Duration> {
        let at = self.counts.drained_at()?;
        Some(Duration::from_nanos(at.saturating_sub(self.counts.slicing().origin)))
    }
}
