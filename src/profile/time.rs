//! When in the capture each stack's weight fell: time slices.
//!
//! The kernel counts every (thread, stacks) key per slice of the capture
//! (100 ms by default, `--slice`), so any range of the capture can be
//! drawn again without a record per sample. A stack's weight is a list of
//! [`Span`]s: an on-CPU sample falls in one slice; an off-CPU interval
//! covers every slice from the one it began in to the one it ended in, and
//! its time is taken as spread evenly over them (the kernel keeps only the
//! slices, so the error is at most a slice's worth at each end).

use std::time::Duration;

use super::{Profile, Stack};

/// A stack's spans: most stacks' weight falls in one span, kept inline
/// (a whole host's hundreds of thousands of stacks, without an allocation
/// each).
pub type Spans = smallvec::SmallVec<[Span; 1]>;

/// Weight that fell in slices `first..=last`, spread evenly over them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub first: u32,
    pub last: u32,
    pub weight: u64,
}

impl Span {
    /// Weight in one slice.
    pub fn at(slice: u32, weight: u64) -> Span {
        Span {
            first: slice,
            last: slice,
            weight,
        }
    }

    /// How many slices it covers.
    pub fn slices(&self) -> u64 {
        u64::from(self.last.saturating_sub(self.first)) + 1
    }

    /// The part of its weight that fell in slices `from..to`, rounded to
    /// the nearest whole unit.
    pub fn within(&self, from: u32, to: u32) -> u64 {
        let lo = self.first.max(from);
        let hi = self.last.saturating_add(1).min(to);
        if lo >= hi {
            return 0;
        }
        let overlap = u64::from(hi - lo);
        if overlap == self.slices() {
            return self.weight;
        }
        ((u128::from(self.weight) * u128::from(overlap) + u128::from(self.slices()) / 2)
            / u128::from(self.slices())) as u64
    }
}

/// Sorts spans and merges those over the same slices.
pub fn normalize(spans: &mut Spans) {
    spans.sort_unstable_by_key(|s| (s.first, s.last));
    spans.dedup_by(|later, kept| {
        let same = later.first == kept.first && later.last == kept.last;
        if same {
            kept.weight += later.weight;
        }
        same
    });
}

/// Spans at a slice `factor` times wider (slice `s` becomes `s / factor`),
/// merged: how a capture that outgrows its memory for slices keeps going.
pub fn widen(spans: &mut Spans, factor: u32) {
    for s in spans.iter_mut() {
        s.first /= factor;
        s.last /= factor;
    }
    normalize(spans);
}

/// Keeps the weight that fell in slices `from..to`: each span its part in
/// the range, spans with none left dropped; returns the weight left.
pub fn keep_within(spans: &mut Spans, from: u32, to: u32) -> u64 {
    spans.retain(|span| {
        let w = span.within(from, to);
        span.first = span.first.max(from);
        span.last = span.last.min(to.saturating_sub(1));
        span.weight = w;
        w > 0
    });
    spans.iter().map(|s| s.weight).sum()
}

/// Keeps the weight that fell from slice `first` on, numbered so that
/// `first` becomes slice 0; returns the weight left.
pub fn keep_from(spans: &mut Spans, first: u32) -> u64 {
    let weight = keep_within(spans, first, u32::MAX);
    for s in spans.iter_mut() {
        s.first -= first;
        s.last -= first;
    }
    weight
}

/// The slice index of `offset` from the start of the capture.
pub fn slice_of(offset: Duration, width: Duration) -> u32 {
    let w = width.as_nanos().max(1);
    u32::try_from(offset.as_nanos() / w).unwrap_or(u32::MAX)
}

impl Profile {
    /// How many slices the stacks' spans reach (the last one's index plus
    /// one); 0 when the profile has no time.
    pub fn slice_count(&self) -> u32 {
        self.stacks
            .iter()
            .flat_map(|s| s.spans.iter())
            .map(|s| s.last.saturating_add(1))
            .max()
            .unwrap_or(0)
    }

    /// Whether every stack says when its weight fell.
    pub fn has_time(&self) -> bool {
        self.meta.slice.is_some() && self.stacks.iter().all(|s| !s.spans.is_empty())
    }

    /// Keeps only the weight that fell in slices `from..to`: each stack's
    /// weight becomes its part in the range, and stacks with none left are
    /// dropped. The profile must have time ([`Profile::has_time`]).
    pub fn keep_slices(&mut self, from: u32, to: u32) {
        let end = to.min(self.slice_count()).max(from);
        for s in &mut self.stacks {
            s.weight = keep_within(&mut s.spans, from, to);
        }
        self.stacks.retain(|s| s.weight > 0);
        self.meta.duration = self
            .meta
            .slice
            .map_or(self.meta.duration, |w| w * (end - from));
    }

    /// The slices `from..to` that the seconds `from_s..to_s` of the capture
    /// cover: a slice counts when any of it is inside. `None` for `to_s`
    /// means the end of the capture.
    pub fn slices_for(&self, from_s: f64, to_s: Option<f64>) -> (u32, u32) {
        let width = self.meta.slice.unwrap_or(Duration::from_millis(100)).as_secs_f64();
        let from = (from_s / width + 1e-9).floor().max(0.0) as u32;
        let to = match to_s {
            Some(t) => ((t / width - 1e-9).ceil().max(0.0) as u32).max(from),
            None => u32::MAX,
        };
        (from, to)
    }
}

/// Merges the spans of `later` into `kept`, for stacks found equal.
pub(super) fn merge_spans(kept: &mut Stack, later: &mut Stack) {
    if !later.spans.is_empty() {
        kept.spans.append(&mut later.spans);
        normalize(&mut kept.spans);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_spreads_its_weight_evenly() {
        let s = Span {
            first: 10,
            last: 19,
            weight: 1000,
        };
        assert_eq!(s.within(0, 100), 1000);
        assert_eq!(s.within(10, 15), 500);
        assert_eq!(s.within(19, 30), 100);
        assert_eq!(s.within(20, 30), 0);
        assert_eq!(s.within(0, 10), 0);
        assert_eq!(Span::at(3, 7).within(3, 4), 7);
    }

    #[test]
    fn spans_keep_what_fell_from_a_slice_on() {
        let mut v: Spans = smallvec::smallvec![Span::at(2, 5), Span { first: 8, last: 11, weight: 40 }, Span::at(12, 3)];
        assert_eq!(keep_within(&mut v.clone(), 10, u32::MAX), 23);
        assert_eq!(keep_from(&mut v, 10), 23);
        assert_eq!(v[..], [Span { first: 0, last: 1, weight: 20 }, Span::at(2, 3)]);
    }

    #[test]
    fn spans_merge_and_widen() {
        let mut v: Spans = smallvec::smallvec![Span::at(3, 1), Span::at(2, 1), Span::at(3, 4)];
        normalize(&mut v);
        assert_eq!(v[..], [Span::at(2, 1), Span::at(3, 5)]);
        widen(&mut v, 2);
        assert_eq!(v[..], [Span::at(1, 6)]);
    }

    #[test]
    fn seconds_map_to_the_slices_they_touch() {
        let mut p = Profile::new(super::super::Unit::Samples);
        p.meta.slice = Some(Duration::from_millis(100));
        assert_eq!(p.slices_for(0.0, Some(2.0)), (0, 20));
        assert_eq!(p.slices_for(3.5, Some(5.0)), (35, 50));
        assert_eq!(p.slices_for(0.05, Some(0.15)), (0, 2));
        assert_eq!(p.slices_for(1.0, None), (10, u32::MAX));
    }
}
