//! `capture.json`, written next to a capture's files: what each folded
//! file measures (kind, unit, sampling frequency), which the folded format
//! itself cannot say. Readers take a file's kind and unit from it, and
//! guess from the file name only for files from elsewhere (other tools, or
//! a folded file copied out of its capture).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::profile::names::Leading;
use crate::profile::{Kind, Profile, Unit};

pub const FILE: &str = "capture.json";

/// What one view's files measure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// `oncpu`, `offcpu` or `wall`.
    pub kind: String,
    /// `samples` or `us`.
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub frequency: Option<u64>,
    /// `process` when the capture's report counted time by process
    /// (`--per-process`, a whole-system on- or off-CPU capture): the file
    /// keeps its thread frames, and `fgbpf report` counts as the capture
    /// did. Also what an SVG was drawn by when [`View::drawn`] is absent
    /// (files of earlier versions).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub roots: Option<String>,
    /// The root frames the capture's SVG of the file was drawn with:
    /// `program` (a whole host's default: one root per process name),
    /// `process` or `thread`. Re-rendering draws it the same way.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub drawn: Option<String>,
    /// The window recorded, in microseconds: what a wait's share of it
    /// is measured against (threads idle for the whole window).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_us: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sidecar {
    /// By file name (`oncpu.folded`, ...).
    pub files: BTreeMap<String, View>,
}

impl Sidecar {
    /// Records the folded file `name` holding `profile`, its report's
    /// table by process (`process_roots`) or not, its SVG drawn with
    /// `drawn` root frames.
    pub fn add(&mut self, name: &str, profile: &Profile, process_roots: bool, drawn: Leading) {
        let kind = match profile.meta.kind {
            Kind::OnCpu => "oncpu",
            Kind::OffCpu => "offcpu",
            Kind::Wall => "wall",
            Kind::Other => "other",
            Kind::Alloc => "alloc",
        };
        self.files.insert(
            name.to_string(),
            View {
                kind: kind.into(),
                unit: profile.unit.name().into(),
                frequency: profile.meta.frequency,
                roots: process_roots.then(|| "process".into()),
                drawn: drawn_word(drawn).map(String::from),
                duration_us: Some(profile.meta.duration.as_micros() as u64).filter(|&d| d > 0),
            },
        );
    }

    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}

/// What a folded file measures, as its capture recorded it (or as its
/// name suggests, [`super::folded::read::kind_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measured {
    pub kind: Kind,
    pub unit: Unit,
    pub frequency: Option<u64>,
    /// The window recorded (see [`View::duration_us`]).
    pub duration: Option<std::time::Duration>,
}

/// What the folded file at `path` measures, from the `capture.json` beside
/// it (read once); `None` when there is none, or it does not list the
/// file, or it cannot be read.
pub fn lookup(path: &Path) -> Option<Measured> {
    let view = view(path)?;
    let kind = match view.kind.as_str() {
        "oncpu" => Kind::OnCpu,
        "offcpu" => Kind::OffCpu,
        "wall" => Kind::Wall,
        "alloc" => Kind::Alloc,
        _ => Kind::Other,
    };
    let unit = match view.unit.as_str() {
        "us" => Unit::Microseconds,
        "samples" => Unit::Samples,
        _ => return None,
    };
    Some(Measured {
        kind,
        unit,
        frequency: view.frequency,
        duration: view.duration_us.map(std::time::Duration::from_micros),
    })
}

/// Whether the capture drew the folded file at `path` with one root per
/// process (see [`View::roots`]).
pub fn process_roots(path: &Path) -> bool {
    view(path).is_some_and(|v| v.roots.as_deref() == Some("process"))
}

/// How the capture drew the folded file at `path` (see [`View::drawn`]):
/// `None` when no capture says.
pub fn drawn(path: &Path) -> Option<Leading> {
    let v = view(path)?;
    match v.drawn.as_deref() {
        Some(word) => [Leading::Program, Leading::Process, Leading::ProcessAndThread]
            .into_iter()
            .find(|&l| drawn_word(l) == Some(word)),
        None => Some(match v.roots.as_deref() {
            Some("process") => Leading::Process,
            _ => Leading::ProcessAndThread,
        }),
    }
}

/// The word [`View::drawn`] says `leading` with.
fn drawn_word(leading: Leading) -> Option<&'static str> {
    match leading {
        Leading::Program => Some("program"),
        Leading::Process => Some("process"),
        Leading::ProcessAndThread => Some("thread"),
        Leading::None => None,
    }
}

fn view(path: &Path) -> Option<View> {
    let dir = path.parent()?;
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let meta = std::fs::symlink_metadata(dir.join(FILE)).ok()?;
    // A capture's own sidecar is a small regular file.
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    let text = std::fs::read(dir.join(FILE)).ok()?;
    let mut sidecar: Sidecar = serde_json::from_slice(&text).ok()?;
    sidecar.files.remove(path.file_name()?.to_str()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_view_reads_back() {
        let dir = std::env::temp_dir().join(format!("fgbpf-sidecar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut p = Profile::new(Unit::Microseconds);
        p.meta.kind = Kind::Wall;
        p.meta.frequency = Some(499);
        p.meta.duration = std::time::Duration::from_millis(2500);
        let mut s = Sidecar::default();
        s.add("renamed.folded", &p, true, Leading::Program);
        s.add("old.folded", &p, true, Leading::None);
        let mut bytes = Vec::new();
        s.write(&mut bytes).unwrap();
        std::fs::write(dir.join(FILE), bytes).unwrap();
        let got = lookup(&dir.join("renamed.folded"));
        let missing = lookup(&dir.join("other.folded"));
        let roots = process_roots(&dir.join("renamed.folded"));
        let drawn_new = drawn(&dir.join("renamed.folded"));
        // A capture.json without `drawn` (an earlier version's) draws as
        // its `roots` say.
        let drawn_old = drawn(&dir.join("old.folded"));
        let drawn_none = drawn(&dir.join("other.folded"));
        std::fs::remove_dir_all(&dir).unwrap();
        let duration = Some(std::time::Duration::from_millis(2500));
        assert_eq!(got, Some(Measured { kind: Kind::Wall, unit: Unit::Microseconds, frequency: Some(499), duration }));
        assert!(roots);
        assert_eq!((drawn_new, drawn_old, drawn_none), (Some(Leading::Program), Some(Leading::Process), None));
        assert_eq!(missing, None);
    }
}
