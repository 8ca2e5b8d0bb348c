//! Folded stacks back into a [`Profile`], checked line by line so that a
//! bad file is refused with its line number instead of half-rendered.
//!
//! Rules, for fgbpf's own files and other tools' alike:
//! - a line is `frame;frame;...;leaf COUNT`; blank lines and lines starting
//!   with `# ` are skipped;
//! - COUNT is a whole number; a fractional one (`12.5`, which
//!   flamegraph.pl accepts) is rounded to the nearest whole number and
//!   reported in [`Loaded::rounded`];
//! - frame suffixes `_[k]`, `_[i]` and `_[j]` become kernel, inlined and JIT
//!   frames;
//! - the file is in fgbpf's layout when every line starts with two frames
//!   `NAME-NUMBER` (`PROCESS-PID;THREAD-TID`, see [`crate::format::folded`]).
//!   No common collapser writes that: stackcollapse-perf.pl's `--pid` adds
//!   one such frame and `--tid` writes `comm-PID/TID`. Those two frames
//!   then become the stack's [`Thread`], and bracketed frames such as
//!   `[lost stack]` become pseudo-frames, so a capture's folded file reads
//!   back into the profile it was written from.

use std::borrow::Cow;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::format::sidecar::Measured;
use crate::profile::frame_lists::FrameLists;
use crate::profile::names::group_of_frame;
use crate::profile::{Frame, FrameId, Kind, Profile, Span, Spans, Stack, Thread, Unit};

/// How a file's stacks identify where they ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// fgbpf's `PROCESS-PID;THREAD-TID;...`: stacks carry their thread.
    Fgbpf,
    /// Any other tool's: stacks only.
    Foreign,
}

#[derive(Debug)]
pub struct Loaded {
    pub profile: Profile,
    pub layout: Layout,
    /// Lines whose fractional count was rounded.
    pub rounded: usize,
}

/// What a file's weights measure, from its name: the folded format does not
/// say. `offcpu*` and `wall*` (fgbpf's time views) are microseconds, every
/// other name counts samples; `oncpu*` is an on-CPU profile.
pub fn kind_from_name(path: &Path) -> (Kind, Unit) {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.strip_suffix(".folded").unwrap_or(&name);
    let is = |view: &str| {
        stem.strip_prefix(view)
            .is_some_and(|rest| rest.chars().next().is_none_or(|c| !c.is_alphanumeric()))
    };
    if is("offcpu") {
        (Kind::OffCpu, Unit::Microseconds)
    } else if is("wall") {
        (Kind::Wall, Unit::Microseconds)
    } else if is("oncpu") {
        (Kind::OnCpu, Unit::Samples)
    } else {
        (Kind::Other, Unit::Samples)
    }
}

pub fn read_file(path: &Path) -> Result<Loaded, String> {
    from_bytes(path, &crate::format::input::read(path)?)
}

/// What a file's weights measure: as its capture recorded it in
/// `capture.json` (see [`crate::format::sidecar`]), else guessed from its
/// name (see [`kind_from_name`]); its sampling frequency and window, when
/// known.
pub fn kind_of(path: &Path) -> Measured {
    crate::format::sidecar::lookup(path).unwrap_or_else(|| {
        let (kind, unit) = kind_from_name(path);
        Measured { kind, unit, frequency: None, duration: None }
    })
}

/// A file's profile from its bytes, read already; `path` gives its kind
/// and unit (see [`kind_of`]) and names it in errors.
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Loaded, String> {
    let Measured { kind, unit, frequency, duration } = kind_of(path);
    let mut loaded = parse(&path.display().to_string(), bytes, unit)?;
    loaded.profile.meta.kind = kind;
    loaded.profile.meta.frequency = frequency;
    if let Some(d) = duration {
        loaded.profile.meta.duration = d;
    }
    loaded.profile.meta.target = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    Ok(loaded)
}

/// The largest total accepted: JSON readers (speedscope is JavaScript) hold
/// integers exactly up to 2^53, and below it microseconds still fit pprof's
/// int64 nanoseconds and inferno's colour arithmetic cannot overflow.
const MAX_TOTAL: u64 = 1 << 53;

/// One checked line of a folded file.
#[derive(Clone, Copy, Debug)]
pub struct Checked<'a> {
    /// The frames, root first, joined by `;`.
    pub stack: &'a str,
    pub count: u64,
    /// The whole line, trimmed.
    pub text: &'a str,
    /// Whether `text` is exactly `STACK COUNT`, one space between and a
    /// whole count: the form other readers (inferno) take as it is.
    pub canonical: bool,
    /// Whether it starts with fgbpf's `PROCESS-PID;THREAD-TID` frames,
    /// after a group's frame or not.
    pub has_thread: bool,
    /// Whether a group's frame (`--group-by`) comes first.
    pub grouped: bool,
}

/// What a whole file turned out to be, once every line was checked.
#[derive(Clone, Copy, Debug)]
pub struct Scan {
    pub layout: Layout,
    /// Lines whose fractional count was rounded.
    pub rounded: usize,
    pub total: u64,
    /// fgbpf's layout with every stack under a group's frame.
    pub grouped: bool,
}

/// Checks every line of folded text and hands each to `each`, without
/// building a profile: the fast path for commands that only pass lines on.
/// `source` names the text in errors (`SOURCE:LINE: ...`).
pub fn scan<'a>(
    source: &str,
    text: &'a str,
    mut each: impl FnMut(Checked<'a>),
) -> Result<Scan, String> {
    let mut rounded = 0;
    let mut total: u64 = 0;
    let mut lines = 0usize;
    let mut ours = true;
    let mut grouped = true;
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with("# ") {
            continue;
        }
        let at = |msg: String| format!("{source}:{}: {msg}", i + 1);
        let (checked, was_rounded) = check_line(line).map_err(at)?;
        rounded += usize::from(was_rounded);
        total = total
            .checked_add(checked.count)
            .filter(|&t| t <= MAX_TOTAL)
            .ok_or_else(|| at("the counts add up to more than 2^53".into()))?;
        lines += 1;
        ours &= checked.has_thread;
        grouped &= checked.grouped;
        each(checked);
    }
    if lines == 0 {
        return Err(format!("{source}: no stacks"));
    }
    if total == 0 {
        return Err(format!("{source}: no stacks (every count is 0)"));
    }
    let layout = if ours { Layout::Fgbpf } else { Layout::Foreign };
    Ok(Scan {
        layout,
        rounded,
        total,
        grouped: ours && grouped,
    })
}

/// The text of a folded file. Names are not always UTF-8 (Latin-1
/// symbols, raw thread names); a replacement character is better than
/// refusing the whole file. Checked the fast way first: the lossy decoder
/// is several times slower on the common, valid case.
pub fn text_of(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Parses folded text; `source` names it in errors (`SOURCE:LINE: ...`).
pub fn parse(source: &str, bytes: &[u8], unit: Unit) -> Result<Loaded, String> {
    parse_timed(source, bytes, unit, Vec::new())
}

/// Parses folded text whose stacks say when they fell: `spans[i]` goes
/// with the i-th stack line and must add up to its count (see
/// [`crate::format::slices`]); no spans: a plain folded file.
pub fn parse_timed(
    source: &str,
    bytes: &[u8],
    unit: Unit,
    mut spans: Vec<Vec<Span>>,
) -> Result<Loaded, String> {
    let text = text_of(bytes);
    let mut lines = Vec::new();
    let scanned = scan(source, &text, |l| lines.push((l.stack, l.count)))?;
    if !spans.is_empty() {
        if spans.len() != lines.len() {
            return Err(format!("{source}: {} stacks but {} lists of spans", lines.len(), spans.len()));
        }
        for (i, (s, &(_, count))) in spans.iter().zip(&lines).enumerate() {
            let sum: u64 = s.iter().map(|p| p.weight).sum();
            if sum != count {
                return Err(format!("{source}: stack {}: its spans add up to {sum}, its count is {count}", i + 1));
            }
        }
    }
    let mut spans = spans.drain(..).map(Some).chain(std::iter::repeat_with(|| None));
    let layout = scanned.layout;
    let mut profile = Profile::new(unit);
    // The same frame text recurs on many lines: intern each text once.
    let mut ids: FxHashMap<&str, FrameId> = FxHashMap::default();
    let mut lists = FrameLists::default();
    let mut list: Vec<FrameId> = Vec::new();
    let mut frames = Vec::new();
    for &(stack, count) in &lines {
        let spans = spans.next().flatten().map(Spans::from_vec).unwrap_or_default();
        if count == 0 {
            continue;
        }
        frames.clear();
        frames.extend(stack.split(';'));
        let (thread, code) = match layout {
            Layout::Fgbpf => {
                let group = group_of_frame(frames[0]).filter(|_| frames.len() > 2);
                let at = usize::from(group.is_some());
                let (process, pid) = id_frame(frames[at]).expect("checked by scan");
                let (name, tid) = id_frame(frames[at + 1]).expect("checked by scan");
                let t = profile.intern_thread(Thread {
                    pid,
                    start: 0,
                    tid,
                    process: process.into(),
                    name: name.into(),
                    group: group.map(str::to_string),
                });
                (Some(t), &frames[at + 2..])
            }
            Layout::Foreign => (None, &frames[..]),
        };
        let ours = layout == Layout::Fgbpf;
        list.clear();
        list.extend(code.iter().map(|f| {
            *ids.entry(f)
                .or_insert_with(|| profile.intern_frame(Frame::from_folded(f, ours)))
        }));
        profile.push(Stack {
            thread,
            frames: lists.share(&list),
            weight: count,
            spans,
            labels: None,
        });
    }
    profile.coalesce();
    Ok(Loaded {
        profile,
        layout,
        rounded: scanned.rounded,
    })
}

fn check_line(line: &str) -> Result<(Checked<'_>, bool), String> {
    let Some(split) = line.rfind([' ', '\t']) else {
        return Err(format!(
            "no count: expected `frame;frame;... COUNT`, found `{}`",
            excerpt(line)
        ));
    };
    let (stack, count_text) = (line[..split].trim_end(), &line[split + 1..]);
    let (count, was_rounded) = parse_count(count_text)?;
    if stack.is_empty() {
        return Err("no frames before the count".into());
    }
    if stack.starts_with(';') || stack.ends_with(';') || stack.contains(";;") {
        let n = stack.split(';').position(str::is_empty).unwrap_or(0);
        return Err(format!(
            "frame {} is empty (`;` at the start or end, or `;;`)",
            n + 1
        ));
    }
    let canonical =
        split == stack.len() && line.as_bytes()[split] == b' ' && !count_text.contains('.');
    let mut frames = stack.splitn(4, ';');
    let first = frames.next().unwrap_or_default();
    let ids = |p: Option<&str>, t: Option<&str>| {
        p.and_then(id_frame).is_some() && t.and_then(id_frame).is_some()
    };
    let (has_thread, grouped) = match group_of_frame(first) {
        Some(_) => {
            let after_group = ids(frames.next(), frames.next());
            (after_group, after_group)
        }
        None => (ids(Some(first), frames.next()), false),
    };
    Ok((
        Checked {
            stack,
            count,
            text: line,
            canonical,
            has_thread,
            grouped,
        },
        was_rounded,
    ))
}

/// A whole count, or a fractional one rounded half up (in decimal, so the
/// result does not depend on float formatting).
fn parse_count(s: &str) -> Result<(u64, bool), String> {
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let well_formed = if s.contains('.') {
        (whole.is_empty() || digits(whole)) && (frac.is_empty() || digits(frac)) && s != "."
    } else {
        digits(whole)
    };
    if !well_formed {
        return Err(format!(
            "the count `{}` is not a non-negative number",
            excerpt(s)
        ));
    }
    let too_big = || format!("the count {} is too large", excerpt(s));
    let mut n: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_big())?
    };
    let fractional = frac.bytes().any(|b| b != b'0');
    if frac.as_bytes().first().is_some_and(|&b| b >= b'5') {
        n = n.checked_add(1).ok_or_else(too_big)?;
    }
    Ok((n, fractional))
}

/// Long lines are cut in messages so one error stays one line.
fn excerpt(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(MAX).collect::<String>())
    }
}

/// `NAME-NUMBER`, as fgbpf writes process and thread frames.
fn id_frame(f: &str) -> Option<(&str, u32)> {
    let (name, id) = f.rsplit_once('-')?;
    if name.is_empty() || id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, id.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::folded::{self, Options};
    use crate::profile::{FrameKind, UNKNOWN};

    fn load(text: &str) -> Result<Loaded, String> {
        parse("f.folded", text.as_bytes(), Unit::Samples)
    }

    fn capture_like() -> Profile {
        let mut p = Profile::new(Unit::Samples);
        let t1 = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 10,
            tid: 11,
            process: "kworker/u8:2-events".into(),
            name: "wo;rk\ner".into(),
        });
        let t2 = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 10,
            tid: 10,
            process: "kworker/u8:2-events".into(),
            name: "".into(),
        });
        let f = |p: &mut Profile, n: &str, k| p.intern_frame(Frame::new(n, k));
        let main = f(&mut p, "main", FrameKind::User);
        let inl = f(&mut p, "helper", FrameKind::Inlined);
        let jit = f(&mut p, "Lfoo;::bar", FrameKind::Jit);
        let k = f(&mut p, "do_syscall_64", FrameKind::Kernel);
        let ku = f(&mut p, UNKNOWN, FrameKind::Kernel);
        let lost = f(&mut p, "[lost stack]", FrameKind::Pseudo);
        let unk = f(&mut p, UNKNOWN, FrameKind::User);
        for (thread, frames, weight) in [
            (t1, vec![main, inl, k, ku], 7),
            (t1, vec![main, jit], 3),
            (t2, vec![lost], 2),
            (t2, vec![unk, main], 1),
            (t2, vec![], 4),
        ] {
            p.push(Stack {
                thread: Some(thread),
                frames: frames.into(),
                weight,
                ..Default::default()
            });
        }
        p.coalesce();
        p
    }

    #[test]
    fn grouped_stacks_read_back_with_their_groups() {
        let mut p = Profile::new(Unit::Samples);
        // Group names are untrusted: a `;`, a line break, a `]`.
        for (tid, group) in [(1, "container 0123456789ab"), (2, "cgroup /a;b\nc]")] {
            let t = p.intern_thread(Thread {
                start: 0,
                pid: 1,
                tid,
                process: "srv".into(),
                name: "w".into(),
                group: Some(group.into()),
            });
            let main = p.intern_frame(Frame::new("main", FrameKind::User));
            p.push(Stack { thread: Some(t), frames: vec![main].into(), weight: tid.into(), ..Default::default() });
        }
        let text = folded::lines(&p, &Options::default()).join("\n");
        assert_eq!(text, "[container 0123456789ab];srv-1;w-1;main 1\n[cgroup /a:b?c]];srv-1;w-2;main 2");
        let back = load(&text).unwrap();
        assert_eq!(back.layout, Layout::Fgbpf);
        assert!(back.profile.is_grouped());
        let mut again = folded::lines(&back.profile, &Options::default());
        again.sort_by_key(|l| std::cmp::Reverse(l.starts_with("[container")));
        assert_eq!(again.join("\n"), text);
        let scan = scan("f", &text, |_| {}).unwrap();
        assert!(scan.grouped);
        // A group frame over no thread frames is another tool's stack.
        assert_eq!(load("[cgroup /x];main 3").unwrap().layout, Layout::Foreign);
        assert!(!scan_of("p-1;t-2;main 3").grouped);
    }

    fn scan_of(text: &str) -> Scan {
        scan("f", text, |_| {}).unwrap()
    }

    #[test]
    fn capture_round_trip_is_lossless() {
        let p = capture_like();
        let text = folded::lines(&p, &Options::default()).join("\n");
        let back = load(&text).unwrap();
        assert_eq!(back.layout, Layout::Fgbpf);
        assert_eq!(
            folded::lines(&back.profile, &Options::default()).join("\n"),
            text
        );
        let kinds = |p: &Profile| {
            let mut v: Vec<String> = p
                .stacks()
                .iter()
                .flat_map(|s| s.frames.iter().map(|&f| format!("{:?}", p.frame(f))))
                .collect();
            v.sort();
            v
        };
        let mut expected = kinds(&p);
        // The folded format cannot carry a `;` inside a name.
        for k in &mut expected {
            *k = k.replace("Lfoo;::bar", "Lfoo:::bar");
        }
        expected.sort();
        assert_eq!(kinds(&back.profile), expected);
        let t = back.profile.threads();
        assert!(t.iter().any(|t| t.pid == 10
            && t.tid == 11
            && &*t.process == "kworker/u8:2-events"
            && &*t.name == "wo:rk?er"));
    }

    #[test]
    fn foreign_files_keep_every_frame() {
        let l = load("perl-1234;main;[libc.so.6] 5\nperl-1234;run_0x12 2\n").unwrap();
        assert_eq!(l.layout, Layout::Foreign);
        let p = &l.profile;
        assert!(p.threads().is_empty());
        let s = &p.stacks()[0];
        assert_eq!(s.frames.len(), 3);
        assert_eq!(p.frame(s.frames[2]).kind, FrameKind::User);
        assert_eq!(p.total(), 7);
    }

    #[test]
    fn errors_name_the_line() {
        for (text, want) in [
            ("a;b 1\nno_count\n", "f.folded:2: no count"),
            ("a;b 1\r\n\r\na;b x\n", "f.folded:3: the count `x`"),
            ("a;b -1\n", "f.folded:1: the count `-1`"),
            ("a;;b 1\n", "f.folded:1: frame 2 is empty"),
            ("a; 1\n", "f.folded:1: frame 2 is empty"),
            (
                "a 99999999999999999999\n",
                "f.folded:1: the count 99999999999999999999 is too large",
            ),
            ("a 9007199254740992\nb 1\n", "f.folded:2: the counts add up"),
            ("", "f.folded: no stacks"),
            ("\n# comment\n\n", "f.folded: no stacks"),
            ("a 0\n", "f.folded: no stacks (every count is 0)"),
            ("a 1e3\n", "f.folded:1: the count `1e3`"),
            ("a .\n", "f.folded:1: the count `.`"),
        ] {
            let err = load(text).unwrap_err();
            assert!(err.starts_with(want), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn fractional_counts_round_half_up() {
        let l = load("a 1.5\nb 2.49\nc 3.0\nd .7\n").unwrap();
        let w = |n: &str| {
            let p = &l.profile;
            p.stacks()
                .iter()
                .find(|s| p.frame(s.frames[0]).name == n)
                .map(|s| s.weight)
        };
        assert_eq!(
            (w("a"), w("b"), w("c"), w("d")),
            (Some(2), Some(2), Some(3), Some(1))
        );
        assert_eq!(l.rounded, 3);
    }

    #[test]
    fn garbage_never_panics() {
        let inputs: [&[u8]; 6] = [
            b"\xff\xfe\x00 1",
            b";;; ;",
            b" 5",
            b"a-1;b-2 3\na 4",
            b"\t\t",
            b"a-1;b-99999999999 1",
        ];
        for bytes in inputs {
            let _ = parse("x", bytes, Unit::Samples);
        }
        // A line without thread frames makes the whole file foreign.
        assert_eq!(load("a-1;b-2 3\na 4").unwrap().layout, Layout::Foreign);
    }

    #[test]
    fn units_follow_file_names() {
        let k = |n: &str| kind_from_name(Path::new(n));
        assert_eq!(k("dir/offcpu.folded"), (Kind::OffCpu, Unit::Microseconds));
        assert_eq!(k("wall-before.folded"), (Kind::Wall, Unit::Microseconds));
        assert_eq!(k("oncpu.folded"), (Kind::OnCpu, Unit::Samples));
        assert_eq!(k("wallet.folded"), (Kind::Other, Unit::Samples));
        assert_eq!(k("perf.folded"), (Kind::Other, Unit::Samples));
    }
}
