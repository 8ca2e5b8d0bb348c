//! Merging profiles: the wall-clock view puts on-CPU samples and off-CPU
//! time in one unit (microseconds) and one tree.
//!
//! Off-CPU time is measured at the scheduler, wait by wait. On-CPU time is
//! measured there too when the capture recorded each thread's runs
//! ([`Ran`]): the thread's samples then only divide its measured time among
//! its stacks, so that a thread's on-CPU and off-CPU time add up to the
//! time it existed in the window, whatever ticks the timer lost. Without a
//! measure (a thread the switch tracer did not follow, or a profile read
//! from files) a sample weighs one period, 1e6/F µs.

use rustc_hash::FxHashMap as HashMap;

use super::time::{self, Spans};
use super::{Frame, FrameKind, Kind, Meta, Profile, Stack, Thread, Unit};

/// The frame of a thread's run time no sample fell in: it ran, measured,
/// between the sampler's ticks.
pub const NOT_SAMPLED: &str = "[on-CPU, not sampled]";

/// The time one thread ran, measured at its switches: microseconds, and
/// when (spans in microseconds).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ran {
    pub pid: u32,
    pub tid: u32,
    pub comm: std::sync::Arc<str>,
    pub us: u64,
    pub spans: Spans,
}

/// One tree in microseconds: each thread's on-CPU samples share its
/// measured run time (see the module's documentation), each off-CPU
/// interval weighs its measured length. Losses are the caller's to set:
/// both sides may share some. The off-CPU stacks are moved into the wall
/// view (`off` keeps its frames, threads and meta).
pub fn wall(on: &Profile, off: &mut Profile, runs: Vec<Ran>) -> Profile {
    let hz = on.meta.frequency.unwrap_or(1).max(1);
    let period = 1_000_000 / hz;
    // Each thread's run time, spans and name (its first run's).
    let mut measured: HashMap<(u32, u32), (u64, Spans, std::sync::Arc<str>)> = HashMap::default();
    for r in runs {
        let m = measured.entry((r.pid, r.tid)).or_insert_with(|| (0, Spans::new(), r.comm));
        m.0 += r.us;
        m.1.extend(r.spans);
    }
    let key = |p: &Profile, s: &Stack| s.thread.map(|t| (p.thread(t).pid, p.thread(t).tid));
    let mut samples: HashMap<(u32, u32), u64> = HashMap::default();
    for s in on.stacks() {
        if let Some(k) = key(on, s) {
            *samples.entry(k).or_default() += s.weight;
        }
    }
    // Each measured thread's time, apportioned over its stacks by their
    // samples, the remainders to the largest fractions: the parts add up
    // to the measure exactly.
    let mut weights: Vec<u64> = on.stacks().iter().map(|s| s.weight * period).collect();
    let mut by_thread: HashMap<(u32, u32), Vec<usize>> = HashMap::default();
    for (i, s) in on.stacks().iter().enumerate() {
        if let Some(k) = key(on, s).filter(|k| measured.contains_key(k)) {
            by_thread.entry(k).or_default().push(i);
        }
    }
    for (k, stacks) in &by_thread {
        let total = measured[k].0;
        let n = samples[k].max(1);
        let parts: Vec<(u128, u128)> = stacks
            .iter()
            .map(|&i| {
                let exact = u128::from(total) * u128::from(on.stacks()[i].weight);
                (exact / u128::from(n), exact % u128::from(n))
            })
            .collect();
        let given: u128 = parts.iter().map(|p| p.0).sum();
        let mut order: Vec<usize> = (0..stacks.len()).collect();
        order.sort_by(|&a, &b| parts[b].1.cmp(&parts[a].1).then(a.cmp(&b)));
        let left = (u128::from(total) - given) as usize;
        for (rank, &j) in order.iter().enumerate() {
            weights[stacks[j]] = (parts[j].0 + u128::from(rank < left)) as u64;
        }
    }
    let mut wall = Profile::new(Unit::Microseconds);
    // Measured threads no sample fell on, each one stack more.
    type Measured<'a> = (&'a (u32, u32), &'a (u64, Spans, std::sync::Arc<str>));
    let mut unsampled: Vec<Measured<'_>> =
        measured.iter().filter(|(k, m)| m.0 > 0 && !samples.contains_key(k)).collect();
    unsampled.sort_by_key(|(k, _)| **k);
    // The on-CPU view's frames and threads take the first ids, then the
    // off-CPU view's; its stacks go first, in their own buffer (the
    // largest part of the view, not copied), and coalesce orders them all.
    wall.intern_all(on);
    wall.absorb(off, |us| us);
    wall.reserve(on.stacks().len() + unsampled.len());
    wall.absorb_reweighted(on, &weights);
    let off = &*off;
    // An unsampled thread's own thread elsewhere in the capture, else its
    // process's: the process name and --group-by group it is drawn under.
    // The first of each found in the on-CPU view's threads, then the
    // off-CPU view's.
    let mut own: HashMap<(u32, u32), &Thread> = HashMap::default();
    let mut main: HashMap<u32, &Thread> = HashMap::default();
    let mut any: HashMap<u32, &Thread> = HashMap::default();
    for t in [on, off].into_iter().flat_map(|p| p.threads()) {
        own.entry((t.pid, t.tid)).or_insert(t);
        if t.tid == t.pid {
            main.entry(t.pid).or_insert(t);
        }
        any.entry(t.pid).or_insert(t);
    }
    let like = |pid: u32, tid: u32| {
        own.get(&(pid, tid))
            .or_else(|| main.get(&pid))
            .or_else(|| any.get(&pid))
            .map(|&t| t.clone())
    };
    for (&(pid, tid), (us, spans, comm)) in unsampled {
        let known = like(pid, tid);
        let thread = wall.intern_thread(Thread {
            pid,
            start: known.as_ref().map_or(0, |t| t.start),
            tid,
            process: known.as_ref().map_or_else(|| comm.clone(), |t| t.process.clone()),
            name: comm.clone(),
            group: known.and_then(|t| t.group),
        });
        let frame = wall.intern_frame(Frame::new(NOT_SAMPLED, FrameKind::Pseudo));
        let mut spans = spans.clone();
        time::normalize(&mut spans);
        wall.push(Stack {
            thread: Some(thread),
            frames: [frame].into(),
            weight: *us,
            spans,
            labels: None,
        });
    }
    // Unresolved leaves: each process's samples at its measured average.
    let mut per_pid: HashMap<u32, (u64, u64)> = HashMap::default();
    for (i, s) in on.stacks().iter().enumerate() {
        if let Some((pid, _)) = key(on, s) {
            let e = per_pid.entry(pid).or_default();
            e.0 += s.weight;
            e.1 += weights[i];
        }
    }
    for u in &on.unresolved {
        let (n, us) = per_pid.get(&u.pid).copied().unwrap_or((1, period));
        let mut one = Profile::new(Unit::Samples);
        one.unresolved.push(u.clone());
        wall.absorb_unresolved(&one, |w| (u128::from(w) * u128::from(us) / u128::from(n.max(1))) as u64);
    }
    wall.absorb_unresolved(off, |us| us);
    wall.coalesce();
    wall.meta = Meta {
        kind: Kind::Wall,
        target: on.meta.target.clone(),
        duration: on.meta.duration,
        frequency: Some(hz),
        losses: Default::default(),
        unwinding: on.meta.unwinding.clone(),
        kernel: on.meta.kernel.clone(),
        kernel_words: on.meta.kernel_words.clone(),
        slice: on.meta.slice.or(off.meta.slice),
        window_ns: on.meta.window_ns.or(off.meta.window_ns),
        id_labels: on.meta.id_labels.clone(),
        // Named after the on-CPU side, by the same symbolizer: its lines
        // hold both sides'.
        symbols: if off.meta.symbols.is_empty() { on.meta.symbols.clone() } else { off.meta.symbols.clone() },
    };
    wall
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Span;

    fn thread(pid: u32, tid: u32) -> Thread {
        Thread {
            start: 0,
            pid,
            tid,
            process: "app".into(),
            name: format!("t{tid}").into(),
            group: None,
        }
    }

    fn push(p: &mut Profile, t: Thread, frame: &str, weight: u64, spans: Vec<Span>) {
        let thread = p.intern_thread(t);
        let f = p.intern_frame(Frame::new(frame, FrameKind::User));
        p.push(Stack { labels: None,
            thread: Some(thread),
            frames: vec![f].into(),
            weight,
            spans: spans.into(),
        });
    }

    #[test]
    fn measured_threads_sum_exactly_and_others_weigh_a_period() {
        let mut on = Profile::new(Unit::Samples);
        on.meta.frequency = Some(100);
        // t1: 3 samples over two stacks, ran 1,000,001 us measured.
        push(&mut on, thread(1, 1), "a", 2, vec![Span::at(0, 1), Span::at(1, 1)]);
        push(&mut on, thread(1, 1), "b", 1, vec![Span::at(1, 1)]);
        // t2: sampled, not measured: 10 ms a sample.
        push(&mut on, thread(1, 2), "c", 4, vec![Span::at(0, 4)]);
        let mut off = Profile::new(Unit::Microseconds);
        push(&mut off, thread(1, 1), "wait", 500, vec![Span::at(2, 500)]);
        let runs = [
            Ran { pid: 1, tid: 1, comm: "t1".into(), us: 1_000_001, spans: smallvec::smallvec![Span::at(0, 1_000_001)] },
            // t3: ran, never sampled.
            Ran { pid: 1, tid: 3, comm: "t3".into(), us: 700, spans: smallvec::smallvec![Span::at(3, 700)] },
        ];
        let wall = wall(&on, &mut off, runs.to_vec());
        let sum = |tid: u32| -> u64 {
            wall.stacks()
                .iter()
                .filter(|s| wall.thread(s.thread.unwrap()).tid == tid)
                .map(|s| s.weight)
                .sum()
        };
        assert_eq!(sum(1), 1_000_001 + 500);
        assert_eq!(sum(2), 40_000);
        assert_eq!(sum(3), 700);
        let named = |name: &str| {
            wall.stacks()
                .iter()
                .find(|s| wall.frame(*s.frames.last().unwrap()).name == name)
                .unwrap()
                .clone()
        };
        // 2/3 and 1/3 of the measure, the odd microseconds to the larger
        // remainder; spans add up to each stack's weight.
        assert_eq!(named("a").weight, 666_667);
        assert_eq!(named("b").weight, 333_334);
        for s in wall.stacks() {
            assert_eq!(s.spans.iter().map(|p| p.weight).sum::<u64>(), s.weight, "{s:?}");
        }
        assert_eq!(named(NOT_SAMPLED).weight, 700);
    }
}
