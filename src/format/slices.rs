//! `<view>.slices`, written beside a capture's `<view>.folded`: the same
//! stacks with when their weight fell, so that `--from`/`--to` can draw any
//! range of the capture again. Folded files cannot say when.
//!
//! The file is text: a header line, then one line per stack,
//! `SPANS FOLDED-LINE`, where the folded line is exactly what the folded
//! writer puts in `<view>.folded` (thread frames included) and SPANS lists
//! its weight by slice, `FIRST[-LAST]:WEIGHT` joined by commas (a span over
//! several slices is an off-CPU interval, spread evenly over them; see
//! [`crate::profile::time`]):
//!
//! ```text
//! # fgbpf slices 1 slice_us=100000
//! 3:2,4:1 app-10;app-10;main;work 3
//! ```

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::folded::{read, Folder, Leading, Options};
use crate::profile::{Profile, Span};

const HEADER: &str = "# fgbpf slices 1 slice_us=";

/// The slices file that goes with a capture's folded file
/// (`oncpu.folded` → `oncpu.slices`).
pub fn beside(folded: &Path) -> PathBuf {
    folded.with_extension("slices")
}

/// Writes the stacks of `profile` that say when they fell; those that do
/// not (none, in a capture) are left out.
pub fn write(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let width = profile.meta.slice.unwrap_or(crate::probe::DEFAULT_SLICE);
    writeln!(out, "{HEADER}{}", width.as_micros())?;
    let folder = Folder::new(
        profile,
        &Options {
            leading: Leading::ProcessAndThread,
        },
    );
    let mut spans = String::new();
    for s in profile.stacks().iter().filter(|s| !s.spans.is_empty()) {
        spans.clear();
        for (i, p) in s.spans.iter().enumerate() {
            use std::fmt::Write as _;
            let sep = if i == 0 { "" } else { "," };
            let _ = match p.first == p.last {
                true => write!(spans, "{sep}{}:{}", p.first, p.weight),
                false => write!(spans, "{sep}{}-{}:{}", p.first, p.last, p.weight),
            };
        }
        writeln!(out, "{spans} {} {}", folder.stack(s), s.weight)?;
    }
    Ok(())
}

/// Reads a slices file into a profile with time; `folded_twin` is the
/// folded file it was written beside, whose `capture.json` entry gives the
/// kind and unit. `source` names it in errors.
pub fn read(path: &Path, folded_twin: &Path) -> Result<read::Loaded, String> {
    let bytes = super::input::read(path)?;
    let text = read::text_of(&bytes);
    let source = path.display().to_string();
    let mut lines = text.split('\n');
    let width = lines
        .next()
        .and_then(|h| h.trim_end().strip_prefix(HEADER))
        .and_then(|us| us.parse::<u64>().ok())
        .filter(|&us| us > 0)
        .ok_or_else(|| format!("{source}:1: not a slices file written by fgbpf (no `{HEADER}N` header)"))?;
    let mut folded = String::with_capacity(text.len());
    let mut spans = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = |msg: &str| format!("{source}:{}: {msg}", i + 2);
        let (list, rest) = line
            .split_once(' ')
            .ok_or_else(|| at("expected `SPANS FOLDED-LINE`"))?;
        let parsed = parse_spans(list).ok_or_else(|| at("bad spans: expected FIRST[-LAST]:WEIGHT,..."))?;
        spans.push(parsed);
        folded.push_str(rest);
        folded.push('\n');
    }
    let crate::format::sidecar::Measured { kind, unit, frequency, .. } = read::kind_of(folded_twin);
    let mut loaded = read::parse_timed(&source, folded.as_bytes(), unit, spans)?;
    let p = &mut loaded.profile;
    p.meta.kind = kind;
    p.meta.frequency = frequency;
    p.meta.slice = Some(Duration::from_micros(width));
    p.meta.target = folded_twin
        .file_name()
        .map_or_else(|| folded_twin.display().to_string(), |n| n.to_string_lossy().into());
    // Every line says when it fell: the slices span the capture.
    p.meta.duration = Duration::from_micros(width) * p.slice_count();
    Ok(loaded)
}

fn parse_spans(list: &str) -> Option<Vec<Span>> {
    list.split(',')
        .map(|part| {
            let (slices, weight) = part.split_once(':')?;
            let (first, last) = match slices.split_once('-') {
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                None => {
                    let s = slices.parse().ok()?;
                    (s, s)
                }
            };
            (first <= last).then_some(Span {
                first,
                last,
                weight: weight.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Thread, Unit};

    #[test]
    fn a_profile_with_time_reads_back_and_keeps_a_range() {
        let mut p = Profile::new(Unit::Microseconds);
        p.meta.slice = Some(Duration::from_millis(100));
        let t = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 7,
            tid: 8,
            process: "srv".into(),
            name: "w;1".into(),
        });
        let a = p.intern_frame(Frame::new("wait a", FrameKind::User));
        let b = p.intern_frame(Frame::new("b", FrameKind::Kernel));
        p.push(Stack { labels: None,
            thread: Some(t),
            frames: vec![a].into(),
            weight: 1000,
            spans: smallvec::smallvec![Span { first: 0, last: 9, weight: 1000 }],
        });
        p.push(Stack { labels: None,
            thread: Some(t),
            frames: vec![a, b].into(),
            weight: 7,
            spans: smallvec::smallvec![Span::at(3, 4), Span::at(12, 3)],
        });
        let dir = std::env::temp_dir().join(format!("fgbpf-slices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("offcpu.slices");
        let mut bytes = Vec::new();
        write(&p, &mut bytes).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("# fgbpf slices 1 slice_us=100000\n0-9:1000 srv-7;w:1-8;wait a 1000\n"), "{text}");
        let mut back = read(&path, &dir.join("offcpu.folded")).unwrap().profile;
        assert_eq!(back.unit, Unit::Microseconds, "offcpu files count microseconds");
        assert_eq!(back.total(), 1007);
        assert_eq!(back.slice_count(), 13);
        back.keep_slices(2, 5);
        assert_eq!(back.total(), 300 + 4);
        std::fs::write(&path, "# fgbpf slices 1 slice_us=100000\n1:2,2:2 a-1;a-1;x 5\n").unwrap();
        let e = read(&path, &dir.join("offcpu.folded")).unwrap_err();
        std::fs::write(&path, "a;b 3\n").unwrap();
        let e2 = read(&path, &dir.join("offcpu.folded")).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("add up to 4, its count is 5"), "{e}");
        assert!(e2.contains("not a slices file"), "{e2}");
    }
}
