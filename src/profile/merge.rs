//! Merging profiles: the wall-clock view puts on-CPU samples and off-CPU
//! time in one unit (microseconds) and one tree.

use super::{Kind, Meta, Profile, Unit};

/// One tree in microseconds: each on-CPU sample weighs 1e6/F µs, each
/// off-CPU interval its measured length. Losses are the caller's to set:
/// both sides may share some.
pub fn wall(on: &Profile, off: &Profile) -> Profile {
    let hz = on.meta.frequency.unwrap_or(1).max(1);
    let mut wall = Profile::new(Unit::Microseconds);
    wall.absorb(on, |samples| samples * 1_000_000 / hz);
    wall.absorb(off, |us| us);
    wall.absorb_unresolved(on, |samples| samples * 1_000_000 / hz);
    wall.absorb_unresolved(off, |us| us);
    wall.coalesce();
    wall.meta = Meta {
        kind: Kind::Wall,
        target: on.meta.target.clone(),
        duration: on.meta.duration,
        frequency: Some(hz),
        losses: Default::default(),
        unwinding: on.meta.unwinding.clone(),
        kernel: on.meta.kernel.clone(),
        slice: on.meta.slice.or(off.meta.slice),
    };
    wall
}
