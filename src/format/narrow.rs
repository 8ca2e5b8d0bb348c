//! A profile's folded lines for drawing, without ever holding all of them:
//! the stacks are put in the order of their lines' text (as sorting the
//! lines would), and each line is cut after its first frame too narrow to
//! draw. Everything past that frame is narrower still and never drawn, and
//! the order is the full lines' order, so the cut lines draw the same
//! picture ([`super::drawn`] then reduces them as it reduces any lines).
//! A whole host's wall view has a hundred thousand lines of hundreds of
//! bytes each; cut, most of them are a short-lived process's or thread's
//! name and a count.

use std::cmp::Ordering;

use rayon::slice::ParallelSliceMut;

use super::folded::{has_line, Folder};
use super::palette::Scheme;
use crate::profile::{Profile, Stack, State, PARALLEL_FROM};

/// The lines to draw `profile` from, in the order to draw them, with
/// frames narrower than `min_width` percent of the total cut off. With
/// `scheme` Majority, off-CPU time keeps a state frame at the end of its
/// cut line, so that the frames drawn keep their on/off split.
pub fn lines(profile: &Profile, folder: &Folder<'_>, min_width: f64, scheme: Scheme) -> Vec<String> {
    let stacks = profile.stacks();
    let mut order: Vec<u32> = (0..stacks.len() as u32).filter(|&i| has_line(&stacks[i as usize])).collect();
    let line = |i: u32| Line::new(folder, &stacks[i as usize]);
    let cmp = |a: &u32, b: &u32| line(*a).cmp(&line(*b));
    if order.len() >= PARALLEL_FROM {
        order.par_sort_unstable_by(cmp);
    } else {
        order.sort_unstable_by(cmp);
    }
    let total: u64 = order.iter().map(|&i| stacks[i as usize].weight).sum();
    // inferno's own test, as super::drawn makes it.
    let min_time = min_width * total as f64 / 100.0;
    let cuts = cuts(&order, &line, min_time);
    let mut out: Vec<String> = Vec::new();
    // The cut line being summed: its text and its on- and off-CPU weight.
    let mut open: Option<(String, u64, u64)> = None;
    let flush = |open: &mut Option<(String, u64, u64)>, out: &mut Vec<String>| {
        if let Some((text, on, off)) = open.take() {
            if on > 0 {
                out.push(format!("{text} {on}"));
            }
            if off > 0 {
                let last = text.rsplit(';').next().unwrap_or("");
                match State::from_frame(last) {
                    Some(_) => out.push(format!("{text} {off}")),
                    None => out.push(format!("{text};{} {off}", State::Sleeping.frame())),
                }
            }
        }
    };
    for (&i, &cut) in order.iter().zip(&cuts) {
        let l = line(i);
        if cut == usize::MAX {
            flush(&mut open, &mut out);
            out.push(format!("{} {}", folder.stack(l.stack), l.stack.weight));
            continue;
        }
        let is_state = |part: &str| State::from_frame(part).is_some();
        let waiting = scheme == Scheme::Majority && l.parts().last().is_some_and(is_state);
        // On-CPU time must not end at a state frame, or it would read as
        // off-CPU: such a line keeps the (narrower still) frames after it
        // up to one that is not a state (its leaf is not).
        let keep = match scheme == Scheme::Majority && !waiting {
            true => l.parts().enumerate().skip(cut).find(|(_, p)| !is_state(p)).map_or(cut, |(n, _)| n) + 1,
            false => cut + 1,
        };
        let text = l.parts().take(keep).collect::<Vec<_>>().join(";");
        let (on, off) = if waiting { (0, l.stack.weight) } else { (l.stack.weight, 0) };
        match open.as_mut() {
            Some((t, o, f)) if *t == text => {
                *o += on;
                *f += off;
            }
            _ => {
                flush(&mut open, &mut out);
                open = Some((text, on, off));
            }
        }
    }
    flush(&mut open, &mut out);
    out
}

/// For each line in `order`, the depth of its first frame narrower than
/// `min_time` (`usize::MAX` when every frame is drawn). A frame is drawn
/// as one box over the run of consecutive lines that share every frame up
/// to it, as inferno and super::drawn merge them.
fn cuts<'a>(order: &[u32], line: &impl Fn(u32) -> Line<'a>, min_time: f64) -> Vec<usize> {
    let mut cuts = vec![usize::MAX; order.len()];
    // The boxes open along the last line: name, first line, weight.
    let mut open: Vec<(&'a str, usize, u64)> = Vec::new();
    let close = |open: &mut Vec<(&'a str, usize, u64)>, keep: usize, to: usize, cuts: &mut [usize]| {
        while open.len() > keep {
            let (_, from, weight) = open.pop().expect("len > keep");
            // Boxes close deepest first: a narrow box's narrower ancestor,
            // closed later, sets the shallower cut.
            if (weight as f64) < min_time {
                cuts[from..to].fill(open.len());
            }
        }
    };
    for (n, &i) in order.iter().enumerate() {
        let l = line(i);
        let mut depth = 0;
        let mut same = true;
        for part in l.parts() {
            if same && depth < open.len() && open[depth].0 == part {
                depth += 1;
                continue;
            }
            if same {
                close(&mut open, depth, n, &mut cuts);
                same = false;
            }
            open.push((part, n, 0));
            depth += 1;
        }
        if same {
            close(&mut open, depth, n, &mut cuts);
        }
        for b in &mut open {
            b.2 += l.stack.weight;
        }
    }
    close(&mut open, 0, order.len(), &mut cuts);
    cuts
}

/// A stack as its folded line reads: `LEAD;FRAME;...;FRAME WEIGHT`.
#[derive(Clone, Copy)]
struct Line<'a> {
    lead: Option<&'a str>,
    folder: &'a Folder<'a>,
    stack: &'a Stack,
}

impl<'a> Line<'a> {
    fn new(folder: &'a Folder<'a>, stack: &'a Stack) -> Self {
        Line {
            lead: folder.lead(stack),
            folder,
            stack,
        }
    }

    /// The frames of the line as super::drawn splits them.
    fn parts(self) -> impl Iterator<Item = &'a str> {
        let folder = self.folder;
        self.lead
            .into_iter()
            .flat_map(|l| l.split(';'))
            .chain(self.stack.frames.iter().map(move |&f| folder.frame(f)))
    }

    /// The line's text, byte by byte, weight and all.
    fn bytes(self, weight: &'a str) -> impl Iterator<Item = u8> + 'a {
        let folder = self.folder;
        let frames = self.stack.frames.iter().map(move |&f| folder.frame(f));
        self.lead
            .into_iter()
            .chain(frames)
            .enumerate()
            .flat_map(|(n, p)| {
                let sep: &[u8] = if n == 0 { b"" } else { b";" };
                sep.iter().chain(p.as_bytes())
            })
            .chain(b" ".iter())
            .chain(weight.as_bytes())
            .copied()
    }

    /// The order of the two lines' text. Lines share long runs of the
    /// same frames: those are stepped over by id, and only the rest is
    /// compared as text.
    fn cmp(&self, other: &Line<'_>) -> Ordering {
        let (a, b) = (self.stack, other.stack);
        // A line with neither a lead nor frames reads " WEIGHT": the
        // steps below assume a ';' after what the two share.
        let empty = |l: &Line<'_>| l.lead.is_none() && l.stack.frames.is_empty();
        if self.lead == other.lead && !empty(self) && !empty(other) {
            let same = a.frames.iter().zip(b.frames.iter()).take_while(|(x, y)| x == y).count();
            match (a.frames.get(same), b.frames.get(same)) {
                // One line is the other's frames and more: the shorter
                // goes on with ' ' where the longer has ';', and ' ' sorts
                // first.
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (None, None) => return a.weight.to_string().cmp(&b.weight.to_string()),
                (Some(&x), Some(&y)) => {
                    let (x, y) = (self.folder.frame(x).as_bytes(), other.folder.frame(y).as_bytes());
                    // Decided inside the two frames' names.
                    if let Some(o) = x.iter().zip(y).map(|(p, q)| p.cmp(q)).find(|o| o.is_ne()) {
                        return o;
                    }
                }
            }
        }
        let (wa, wb) = (a.weight.to_string(), b.weight.to_string());
        self.bytes(&wa).cmp(other.bytes(&wb))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::folded::{self, Leading};
    use crate::profile::{Frame, FrameKind, Thread, Unit};

    /// A profile of random stacks over names that sort around each other
    /// (`a`, `a b`, `a.b`, `a2`), some threads, some ending in a state
    /// (and with `states_inside`, states anywhere).
    fn profile(n: usize, seed: u64, states_inside: bool) -> Profile {
        let tricky = ["a", "a b", "a.b", "a2", "b", "b 1", "c", "c_[k]", "ab", "[sleeping]"];
        profile_of(n, seed, &tricky, states_inside, true)
    }

    /// The same over `names`, the last of them a state frame; with
    /// `heavy`, one stack in ten much heavier than the rest.
    fn profile_of(n: usize, seed: u64, names: &[&str], states_inside: bool, heavy: bool) -> Profile {
        let mut x = seed;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut p = Profile::new(Unit::Microseconds);
        let threads: Vec<_> = (0..3)
            .map(|t| {
                p.intern_thread(Thread {
                    start: 0,
                    pid: 7,
                    tid: 7 + t,
                    process: "srv".into(),
                    name: ["main", "main", "w 1"][t as usize].into(),
                    group: None,
                })
            })
            .collect();
        for _ in 0..n {
            let depth = 1 + next(12) as usize;
            let kinds = if states_inside { names.len() } else { names.len() - 1 };
            // Skewed as real code is: the first name half the time, the
            // next a quarter...
            let mut frames: Vec<_> = (0..depth)
                .map(|_| {
                    let n = (next(1 << 16) as u32).trailing_zeros() as usize;
                    p.intern_frame(Frame::new(names[n.min(kinds - 1)], FrameKind::User))
                })
                .collect();
            if next(3) == 0 {
                frames.push(p.intern_frame(Frame::new("[sleeping]", FrameKind::Pseudo)));
            }
            p.push(Stack { labels: None,
                thread: Some(threads[next(3) as usize]),
                frames: frames.into(),
                weight: {
                    let big = heavy && next(10) == 0;
                    1 + next(if big { 5000 } else { 40 })
                },
                spans: Default::default(),
            });
        }
        p.coalesce();
        p
    }

    #[test]
    fn stacks_sort_as_their_lines_do() {
        for seed in 1..30 {
            let p = profile(400, seed, true);
            let folder = Folder::new(&p, &folded::Options { leading: Leading::Process });
            let mut want = folded::lines(&p, &folded::Options { leading: Leading::Process });
            want.sort_unstable();
            // Nothing is narrow at width 0: every line comes out whole.
            let got = lines(&p, &folder, 0.0, Scheme::Majority);
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn cut_lines_draw_the_same_picture() {
        use crate::format::svg;
        use crate::format::palette::Heat;
        let ways = [Leading::Process, Leading::ProcessAndThread]
            .into_iter()
            .flat_map(|l| [(l, Scheme::Majority), (l, Scheme::Heat(Heat::OnCpu))]);
        for (leading, scheme) in ways {
            for (seed, states_inside) in (1..20).zip([true, false].into_iter().cycle()) {
                let p = profile(1500, seed, states_inside);
                let opts = svg::Options {
                    leading,
                    scheme,
                    min_width: 0.5,
                    ..Default::default()
                };
                let mut from_profile = Vec::new();
                svg::write(&p, &opts, &mut from_profile).unwrap();
                let all = folded::lines(&p, &folded::Options { leading });
                let shape = super::super::palette::Lines::ours(leading);
                let mut from_lines = Vec::new();
                svg::render(all.iter().map(String::as_str).collect(), "us", shape, &opts, &mut from_lines).unwrap();
                assert!(
                    from_profile == from_lines,
                    "seed {seed} {leading:?} {scheme:?}: the cut lines drew another picture"
                );
                let folder = Folder::new(&p, &folded::Options { leading });
                let cut = lines(&p, &folder, opts.min_width, opts.scheme);
                assert!(cut.len() < all.len(), "seed {seed}: {} lines cut to {}", all.len(), cut.len());
            }
        }
    }

    /// At 1%, a hundred boxes a level at most are drawn: skewed stacks
    /// (as code is) come down to a third of their lines or fewer.
    #[test]
    fn narrow_frames_leave_few_lines() {
        let plain = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "[sleeping]"];
        for seed in 1..10 {
            let p = profile_of(3000, seed, &plain, false, false);
            let opts = folded::Options { leading: Leading::ProcessAndThread };
            let folder = Folder::new(&p, &opts);
            let all = folded::lines(&p, &opts).len();
            let cut = lines(&p, &folder, 1.0, Scheme::Majority).len();
            assert!(cut * 3 < all, "seed {seed}: {all} lines cut to {cut}");
        }
    }
}
