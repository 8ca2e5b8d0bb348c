//! Frame lists shared between the stacks that have the same frames: a
//! whole-host capture names hundreds of thousands of threads' stacks, most
//! of them the same code (a pool's threads, a service's forks), over a
//! few thousand distinct lists; each stack holds a pointer to its list.

use std::collections::HashMap;
use std::collections::HashSet;

use super::{FrameId, Frames};

/// The distinct frame lists seen so far. Seeded hashing: the lists follow
/// the profiled programs' stacks, which they control.
#[derive(Default)]
pub struct FrameLists {
    seen: HashSet<Frames, ahash::RandomState>,
}

impl FrameLists {
    /// The shared list of `frames`.
    pub fn share(&mut self, frames: &[FrameId]) -> Frames {
        if let Some(f) = self.seen.get(frames) {
            return f.clone();
        }
        let f: Frames = frames.into();
        self.seen.insert(f.clone());
        f
    }
}

/// Maps each stack's frames through `map` (frame ids of one profile to
/// another's), each distinct list once, so that stacks that shared a list
/// still do.
#[derive(Default)]
pub struct Remap {
    /// By the address of the list mapped, which is held here with its
    /// mapping, so that no other list takes that address while it lives.
    done: HashMap<*const FrameId, (Frames, Frames)>,
}

impl Remap {
    pub fn map(&mut self, frames: &Frames, map: &[FrameId]) -> Frames {
        self.done
            .entry(frames.as_ptr())
            .or_insert_with(|| (frames.clone(), frames.iter().map(|&f| map[f as usize]).collect()))
            .1
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn equal_lists_are_one_list() {
        let mut lists = FrameLists::default();
        let a = lists.share(&[1, 2, 3]);
        let b = lists.share(&[1, 2, 3]);
        let c = lists.share(&[1, 2]);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, &[1, 2]);
        assert_eq!(&*lists.share(&[]), &[] as &[FrameId]);
    }

    #[test]
    fn lists_mapped_stay_shared() {
        let mut lists = FrameLists::default();
        let a = lists.share(&[0, 1]);
        let b = a.clone();
        let c = lists.share(&[1, 0]);
        let map = [7, 9];
        let mut remap = Remap::default();
        let (ma, mb, mc) = (remap.map(&a, &map), remap.map(&b, &map), remap.map(&c, &map));
        assert_eq!((&*ma, &*mc), (&[7, 9][..], &[9, 7][..]));
        assert!(Arc::ptr_eq(&ma, &mb));
        // A list its stacks let go of while mapping cannot lend its
        // address to another.
        let e: Frames = Arc::from(vec![0, 0]);
        assert_eq!(&*remap.map(&e, &map), &[7, 7]);
        drop(e);
        let d: Frames = Arc::from(vec![1, 1]);
        assert_eq!(&*remap.map(&d, &map), &[9, 9]);
    }
}
