//! Interactive flamegraphs (search, zoom) rendered by inferno, with
//! fgbpf's deterministic palette.

use std::io::{self, Write};

use inferno::flamegraph::{self, color::PaletteMap, Direction};

use super::breakdown;
use super::folded::{self, sanitize, Leading};
use super::palette::{self, Heat};
use crate::profile::{Frame, FrameKind, Profile};

#[derive(Clone, Debug)]
pub struct Options {
    pub title: String,
    pub subtitle: Option<String>,
    pub leading: Leading,
    pub heat: Heat,
    /// Frames narrower than this percentage of the total are omitted.
    pub min_width: f64,
    /// Icicle layout: roots at the top.
    pub inverted: bool,
    /// Colours prepared by the caller (e.g. the wall-clock view's warm and
    /// cool frames); by default every frame is coloured with `heat`.
    pub palette: Option<PaletteMap>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            title: "Flame Graph".into(),
            subtitle: None,
            leading: Leading::ProcessAndThread,
            heat: Heat::OnCpu,
            min_width: 0.1,
            inverted: false,
            palette: None,
        }
    }
}

/// The palette for every frame the SVG will show, including the leading
/// process and thread frames.
pub fn palette_for(profile: &Profile, leading: Leading, heat: Heat) -> PaletteMap {
    let mut map = PaletteMap::default();
    extend_palette(&mut map, profile, leading, heat);
    map
}

/// Colours the frames of `profile` not yet in `map` with `heat`.
pub fn extend_palette(map: &mut PaletteMap, profile: &Profile, leading: Leading, heat: Heat) {
    let frames = profile.frames().iter().map(|f| {
        (
            format!("{}{}", sanitize(&f.name), f.kind.suffix()),
            f.clone(),
        )
    });
    palette::fill(map, frames, heat);
    let pseudo = profile
        .threads()
        .iter()
        .flat_map(|t| folded::leading_frames(t, leading));
    palette::fill(
        map,
        pseudo.map(|n| (n.clone(), Frame::new(n, FrameKind::Pseudo))),
        heat,
    );
}

/// The wall-clock view's palette. inferno colours by name, so a name gets
/// one colour: warm when most of its time was on CPU, cool when most of it
/// was spent waiting (in stacks that end in an off-CPU state frame).
pub fn wall_palette(profile: &Profile, leading: Leading) -> PaletteMap {
    let mut on = vec![0u64; profile.frames().len()];
    let mut all = vec![0u64; profile.frames().len()];
    for s in profile.stacks() {
        let waiting = breakdown::is_off_cpu(profile, s);
        let mut seen = std::collections::HashSet::new();
        for &f in s.frames.iter().filter(|&&f| seen.insert(f)) {
            all[f as usize] += s.weight;
            if !waiting {
                on[f as usize] += s.weight;
            }
        }
    }
    let mut map = PaletteMap::default();
    for (i, f) in profile.frames().iter().enumerate() {
        let heat = if on[i] * 2 >= all[i] {
            Heat::OnCpu
        } else {
            Heat::OffCpu
        };
        palette::fill(
            &mut map,
            [(
                format!("{}{}", sanitize(&f.name), f.kind.suffix()),
                f.clone(),
            )],
            heat,
        );
    }
    extend_palette(&mut map, profile, leading, Heat::OnCpu);
    map
}

pub fn write(profile: &Profile, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let lines = folded::lines(
        profile,
        &folded::Options {
            leading: opts.leading,
        },
    );
    let mut palette = opts
        .palette
        .clone()
        .unwrap_or_else(|| palette_for(profile, opts.leading, opts.heat));
    write_lines(&lines, profile.unit.name(), opts, &mut palette, out)
}

/// Renders folded lines; shared by captures and by re-rendering files.
pub fn write_lines(
    lines: &[String],
    count_name: &str,
    opts: &Options,
    palette: &mut PaletteMap,
    out: &mut dyn Write,
) -> io::Result<()> {
    if lines.is_empty() {
        return write_empty(opts, out);
    }
    let mut fopts = flamegraph::Options::default();
    fopts.title = opts.title.clone();
    fopts.subtitle = opts.subtitle.clone();
    fopts.count_name = count_name.to_string();
    fopts.deterministic = true;
    fopts.hash = true;
    fopts.min_width = opts.min_width;
    fopts.palette_map = Some(palette);
    if opts.inverted {
        fopts.direction = Direction::Inverted;
    }
    flamegraph::from_lines(&mut fopts, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(format!("rendering flamegraph: {e}")))
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

/// Escapes text for SVG/XML content and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Stack, Thread, Unit};

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
            pid: 1,
            tid: 2,
            process: evil.into(),
            name: evil.into(),
        });
        let f = p.intern_frame(Frame::new(format!("fn{evil}"), FrameKind::User));
        p.push(Stack {
            thread: Some(t),
            frames: vec![f],
            weight: 5,
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
            frames: vec![a, b],
            weight: 3,
        });
        p.push(Stack {
            thread: None,
            frames: vec![a],
            weight: 1,
        });
        assert_eq!(render(&p, "t"), render(&p, "t"));
    }
}

#[cfg(test)]
mod wall_palette_tests {
    use super::*;
    use crate::profile::{Stack, Thread, Unit};

    #[test]
    fn waiting_frames_are_cool_and_computing_frames_warm() {
        let mut p = Profile::new(Unit::Microseconds);
        let t = p.intern_thread(Thread {
            pid: 1,
            tid: 1,
            process: "p".into(),
            name: "p".into(),
        });
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let work = p.intern_frame(Frame::new("work", FrameKind::User));
        let nap = p.intern_frame(Frame::new("nap", FrameKind::User));
        let state = p.intern_frame(Frame::new("[sleeping]", FrameKind::Pseudo));
        p.push(Stack {
            thread: Some(t),
            frames: vec![main, work],
            weight: 30,
        });
        p.push(Stack {
            thread: Some(t),
            frames: vec![main, nap, state],
            weight: 70,
        });
        let map = wall_palette(&p, Leading::ProcessAndThread);
        let nap_c = map.get("nap").unwrap();
        let work_c = map.get("work").unwrap();
        assert!(nap_c.b > nap_c.r, "{nap_c:?}");
        assert!(work_c.r > work_c.b, "{work_c:?}");
    }
}
