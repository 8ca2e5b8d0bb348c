//! What a flamegraph will show, worked out before inferno sees the lines:
//! only frames at least `min_width` percent of the total wide are drawn,
//! so everything narrower can be summed up first. A file with a million
//! distinct stacks then reaches inferno as a few thousand lines that draw
//! the same picture, and only the drawn frames need colours.
//!
//! The reduced lines keep every drawn frame's start and width: a run of
//! narrow siblings becomes one line named after its first member, weighing
//! their sum, split wherever the sum would reach the drawing threshold, so
//! it stays undrawn and the siblings after it keep their place.

use std::borrow::Cow;

use inferno::flamegraph::color::PaletteMap;
use rustc_hash::FxHashMap;


use super::palette::{frame_colour, Lines, Scheme};
use crate::profile::State;

/// Lines for inferno and the colours of the frames they draw.
pub struct Drawn<'a> {
    /// `STACK COUNT` lines in the order inferno must draw them, which is
    /// not always sorted order: a shortened line (`A;f3_3 21`, standing for
    /// `A;f3_3;...`) can sort before a sibling it follows (`A;f3_38;...`).
    pub lines: Vec<Cow<'a, str>>,
    pub palette: PaletteMap,
    /// Every frame drawn, by where it is drawn: its own on/off split
    /// colours it in the wall view (see [`super::recolour`]).
    pub nodes: Vec<Node<'a>>,
}

/// One drawn rectangle: at `depth` (0 = the first frame under inferno's
/// `all`), starting `x` counts from the left, `all` wide, `on` of it on CPU.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    pub depth: u32,
    pub x: u64,
    pub name: &'a str,
    pub on: u64,
    pub all: u64,
}

/// A frame of the current line, whose rectangle is still growing.
struct Open<'a> {
    name: &'a str,
    /// The line up to and including this frame.
    path: &'a str,
    /// Counts to the left of this frame.
    x: u64,
    all: u64,
    on: u64,
    /// Time of lines that end at this frame.
    own: u64,
    /// The line that ended here, while it is the only one: it then goes to
    /// inferno as it is.
    own_line: Option<&'a str>,
    /// Where this frame's reduced lines start in the output.
    out_start: usize,
    /// Narrow children since the last drawn one: the first's name and
    /// their summed time.
    piece: Option<(&'a str, u64)>,
}

impl<'a> Open<'a> {
    fn new(name: &'a str, path: &'a str, x: u64, out_start: usize) -> Self {
        Open {
            name,
            path,
            x,
            all: 0,
            on: 0,
            own: 0,
            own_line: None,
            out_start,
            piece: None,
        }
    }

    /// The line for a run of narrow children, named after the first; its
    /// name is settled by [`settle_labels`].
    fn piece_line(&self, first: &str, time: u64) -> Reduced<'a> {
        let text = if self.path.is_empty() {
            format!("{first} {time}")
        } else {
            format!("{};{first} {time}", self.path)
        };
        Reduced {
            text: Cow::Owned(text),
            piece: true,
        }
    }
}

/// A line for inferno; `piece` lines stand for runs of narrow frames.
struct Reduced<'a> {
    text: Cow<'a, str>,
    piece: bool,
}

fn stack_of(line: &str) -> &str {
    line.rsplit_once(' ').map_or(line, |(stack, _)| stack)
}

/// Whether `line`'s stack passes through the frame that ends `path`.
fn passes(line: &str, path: &str) -> bool {
    let stack = stack_of(line);
    stack.starts_with(path) && matches!(stack.as_bytes().get(path.len()), None | Some(b';'))
}

/// A piece's last frame is never drawn, so its name only has to keep it
/// apart: inferno merges a frame with the same frame of the line before or
/// after it, and the first member's name can recur in the next run (a name
/// that sorts around a sibling with a space, `a`, `a b`, `a`). And a name
/// ending in a space and a number (`worker 2`), last on a line, reads to
/// inferno as a second count column. Such names get `_` marks until neither
/// can happen.
fn settle_labels(out: &mut [Reduced<'_>]) {
    for i in 0..out.len() {
        if !out[i].piece {
            continue;
        }
        loop {
            let line = &out[i].text;
            let path = stack_of(line);
            let label = path.rsplit(';').next().unwrap_or(path);
            let clash = |j: Option<usize>| {
                j.and_then(|j| out.get(j))
                    .is_some_and(|o| passes(&o.text, path))
            };
            if !(ends_like_a_count(label) || clash(i.checked_sub(1)) || clash(Some(i + 1))) {
                break;
            }
            let at = path.len();
            out[i].text.to_mut().insert(at, '_');
        }
    }
}

/// Whether inferno would take the end of `name` for a count: the text
/// after its last space is digits with at most one dot.
fn ends_like_a_count(name: &str) -> bool {
    name.rsplit_once(' ').is_some_and(|(_, tail)| {
        tail.bytes().filter(|&b| b == b'.').count() <= 1
            && tail.bytes().all(|b| b == b'.' || b.is_ascii_digit())
    })
}

#[derive(Default)]
struct Seen {
    all: u64,
    on: u64,
    leading: bool,
}

struct Walk<'a> {
    /// `open[0]` is inferno's root; `open[d + 1]` the frame at depth d.
    open: Vec<Open<'a>>,
    out: Vec<Reduced<'a>>,
    seen: FxHashMap<&'a str, Seen>,
    nodes: Vec<Node<'a>>,
    /// Counts of the lines walked so far.
    pos: u64,
    min_time: f64,
    leading: usize,
}

impl<'a> Walk<'a> {
    /// Closes frames until `keep` remain open.
    fn close_to(&mut self, keep: usize) {
        while self.open.len() > keep {
            let f = self.open.pop().expect("len > keep");
            let depth = self.open.len() - 1;
            let parent = self.open.last_mut().expect("the root stays open");
            if (f.all as f64) < self.min_time {
                // A narrow frame's descendants are narrower still, so it
                // has written nothing: it joins its parent's run.
                debug_assert_eq!(self.out.len(), f.out_start);
                parent.piece = match parent.piece {
                    Some((first, time)) if ((time + f.all) as f64) < self.min_time => {
                        Some((first, time + f.all))
                    }
                    Some((first, time)) => {
                        self.out.push(parent.piece_line(first, time));
                        Some((f.name, f.all))
                    }
                    None => Some((f.name, f.all)),
                };
                continue;
            }
            let seen = self.seen.entry(f.name).or_default();
            seen.all += f.all;
            seen.on += f.on;
            seen.leading |= depth < self.leading;
            self.nodes.push(Node {
                depth: depth as u32,
                x: f.x,
                name: f.name,
                on: f.on,
                all: f.all,
            });
            if let Some((first, time)) = f.piece {
                self.out.push(f.piece_line(first, time));
            }
            // Lines that end at a frame sort before its children's
            // (`A 5` < `A;B 3`), so its own time comes first.
            if f.own > 0 {
                self.out.insert(
                    f.out_start,
                    Reduced {
                        text: match f.own_line {
                            Some(line) => Cow::Borrowed(line),
                            None => Cow::Owned(format!("{} {}", f.path, f.own)),
                        },
                        piece: false,
                    },
                );
            }
            if let Some((first, time)) = parent.piece.take() {
                self.out.insert(f.out_start, parent.piece_line(first, time));
            }
        }
    }

    fn line(&mut self, line: &'a str, stack: &'a str, count: u64, waiting: bool) {
        let mut depth = 0;
        let mut same = true;
        let mut end = 0;
        for f in stack.split(';') {
            end += f.len();
            if !(same && depth + 1 < self.open.len() && self.open[depth + 1].name == f) {
                if same {
                    self.close_to(depth + 1);
                    same = false;
                }
                let out_start = self.out.len();
                self.open.push(Open::new(f, &stack[..end], self.pos, out_start));
            }
            depth += 1;
            end += 1;
        }
        if same {
            self.close_to(depth + 1);
        }
        for f in &mut self.open[1..] {
            f.all += count;
            if !waiting {
                f.on += count;
            }
        }
        self.pos += count;
        let leaf = self.open.last_mut().expect("a line has frames");
        leaf.own_line = if leaf.own == 0 { Some(line) } else { None };
        leaf.own += count;
    }
}

/// Works out what inferno will draw from sorted `STACK COUNT` lines.
pub fn from_sorted<'a>(
    lines: &[&'a str],
    min_width: f64,
    scheme: Scheme,
    shape: Lines,
) -> Drawn<'a> {
    // Two passes rather than one kept list: a million lines' worth of
    // parsed counts would cost more memory than reading them twice.
    let split = |l: &'a str| match l.rsplit_once(' ') {
        Some((stack, count)) => (stack, count.parse::<u64>().unwrap_or(0)),
        None => (l, 0),
    };
    let total: u64 = lines.iter().map(|&l| split(l).1).sum();
    let mut walk = Walk {
        open: vec![Open::new("", "", 0, 0)],
        out: Vec::new(),
        seen: FxHashMap::default(),
        nodes: Vec::new(),
        pos: 0,
        // inferno's own test: a frame is dropped when its width is under
        // `min_width` percent of the total, in floating point.
        min_time: min_width * total as f64 / 100.0,
        leading: shape.leading,
    };
    for &line in lines {
        let (stack, count) = split(line);
        let waiting = scheme == Scheme::Majority
            && stack
                .rsplit(';')
                .next()
                .is_some_and(|leaf| State::from_frame(leaf).is_some());
        walk.line(line, stack, count, waiting);
    }
    walk.close_to(1);
    if let Some((first, time)) = walk.open[0].piece.take() {
        walk.out.push(walk.open[0].piece_line(first, time));
    }
    settle_labels(&mut walk.out);

    let mut names: Vec<(&str, Seen)> = walk.seen.into_iter().collect();
    names.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut palette = PaletteMap::default();
    for (name, seen) in names {
        let c = frame_colour(name, seen.leading, shape, scheme, seen.on, seen.all);
        palette.insert(name, c);
    }
    Drawn {
        lines: walk.out.into_iter().map(|r| r.text).collect(),
        palette,
        nodes: walk.nodes,
    }
}
