//! Interactive flamegraphs (search, zoom) rendered by inferno, with
//! fgbpf's deterministic palette.

use std::borrow::Cow;
use std::io::{self, Write};

use inferno::flamegraph::{self, color::PaletteMap, Direction};
use rayon::slice::ParallelSliceMut;

use super::recolour::{self, escape};
use super::{drawn, narrow};
use super::folded::{self, Leading};
use super::palette::{Heat, Lines, Scheme};
use crate::profile::{Profile, PARALLEL_FROM};

#[derive(Clone, Debug)]
pub struct Options {
    pub title: String,
    pub subtitle: Option<String>,
    pub leading: Leading,
    pub scheme: Scheme,
    /// Frames narrower than this percentage of the total are omitted.
    pub min_width: f64,
    /// Icicle layout: roots at the top.
    pub inverted: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            title: "Flame Graph".into(),
            subtitle: None,
            leading: Leading::ProcessAndThread,
            scheme: Scheme::Heat(Heat::OnCpu),
            min_width: 0.1,
            inverted: false,
        }
    }
}

/// Draws a profile from its lines cut after their first frame too narrow
/// to draw ([`narrow`]): its full lines are never all held at once.
pub fn write(profile: &Profile, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let folder = folded::Folder::new(
        profile,
        &folded::Options {
            leading: opts.leading,
        },
    );
    let shape = Lines::ours(opts.leading).grouped(profile.is_grouped());
    let lines = narrow::lines(profile, &folder, opts.min_width, opts.scheme);
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    render_sorted(&lines, profile.unit.name(), shape, opts, out)
}

/// Renders `STACK COUNT` lines in any order; shared by captures and by
/// re-rendering files. `shape` tells how to read frames for colouring.
pub fn render(
    mut lines: Vec<&str>,
    count_name: &str,
    shape: Lines,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    // inferno sorts on one thread; sorting here uses every CPU, and the
    // palette needs the sorted order too.
    if lines.len() >= PARALLEL_FROM {
        lines.par_sort_unstable();
    } else {
        lines.sort_unstable();
    }
    render_sorted(&lines, count_name, shape, opts, out)
}

/// Renders lines in the order given, the order sorting them gives (or
/// that of cut lines, see [`narrow`]).
fn render_sorted(
    lines: &[&str],
    count_name: &str,
    shape: Lines,
    opts: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    if lines.is_empty() {
        return write_empty(opts, out);
    }
    let mut drawn = drawn::from_sorted(lines, opts.min_width, opts.scheme, shape);
    let mut svg = Vec::new();
    let frame_height = draw(&drawn.lines, count_name, opts, &mut drawn.palette, &mut svg)?;
    let svg = String::from_utf8(svg).map_err(io::Error::other)?;
    let layout = recolour::Layout {
        frame_height,
        scheme: opts.scheme,
        shape,
    };
    out.write_all(recolour::recolour(&svg, &drawn.nodes, &layout).as_bytes())
}

/// inferno's part: lines to SVG, drawn in the order given. Returns the
/// height of a frame.
fn draw(
    lines: &[Cow<'_, str>],
    count_name: &str,
    opts: &Options,
    palette: &mut PaletteMap,
    out: &mut dyn Write,
) -> io::Result<usize> {
    let mut fopts = flamegraph::Options::default();
    fopts.title = opts.title.clone();
    fopts.subtitle = opts.subtitle.clone();
    fopts.count_name = count_name.to_string();
    fopts.deterministic = true;
    fopts.hash = true;
    fopts.min_width = opts.min_width;
    fopts.palette_map = Some(palette);
    // Flame-chart mode is inferno's way to take lines in a given order
    // (it reverses them, then draws them unsorted); a flame graph in the
    // order the reduction worked out is what it then draws.
    fopts.flame_chart = true;
    if opts.inverted {
        fopts.direction = Direction::Inverted;
    }
    flamegraph::from_lines(&mut fopts, lines.iter().rev().map(|l| l.as_ref()), out)
        .map_err(|e| io::Error::other(format!("rendering flamegraph: {e}")))?;
    Ok(fopts.frame_height)
}

/// inferno answers empty input with an error picture; say plainly that the
/// capture saw nothing instead.
fn write_empty(opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let title = escape(&opts.title);
    let sub = escape(opts.subtitle.as_deref().unwrap_or(""));
    write!(
        out,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="1200" height="120" xmlns="http://www.w3.org/2000/svg">
<rect x="0" y="0" width="1200" height="120" fill="#eeeeee"/>
<text x="600" y="30" text-anchor="middle" font-family="monospace" font-size="17">{title}</text>
<text x="600" y="55" text-anchor="middle" font-family="monospace" font-size="12">{sub}</text>
<text x="600" y="90" text-anchor="middle" font-family="monospace" font-size="14">No samples were recorded: the target did not run (or wait) during the capture.</text>
</svg>
"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Thread, Unit};

    fn render(p: &Profile, title: &str) -> String {
        let mut out = Vec::new();
        let opts = Options {
            title: title.into(),
            subtitle: Some(format!("sub {title}")),
            ..Default::default()
        };
        write(p, &opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn hostile_names_are_escaped() {
        let evil = "<svg onload=alert(1)>&\"'";
        let mut p = Profile::new(Unit::Samples);
        let t = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 1,
            tid: 2,
            process: evil.into(),
            name: evil.into(),
        });
        let f = p.intern_frame(Frame::new(format!("fn{evil}"), FrameKind::User));
        p.push(Stack {
            thread: Some(t),
            frames: vec![f].into(),
            weight: 5,
            ..Default::default()
        });
        let svg = render(&p, evil);
        assert!(!svg.contains("<svg onload"), "unescaped markup in SVG");
        assert!(svg.contains("&lt;svg onload=alert(1)&gt;"));
    }

    #[test]
    fn empty_profile_says_no_samples() {
        let p = Profile::new(Unit::Samples);
        let svg = render(&p, "<x>");
        assert!(svg.contains("No samples"));
        assert!(svg.contains("&lt;x&gt;") && !svg.contains("<x>"));
    }

    #[test]
    fn deterministic_output() {
        let mut p = Profile::new(Unit::Samples);
        let a = p.intern_frame(Frame::new("a", FrameKind::User));
        let b = p.intern_frame(Frame::new("b", FrameKind::Kernel));
        p.push(Stack {
            thread: None,
            frames: vec![a, b].into(),
            weight: 3,
            ..Default::default()
        });
        p.push(Stack {
            thread: None,
            frames: vec![a].into(),
            weight: 1,
            ..Default::default()
        });
        assert_eq!(render(&p, "t"), render(&p, "t"));
    }
}

#[cfg(test)]
mod reduction_tests {
    use super::*;

    /// Lines with shared trunks, bushy narrow tails, lines that end inside
    /// other lines' stacks, and state frames, from a fixed seed.
    fn lines(n: usize, seed: u64) -> Vec<String> {
        let mut x = seed;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut out = Vec::new();
        for i in 0..n {
            let mut frames = vec![
                format!("srv-{}", 1 + next(2)),
                format!("w-{}", 10 + next(3)),
            ];
            let depth = 1 + next(12) as usize;
            for d in 0..depth {
                frames.push(format!("f{}_{}", d, next(if d < 3 { 3 } else { 40 })));
            }
            match next(6) {
                0 => frames.push("[sleeping]".into()),
                1 => frames.push(format!("leaf{i}_[k]")),
                _ => {}
            }
            let count = if next(10) == 0 {
                1 + next(5000)
            } else {
                1 + next(20)
            };
            out.push(format!("{} {count}", frames.join(";")));
        }
        out
    }

    fn both(text: &[String], opts: &Options, shape: Lines) -> (String, String, bool) {
        let mut sorted: Vec<&str> = text.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        let mut reduced = Vec::new();
        render(sorted.clone(), "samples", shape, opts, &mut reduced).unwrap();
        let d = drawn::from_sorted(&sorted, opts.min_width, opts.scheme, shape);
        let mut palette = d.palette;
        // Every line, drawn the way inferno draws a file by itself.
        let mut fopts = flamegraph::Options::default();
        fopts.title = opts.title.clone();
        fopts.subtitle = opts.subtitle.clone();
        fopts.count_name = "samples".into();
        fopts.deterministic = true;
        fopts.hash = true;
        fopts.min_width = opts.min_width;
        fopts.palette_map = Some(&mut palette);
        if opts.inverted {
            fopts.direction = Direction::Inverted;
        }
        let mut full = Vec::new();
        flamegraph::from_lines(&mut fopts, sorted.iter().copied(), &mut full).unwrap();
        // The same recolouring of what inferno drew from every line.
        let layout = recolour::Layout {
            frame_height: fopts.frame_height,
            scheme: opts.scheme,
            shape,
        };
        let full = recolour::recolour(&String::from_utf8(full).unwrap(), &d.nodes, &layout);
        (
            String::from_utf8(reduced).unwrap(),
            full,
            d.lines.len() * 2 < sorted.len(),
        )
    }

    #[test]
    fn reduced_lines_draw_the_same_picture() {
        let shape = Lines {
            leading: 2,
            ours: true,
        };
        for (seed, min_width, scheme, inverted) in [
            (1, 0.1, Scheme::Heat(Heat::OnCpu), false),
            (2, 0.5, Scheme::Majority, false),
            (3, 2.0, Scheme::Heat(Heat::OffCpu), true),
            (4, 0.01, Scheme::Majority, false),
        ] {
            let text = lines(3000, seed);
            let opts = Options {
                min_width,
                scheme,
                inverted,
                ..Default::default()
            };
            let (reduced, full, fewer) = both(&text, &opts, shape);
            assert!(fewer, "seed {seed}: the lines were not reduced");
            assert!(reduced == full, "seed {seed}: pictures differ");
        }
    }

    #[test]
    fn names_that_sort_oddly_keep_inferno_order() {
        // `A 5` sorts before `A b;...`, which sorts before `A;c`: inferno
        // draws the frame `A` twice, and the reduced lines must too.
        let mut text: Vec<String> = ["A 500", "A b;x 300", "A;c 400", "A;d 2", "A;e 1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        text.extend((0..200).map(|i| format!("A;z{i} 1")));
        let opts = Options {
            min_width: 1.0,
            ..Default::default()
        };
        let shape = Lines {
            leading: 0,
            ours: false,
        };
        let (reduced, full, _) = both(&text, &opts, shape);
        assert!(reduced == full, "pictures differ");
    }
}

#[cfg(test)]
mod wall_palette_tests {
    use super::*;

    fn fill_of(svg: &str, name: &str) -> (u8, u8, u8) {
        let at = svg.find(&format!("<title>{name} (")).expect(name);
        let rect = &svg[at..];
        let fill = &rect[rect.find("fill=\"rgb(").expect("fill") + 10..];
        let nums: Vec<u8> = fill[..fill.find(')').unwrap()]
            .split(',')
            .map(|n| n.trim().parse().unwrap())
            .collect();
        (nums[0], nums[1], nums[2])
    }

    #[test]
    fn waiting_frames_are_cool_and_computing_frames_warm() {
        let lines = vec!["p-1;p-1;main;work 30", "p-1;p-1;main;nap;[sleeping] 70"];
        let opts = Options {
            scheme: Scheme::Majority,
            ..Default::default()
        };
        let shape = Lines {
            leading: 2,
            ours: true,
        };
        let mut out = Vec::new();
        render(lines, "us", shape, &opts, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        let (r, _, b) = fill_of(&svg, "nap");
        assert!(b > r, "nap: {r} {b}");
        let (r, _, b) = fill_of(&svg, "work");
        assert!(r > b, "work: {r} {b}");
        let (r, g, b) = fill_of(&svg, "p-1");
        assert!(
            r > 150 && g > 150 && b > 180,
            "process frame is grey-violet: {r} {g} {b}"
        );
    }

    #[test]
    fn only_drawn_frames_are_coloured() {
        let mut lines = vec!["a;b 1000".to_string()];
        lines.extend((0..500).map(|i| format!("a;leaf{i} 1")));
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut sorted = lines.clone();
        sorted.sort_unstable();
        let shape = Lines {
            leading: 0,
            ours: false,
        };
        let d = drawn::from_sorted(&sorted, 0.1, Scheme::Heat(Heat::OnCpu), shape);
        assert!(d.palette.get("a").is_some() && d.palette.get("b").is_some());
        assert!(d.palette.get("leaf1").is_none(), "1 of 1500 is under 0.1%");
        let d = drawn::from_sorted(&sorted, 0.0, Scheme::Heat(Heat::OnCpu), shape);
        assert!(d.palette.get("leaf1").is_some());
    }
}

#[cfg(test)]
mod program_tests {
    use super::*;
    use crate::format::capture;
    use crate::profile::{Frame, FrameKind, Stack, Thread, Unit};

    /// A whole host's shape: a database of `sessions` one-thread
    /// processes (each its own process, as PostgreSQL's sessions are), a
    /// server of one process and four threads, and a shell.
    fn host(sessions: u32) -> Profile {
        let mut p = Profile::new(Unit::Microseconds);
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let exec = p.intern_frame(Frame::new("exec_query", FrameKind::User));
        let lock = p.intern_frame(Frame::new("LockAcquire", FrameKind::User));
        let sleep = p.intern_frame(Frame::new("[sleeping]", FrameKind::Pseudo));
        let serve = p.intern_frame(Frame::new("serve", FrameKind::User));
        let thread = |p: &mut Profile, process: &str, pid: u32, tid: u32, name: &str| {
            p.intern_thread(Thread { start: 0, group: None, pid, tid, process: process.into(), name: name.into() })
        };
        for n in 0..sessions {
            let pid = 472_200 + n;
            let t = thread(&mut p, "postgres", pid, pid, "postgres");
            p.push(Stack { thread: Some(t), frames: vec![main, exec].into(), weight: 300 + u64::from(n), ..Default::default() });
            p.push(Stack { thread: Some(t), frames: vec![main, exec, lock, sleep].into(), weight: 700, ..Default::default() });
        }
        for tid in 900..904 {
            let t = thread(&mut p, "nginx", 900, tid, "worker");
            p.push(Stack { thread: Some(t), frames: vec![main, serve].into(), weight: 2000, ..Default::default() });
        }
        let t = thread(&mut p, "bash", 77, 77, "bash");
        p.push(Stack { thread: Some(t), frames: vec![main].into(), weight: 500, ..Default::default() });
        p.coalesce();
        p
    }

    fn draw(p: &Profile, leading: Leading) -> String {
        let opts = capture::wall_svg("system", std::time::Duration::from_secs(3), 99, "now", leading);
        let mut out = Vec::new();
        write(p, &opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The `<title>` texts of the frames drawn at the bottom level (the
    /// greatest `y` of the frames' rectangles, inferno's flame layout).
    fn bottom(svg: &str) -> Vec<String> {
        let mut frames = Vec::new();
        for g in svg.split("<g>").skip(1) {
            let (Some(t), Some(y)) = (g.find("<title>"), g.find("<rect ").and_then(|r| g[r..].find(" y=\"").map(|y| r + y + 4))) else {
                continue;
            };
            let title = &g[t + 7..t + g[t..].find("</title>").unwrap()];
            let y: f64 = g[y..y + g[y..].find('"').unwrap()].parse().unwrap();
            frames.push((y, title.to_string()));
        }
        let lowest = frames.iter().map(|f| f.0).fold(f64::MIN, f64::max);
        // The bottom row is the "all" frame; the programs stand on it.
        let above = frames.iter().map(|f| f.0).filter(|&y| y < lowest).fold(f64::MIN, f64::max);
        let mut names: Vec<String> =
            frames.into_iter().filter(|f| f.0 == above).map(|f| f.1[..f.1.find(" (").unwrap()].to_string()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_whole_host_is_drawn_by_program() {
        let p = host(30);
        let svg = draw(&p, Leading::Program);
        assert_eq!(bottom(&svg), ["bash", "nginx", "postgres"]);
        // Each program's label is its name, not a PID cut to fit.
        assert!(svg.contains(">postgres<") && svg.contains(">nginx<"), "labels");
        assert!(!svg.contains("postgres-4722"), "a process frame was drawn");
        // The database's 30 sessions are one box of all their time.
        let total: u64 = (0..30).map(|n| 1000 + n).sum();
        assert!(svg.contains(&format!("<title>postgres ({} us, ", crate::profile::thousands(total))), "{}", &svg[..400]);
        // The title says what the roots are.
        assert!(svg.contains("Wall-clock flame graph: system, by program</text>"), "title");
        // Per process, the sessions are 30 towers again.
        let per_process = bottom(&draw(&p, Leading::Process));
        assert_eq!(per_process.iter().filter(|n| n.starts_with("postgres-")).count(), 30, "{per_process:?}");
        assert!(!draw(&p, Leading::Process).contains(", by program"));
    }

    #[test]
    fn program_frames_keep_the_palette() {
        let p = host(5);
        let (a, b) = (draw(&p, Leading::Program), draw(&p, Leading::Program));
        assert!(a == b, "the same profile drew two pictures");
        let fill = |svg: &str, name: &str| {
            let at = svg.find(&format!("<title>{name} (")).expect(name);
            let rect = &svg[at..];
            let f = &rect[rect.find("fill=\"rgb(").unwrap() + 10..];
            f[..f.find(')').unwrap()].split(',').map(|n| n.trim().parse::<u8>().unwrap()).collect::<Vec<_>>()
        };
        // A program frame is a pseudo-frame: grey-violet, as process and
        // thread frames are, and shaded by its name alone.
        let c = fill(&a, "postgres");
        assert!(c[0] > 150 && c[1] > 150 && c[2] > 180, "{c:?}");
        let want = super::super::palette::color(&Frame::new("postgres", FrameKind::Pseudo), super::super::palette::Heat::OnCpu);
        assert_eq!(c, [want.r, want.g, want.b]);
    }
}
