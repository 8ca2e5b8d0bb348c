//! The data a timeline page draws from, as JSON safe to embed in a
//! `<script type="application/json">` element: frames and threads interned
//! once (stacks are arrays of indices), the heaviest stacks up to a cap,
//! and what the cap left out. Every name comes from the profiled program,
//! so the JSON is escaped so that no `<`, `>`, `&`, U+2028 or U+2029 is
//! left in it: nothing in it can end the element or be read as markup.
//!
//! Layout (all numbers are integers):
//! ```text
//! { "unit": "samples" | "us", "slice_us": N | null, "slices": N, "rows": N,
//!   "total": W, "split": true | false,
//!   "left_out": { "stacks": N, "weight": W, "per_slice": [W...], "per_slice_off": [W...] },
//!   "frames": [name...], "colours": ["#rrggbb"...],
//!   "threads": [[pid, tid, (group frame,) process frame, thread frame]...],
//!   "programs": [program frame...], "roots": "program" | "process" | "thread",
//!   "stacks": [[thread or -1, weight, [frame...], [first, last, weight, ...](, 1)]...] }
//! ```
//! `split` is true for a wall-clock profile, whose stacks are time on the
//! CPU and time off it (those ending in an off-CPU state frame): each
//! off-CPU stack then carries a fifth element, `1`, and `per_slice_off`
//! is the off-CPU part of `per_slice`. The page colours the heat map by
//! either side or by both: in a wall capture every thread's cells hold
//! its whole 100 ms, so only the split shows anything change.
//! Stacks are in the order of their paths from the root (the thread's
//! pseudo-roots, then the frames, as page frame indices), so that
//! stacks sharing a prefix are adjacent and the page builds a tree in one
//! pass; the cap keeps the heaviest before they are ordered.
//! `threads` lists every thread of the profile; the frames are its
//! `process-PID` / `thread-TID` pseudo-roots, after its `--group-by`
//! group's frame when it has one ([`leading_frames`] with
//! [`Leading::ProcessAndThread`]); `programs` gives each thread's
//! program frame (its process name alone), and `roots` what the
//! flamegraph stands on when the page opens. Stacks are in the order of
//! their thread-rooted paths; the page sorts them again for the others.

use std::io::{self, Write};

use rustc_hash::FxHashMap as HashMap;

use super::Options;
use crate::format::palette;
use crate::profile::names::{frame_text, leading_frames, sanitize, Leading};
use crate::profile::{Frame, FrameKind, Kind, Profile, Span, Stack, State};

/// More slices than this (a day of 100 ms slices is 864,000) and the page
/// gets no heat map: one SVG cell each would not load.
pub(super) const MAX_SLICES: u64 = 2_000_000;

/// The JSON, and what it holds of the profile.
pub(super) struct Data {
    /// Plain JSON up to the stacks' list; [`Data::write`] embeds it.
    head: Vec<u8>,
    /// Each stack's JSON, in the list's order: written one by one rather
    /// than copied into one buffer first (the page's data is never held
    /// twice over).
    stacks: Vec<Vec<u8>>,
    pub kept_stacks: usize,
    pub left_out_stacks: usize,
    pub left_out_weight: u64,
    pub total_weight: u64,
    /// Slices the heat map shows; 0 without time.
    pub slices: u64,
}

/// Frames of the page, each distinct text once.
struct Frames {
    names: Vec<u8>,
    colours: Vec<u8>,
    count: u32,
    /// Profile frame id → page index (`u32::MAX`: not yet).
    by_id: Vec<u32>,
    /// Pseudo-roots by text.
    pseudo: HashMap<String, u32>,
}

impl Frames {
    fn add(&mut self, text: &str, frame: &Frame, heat: palette::Heat) -> u32 {
        if self.count > 0 {
            self.names.push(b',');
            self.colours.push(b',');
        }
        serde_json::to_writer(&mut self.names, text).expect("a string serializes");
        let c = palette::color(frame, heat);
        write!(self.colours, "\"#{:02x}{:02x}{:02x}\"", c.r, c.g, c.b).expect("writing to memory");
        self.count += 1;
        self.count - 1
    }

    fn of(&mut self, profile: &Profile, id: u32, heat: palette::Heat) -> u32 {
        let have = self.by_id[id as usize];
        if have != u32::MAX {
            return have;
        }
        let frame = profile.frame(id);
        let i = self.add(&frame_text(frame), frame, heat);
        self.by_id[id as usize] = i;
        i
    }

    fn root(&mut self, text: String, heat: palette::Heat) -> u32 {
        if let Some(&i) = self.pseudo.get(&text) {
            return i;
        }
        let i = self.add(&text, &Frame::new(text.clone(), FrameKind::Pseudo), heat);
        self.pseudo.insert(text, i);
        i
    }
}

/// Appends `n` in decimal (a million stacks hold tens of millions of
/// numbers: no formatting machinery per number).
fn num(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `ns` separated by commas.
fn numbers(out: &mut Vec<u8>, ns: &[u64]) {
    for (j, &n) in ns.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        num(out, n);
    }
}

/// Whether a wall-clock stack is time off the CPU: it ends in an off-CPU
/// state frame (`[sleeping]`, ...), as every off-CPU stack does.
fn off_cpu(profile: &Profile, stack: &Stack) -> bool {
    stack
        .frames
        .last()
        .map(|&f| profile.frame(f))
        .is_some_and(|f| f.kind == FrameKind::Pseudo && State::from_frame(&f.name).is_some())
}

/// How many heat-map rows a column has: the slices in a second, at least
/// one (slices of a second or more make one-row columns of one slice).
pub(super) fn rows(slice_us: u64) -> u64 {
    (1_000_000 / slice_us.max(1)).max(1)
}

pub(super) fn build(profile: &Profile, opts: &Options) -> Data {
    let stacks = profile.stacks();
    let slice_us = profile.meta.slice.map(|d| (d.as_micros() as u64).max(1));
    let timed = slice_us.is_some() && stacks.iter().any(|s| !s.spans.is_empty());
    let slices = match slice_us {
        Some(w) if timed => {
            let by_duration = (profile.meta.duration.as_micros() as u64).div_ceil(w);
            u64::from(profile.slice_count()).max(by_duration)
        }
        _ => 0,
    };
    let timed = timed && slices <= MAX_SLICES;
    let slices = if timed { slices } else { 0 };
    let split = profile.meta.kind == Kind::Wall;

    // Heaviest first; equal weights keep the profile's order.
    let mut order: Vec<usize> = (0..stacks.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(stacks[i].weight));

    let mut frames = Frames {
        names: Vec::new(),
        colours: Vec::new(),
        count: 0,
        by_id: vec![u32::MAX; profile.frames().len()],
        pseudo: HashMap::default(),
    };
    let mut threads = Vec::new();
    let mut programs = Vec::new();
    let mut roots_of = Vec::with_capacity(profile.threads().len());
    for (i, t) in profile.threads().iter().enumerate() {
        let lead = leading_frames(t, Leading::ProcessAndThread);
        let roots: Vec<u32> = lead.into_iter().map(|n| frames.root(n, opts.heat)).collect();
        if i > 0 {
            threads.push(b',');
            programs.push(b',');
        }
        num(&mut programs, u64::from(frames.root(sanitize(&t.process), opts.heat)));
        threads.push(b'[');
        num(&mut threads, u64::from(t.pid));
        threads.push(b',');
        num(&mut threads, u64::from(t.tid));
        for &r in &roots {
            threads.push(b',');
            num(&mut threads, u64::from(r));
        }
        threads.push(b']');
        roots_of.push(roots);
    }

    // Each kept stack's JSON, with its index in the profile.
    let mut kept: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut used = frames.names.len() + frames.colours.len() + threads.len() + programs.len();
    let mut cut = order.len();
    for (n, &i) in order.iter().enumerate() {
        if kept.len() >= opts.max_stacks || used >= opts.max_data_bytes {
            cut = n;
            break;
        }
        let s = &stacks[i];
        let mut one = Vec::with_capacity(16 + 6 * s.frames.len() + 12 * s.spans.len());
        one.push(b'[');
        match s.thread {
            Some(t) => num(&mut one, u64::from(t)),
            None => one.extend_from_slice(b"-1"),
        }
        one.push(b',');
        num(&mut one, s.weight);
        one.extend_from_slice(b",[");
        let named = frames.names.len() + frames.colours.len();
        for (j, &f) in s.frames.iter().enumerate() {
            if j > 0 {
                one.push(b',');
            }
            let id = frames.of(profile, f, opts.heat);
            num(&mut one, u64::from(id));
        }
        one.extend_from_slice(b"],[");
        if timed {
            for (j, p) in s.spans.iter().enumerate() {
                if j > 0 {
                    one.push(b',');
                }
                num(&mut one, u64::from(p.first));
                one.push(b',');
                num(&mut one, u64::from(p.last));
                one.push(b',');
                num(&mut one, p.weight);
            }
        }
        one.push(b']');
        if split && off_cpu(profile, s) {
            one.extend_from_slice(b",1");
        }
        one.push(b']');
        used += one.len() + 1 + frames.names.len() + frames.colours.len() - named;
        kept.push((i, one));
    }
    // In the order of their paths from the root in page frames, so that
    // the page builds a range's tree in one pass, stack after stack,
    // without looking children up. Every kept frame has its page index
    // now: the paths are read, not stored.
    let path = |i: usize| {
        let s = &stacks[i];
        let roots = s.thread.map_or(&[][..], |t| roots_of[t as usize].as_slice());
        roots.iter().copied().chain(s.frames.iter().map(|&f| frames.by_id[f as usize]))
    };
    kept.sort_unstable_by(|a, b| path(a.0).cmp(path(b.0)));

    let left = &order[cut..];
    let left_out_weight: u64 = left.iter().map(|&i| stacks[i].weight).sum();
    let per_slice = match timed && !left.is_empty() {
        true => spread(left.iter().flat_map(|&i| stacks[i].spans.iter()), slices),
        false => Vec::new(),
    };
    let per_slice_off = match split && timed && !left.is_empty() {
        true => {
            let off = left.iter().filter(|&&i| off_cpu(profile, &stacks[i]));
            spread(off.flat_map(|&i| stacks[i].spans.iter()), slices)
        }
        false => Vec::new(),
    };

    let mut json = Vec::with_capacity(frames.names.len() + frames.colours.len() + threads.len() + 4096);
    json.extend_from_slice(b"{\"unit\":");
    serde_json::to_writer(&mut json, profile.unit.name()).expect("a string serializes");
    json.extend_from_slice(b",\"slice_us\":");
    match slice_us {
        Some(w) if timed => num(&mut json, w),
        _ => json.extend_from_slice(b"null"),
    }
    json.extend_from_slice(b",\"slices\":");
    num(&mut json, slices);
    json.extend_from_slice(b",\"rows\":");
    num(&mut json, slice_us.map_or(1, rows));
    json.extend_from_slice(b",\"total\":");
    num(&mut json, profile.total());
    json.extend_from_slice(if split { b",\"split\":true" } else { b",\"split\":false" });
    json.extend_from_slice(b",\"left_out\":{\"stacks\":");
    num(&mut json, left.len() as u64);
    json.extend_from_slice(b",\"weight\":");
    num(&mut json, left_out_weight);
    json.extend_from_slice(b",\"per_slice\":[");
    numbers(&mut json, &per_slice);
    json.extend_from_slice(b"],\"per_slice_off\":[");
    numbers(&mut json, &per_slice_off);
    json.extend_from_slice(b"]},\"frames\":[");
    json.extend_from_slice(&frames.names);
    json.extend_from_slice(b"],\"colours\":[");
    json.extend_from_slice(&frames.colours);
    json.extend_from_slice(b"],\"threads\":[");
    json.extend_from_slice(&threads);
    json.extend_from_slice(b"],\"programs\":[");
    json.extend_from_slice(&programs);
    json.extend_from_slice(match opts.roots {
        Leading::Program => b"],\"roots\":\"program\"",
        Leading::Process => b"],\"roots\":\"process\"",
        _ => b"],\"roots\":\"thread\"",
    });
    json.extend_from_slice(b",\"stacks\":[");
    let kept_stacks = kept.len();
    Data {
        head: json,
        stacks: kept.into_iter().map(|(_, one)| one).collect(),
        kept_stacks,
        left_out_stacks: left.len(),
        left_out_weight,
        total_weight: profile.total(),
        slices,
    }
}

/// The weight of `spans` in each of `slices` slices, by [`Span::within`]
/// of one slice (the same in every slice of a span, so a running sum of
/// changes at each span's ends gives it without visiting every slice).
pub(super) fn spread<'a>(spans: impl Iterator<Item = &'a Span>, slices: u64) -> Vec<u64> {
    let mut change = vec![0i128; slices as usize + 1];
    for p in spans {
        if u64::from(p.first) >= slices {
            continue;
        }
        let each = i128::from(p.within(p.first, p.first.saturating_add(1)));
        let end = (u64::from(p.last) + 1).min(slices) as usize;
        change[p.first as usize] += each;
        change[end] -= each;
    }
    let mut at = 0i128;
    change[..slices as usize]
        .iter()
        .map(|c| {
            at += c;
            at as u64
        })
        .collect()
}

impl Data {
    /// Writes the data as JSON escaped for a script element.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        write_escaped(&self.head, out)?;
        for (j, one) in self.stacks.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            write_escaped(one, out)?;
        }
        out.write_all(b"]}")
    }
}

/// Writes `json` with `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX`
/// escapes. They can only occur inside JSON strings, where the escape
/// means the same character, so the JSON reads the same; and without them
/// no `</script`, `<!--` or line terminator JavaScript would trip on is
/// left.
pub(super) fn write_escaped(json: &[u8], out: &mut dyn Write) -> io::Result<()> {
    let mut from = 0;
    let mut i = 0;
    while i < json.len() {
        let (escape, len): (&[u8], usize) = match json[i] {
            b'<' => (b"\\u003c", 1),
            b'>' => (b"\\u003e", 1),
            b'&' => (b"\\u0026", 1),
            0xE2 if json[i + 1..].starts_with(&[0x80, 0xA8]) => (b"\\u2028", 3),
            0xE2 if json[i + 1..].starts_with(&[0x80, 0xA9]) => (b"\\u2029", 3),
            _ => {
                i += 1;
                continue;
            }
        };
        out.write_all(&json[from..i])?;
        out.write_all(escape)?;
        i += len;
        from = i;
    }
    out.write_all(&json[from..])
}
