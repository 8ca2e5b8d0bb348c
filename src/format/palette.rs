//! Deterministic frame colours, pre-filled into inferno's `PaletteMap`
//! (inferno has no palette that tells kernel from user code, or on-CPU
//! from off-CPU time, by itself).
//!
//! Families, after FlameGraph's `--colors=java` convention: on-CPU user
//! code red, kernel code orange (hues at least 28 degrees apart: told apart
//! at a glance), inlined aqua, JIT green; off-CPU time cool (blue);
//! pseudo-frames (process, thread) grey-violet, off-CPU states dark blue,
//! wakers purple.

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
        (Heat::OnCpu, FrameKind::User) => mix((200, 50, 50), (255, 130, 130), t),
        (Heat::OnCpu, FrameKind::Kernel) => mix((190, 90, 0), (255, 155, 0), t),
        (Heat::OnCpu, FrameKind::Inlined) => mix((50, 180, 170), (110, 220, 210), t),
        (Heat::OnCpu, FrameKind::Jit) => mix((60, 170, 50), (120, 220, 90), t),
        // Java by tier, async-profiler's families: interpreted code a
        // yellower green, C1 a paler one than C2's.
        (Heat::OnCpu, FrameKind::Interpreted) => mix((130, 180, 40), (180, 220, 80), t),
        (Heat::OnCpu, FrameKind::C1) => mix((100, 190, 110), (160, 230, 160), t),
        (Heat::OnCpu, FrameKind::Evaluated) => mix((200, 170, 30), (240, 215, 90), t),
        (Heat::OffCpu, FrameKind::Kernel) => mix((60, 110, 200), (100, 150, 230), t),
        (Heat::OffCpu, _) => mix((0, 150, 200), (90, 200, 255), t),
    }
}

/// The hue of a colour in degrees (0 red, 30 orange, 120 green, 240
/// blue): what tells frame families apart at a glance.
pub fn hue(c: Color) -> f64 {
    let (r, g, b) = (c.r as f64, c.g as f64, c.b as f64);
    let (max, min) = (r.max(g).max(b), r.min(g).min(b));
    if max == min {
        return 0.0;
    }
    let h = if max == r {
        (g - b) / (max - min)
    } else if max == g {
        2.0 + (b - r) / (max - min)
    } else {
        4.0 + (r - g) / (max - min)
    };
    (h * 60.0).rem_euclid(360.0)
}

/// The colour of a drawn frame named `name` (as folded) under `scheme`:
/// `leading` for the process and thread frames at the root, `on` of its
/// `all` time on CPU. In the wall view ([`Scheme::Majority`]) the time
/// decides the heat, and inlined code that ran is drawn as code (aqua
/// there would read as waiting).
pub fn frame_colour(name: &str, leading: bool, shape: Lines, scheme: Scheme, on: u64, all: u64) -> Color {
    let frame = match leading {
        true => Frame::new(name, FrameKind::Pseudo),
        false => Frame::from_folded(name, shape.ours),
    };
    let heat = match scheme {
        Scheme::Heat(h) => h,
        Scheme::Majority if on * 2 >= all => Heat::OnCpu,
        Scheme::Majority => Heat::OffCpu,
    };
    let frame = match (scheme, heat, frame.kind) {
        (Scheme::Majority, Heat::OnCpu, FrameKind::Inlined) => Frame::new(name, FrameKind::User),
        _ => frame,
    };
    color(&frame, heat)
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
            Leading::Process | Leading::Program => 1,
            Leading::None => 0,
        };
        Lines {
            leading,
            ours: true,
        }
    }

    /// The same lines with a group's frame (`--group-by`) before the
    /// process frame, when `grouped` and there is a process frame.
    pub fn grouped(self, grouped: bool) -> Lines {
        let extra = usize::from(grouped && self.ours && self.leading > 0);
        Lines {
            leading: self.leading + extra,
            ..self
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

    #[test]
    fn kernel_and_user_code_differ_in_hue_whatever_the_name() {
        let names = ["main", "vfs_read", "compute", "x", "do_syscall_64", "std::io::read"];
        for a in names {
            for b in names {
                let user = hue(color(&Frame::new(a, FrameKind::User), Heat::OnCpu));
                let kern = hue(color(&Frame::new(b, FrameKind::Kernel), Heat::OnCpu));
                assert!(kern - user >= 25.0, "{a} {user} vs {b} {kern}");
            }
        }
    }
}
