//! Deterministic frame colours, pre-filled into inferno's `PaletteMap`
//! (inferno has no palette that tells kernel from user code, or on-CPU
//! from off-CPU time, by itself).
//!
//! Families: on-CPU user code warm (red-yellow), kernel code orange,
//! inlined aqua, JIT green; off-CPU time cool (blue); pseudo-frames
//! (process, thread) grey-violet, off-CPU states dark blue.

use inferno::flamegraph::color::Color;

use super::folded::Leading;
use crate::profile::{Frame, FrameKind};

/// Whether a frame's time was spent running or waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heat {
    OnCpu,
    OffCpu,
}

/// FNV-1a: stable across runs and platforms, unlike std's hasher.
fn hash(name: &str) -> u32 {
    name.bytes().fold(0x811c9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x01000193)
    })
}

/// A value in 0..=1 from the name, so the same name keeps its shade.
fn shade(name: &str) -> f32 {
    (hash(name) % 1000) as f32 / 1000.0
}

fn mix(lo: (u8, u8, u8), hi: (u8, u8, u8), t: f32) -> Color {
    let l = |a: u8, b: u8| (a as f32 + (b as f32 - a as f32) * t).round() as u8;
    Color {
        r: l(lo.0, hi.0),
        g: l(lo.1, hi.1),
        b: l(lo.2, hi.2),
    }
}

/// The colour of `frame` (by its folded name) when its time is `heat`.
pub fn color(frame: &Frame, heat: Heat) -> Color {
    let t = shade(&frame.name);
    match (heat, frame.kind) {
        (_, FrameKind::Pseudo) if frame.name.starts_with('[') => {
            mix((40, 60, 140), (70, 90, 170), t)
        }
        (_, FrameKind::Pseudo) => mix((170, 160, 190), (200, 190, 215), t),
        // The waker's side of an offwake stack: apart from both heats.
        (_, FrameKind::Waker) => mix((120, 60, 170), (175, 120, 220), t),
        (Heat::OnCpu, FrameKind::User) => mix((205, 50, 0), (255, 210, 55), t),
        (Heat::OnCpu, FrameKind::Kernel) => mix((215, 110, 0), (245, 160, 40), t),
        (Heat::OnCpu, FrameKind::Inlined) => mix((50, 180, 170), (110, 220, 210), t),
        (Heat::OnCpu, FrameKind::Jit) => mix((60, 170, 50), (120, 220, 90), t),
        (Heat::OffCpu, FrameKind::Kernel) => mix((60, 110, 200), (100, 150, 230), t),
        (Heat::OffCpu, _) => mix((0, 150, 200), (90, 200, 255), t),
    }
}

/// How the frames of folded lines are coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Every frame's time is of one kind.
    Heat(Heat),
    /// Wall-clock lines mix both, and inferno colours by name, so a name
    /// gets one colour: warm when most of its drawn time was on CPU, cool
    /// when most was spent waiting (in stacks that end in a state frame).
    Majority,
}

/// What the lines look like, for telling frames apart by their text.
#[derive(Clone, Copy, Debug)]
pub struct Lines {
    /// How many frames at the root are process and thread frames.
    pub leading: usize,
    /// fgbpf's own lines, where bracketed names are pseudo-frames.
    pub ours: bool,
}

impl Lines {
    /// fgbpf's lines, starting with `leading` frames.
    pub fn ours(leading: Leading) -> Lines {
        let leading = match leading {
            Leading::ProcessAndThread => 2,
            Leading::Process => 1,
            Leading::None => 0,
        };
        Lines {
            leading,
            ours: true,
        }
    }

    /// Another tool's lines: stacks only.
    pub fn foreign() -> Lines {
        Lines {
            leading: 0,
            ours: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stable_and_families_differ() {
        let user = Frame::new("compute", FrameKind::User);
        let kern = Frame::new("compute", FrameKind::Kernel);
        assert_eq!(color(&user, Heat::OnCpu), color(&user, Heat::OnCpu));
        assert_ne!(color(&user, Heat::OnCpu), color(&kern, Heat::OnCpu));
        let hot = color(&user, Heat::OnCpu);
        let cold = color(&user, Heat::OffCpu);
        assert!(hot.r > hot.b, "on-CPU is warm: {hot:?}");
        assert!(cold.b > cold.r, "off-CPU is cool: {cold:?}");
    }
}
