//! Reading what the probe recorded into a [`Recorded`]: the counts as raw
//! stacks, the off-CPU blocks still open, the runtimes' frames and the
//! losses; copied while the capture goes on (`top`), moved at its end.

use std::os::fd::AsFd;

use super::counts::Key;
use super::totals::Totals;
use super::{drain, late, losses, offcpu, unwind, wakers, Probe, Recorded};

impl Probe {
    /// The counts drained so far, named as [`Self::finish`] names them.
    /// `totals`: the counts taken out at the end, read once, else
    /// those held (copied) while the capture goes on, from slice `from` on
    /// (what fell before may be left out).
    pub(super) fn read(&mut self, now: u64, totals: Option<Totals<Key>>, from: u32) -> Recorded {
        // At the end, a last look for processes read since the last turn.
        if totals.is_some() {
            self.walk_seeds(None);
        }
        let mut reader = drain::StackReader::new(&self.skel.maps.stacks, self.counts.stacks());
        let wakers_on = self.opts.offcpu.as_ref().is_some_and(|o| o.wakers);
        let mut wakers = wakers::WakerReader::new(wakers_on.then_some(&self.skel.maps.wakers));
        let (mut stacks, mut runs) = match totals {
            Some(t) => {
                let n = t.len();
                let entries = t.into_entries();
                self.counts.read_out(entries, n, &mut reader, &mut wakers)
            }
            None => self.counts.raw_stacks(&mut reader, &mut wakers, from),
        };
        let wakers_missing = wakers.missing;
        let open = offcpu::open_blocks(
            &self.skel.maps.starts,
            &self.opts,
            (now, self.counts.slicing(), self.counts.groups()),
            &mut reader,
            &mut stacks,
        );
        if let Some(t) = self.tables.as_ref() {
            late::mark(&mut stacks, &self.skel.maps.proc_unwind, t);
        }
        let seeded = self.seeds.fill(&mut stacks);
        let stats = self.stats();
        let mut rec = Recorded {
            stacks,
            stats,
            open_blocks: open.drawn,
            seeded,
            runs: {
                runs.extend(open.running);
                runs
            },
            idle: (open.idle_threads, open.idle_us),
            kthread_switches: stats.kthread_switches,
            switch_misses: self
                .switch_prog
                .as_ref()
                .and_then(|fd| super::programs::recursion_misses(fd.as_fd())),
            tables: self.tables.as_ref().map(unwind::Tables::stats),
            tables_refused: self.tables_refused.clone(),
            walkers_refused: self.walkers_refused.clone(),
            walkers_joined: self.walkers_joined,
            kernel: self.paths.lines(),
            kernel_words: self.paths.words(),
            slice: Some(self.counts.slicing().width()),
            window_ns: Some((self.counts.slicing().origin, now)),
            ..Default::default()
        };
        rec.runtimes = self.runtimes.finish(&mut rec.stacks);
        rec.events = super::points::tallies(&self.skel, &self.opts.events);
        if let Some(a) = &self.opts.alloc {
            let t = super::alloc::tally(&self.skel, a);
            for (what, n, remedy) in t.losses() {
                rec.oncpu_losses.add(&what, n, remedy);
            }
            rec.alloc = Some(t);
        }
        rec.oncpu_losses.add(
            "hits the kernel did not run fgbpf's program for (another BPF program was running on that CPU: the recursion misses of the events' programs)",
            event_misses(&self.skel, &self.opts.events).unwrap_or(0),
            "stop other BPF tools tracing the same events",
        );
        for t in &rec.events {
            let e = &t.event;
            rec.oncpu_losses.add(&format!("{e}: hits (counts map full: not in any stack)"), t.lost_counts, "raise --max-entries");
            rec.oncpu_losses.add(&format!("{e}: hits counted without their user stack (stack map full)"), t.lost_user_stack, "raise --max-stacks");
            rec.oncpu_losses.add(&format!("{e}: hits counted without their kernel stack (stack map full)"), t.lost_kern_stack, "raise --max-stacks");
        }
        let (announcements, follow_lost, inherit_lost) = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .map_or((0, 0, 0), |b| (b.proc_events_lost, b.follow_lost, b.inherit_lost));
        losses::count(
            &mut rec,
            &losses::Lost {
                stats,
                wakers_missing,
                // A full perf buffer fails the BPF side's output (counted
                // there) and is reported to the reader too: the larger
                // count stands.
                announcements: announcements.max(self.watcher.lost()),
                follow_lost,
                inherit_lost,
                merged_spans: self.counts.merged_spans(),
                slice: self.counts.slicing().width(),
            },
        );
        rec
    }

}

/// Hits the kernel did not run the events' programs for (their recursion
/// misses: another BPF program was running on the CPU at a tracepoint or
/// probe), over every program loaded; `None` when the kernel does not
/// say (before Linux 5.12).
fn event_misses(skel: &crate::bpf::FgbpfSkel<'_>, events: &[super::points::Event]) -> Option<u64> {
    let uses = super::points::Uses::of(events);
    let p = &skel.progs;
    let loaded = [(uses.tracepoints, &p.event_tp), (uses.uprobes, &p.event_uprobe), (uses.uretprobes, &p.event_uretprobe), (uses.usdt, &p.event_usdt)];
    loaded
        .into_iter()
        .filter(|(used, _)| *used)
        .map(|(_, prog)| super::programs::recursion_misses(std::os::fd::AsFd::as_fd(prog)))
        .sum()
}
