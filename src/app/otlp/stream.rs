//! `--otlp-interval`: a capture streamed to the receiver an interval at a
//! time. After the drain that passes an interval's end, what was recorded
//! is read (as `top` reads it), narrowed to the interval's time slices
//! (as a flight recorder's dump is narrowed to its window), named, and
//! handed to the [`Sender`] as one export: each view a profile per
//! process, starting at the interval's start. The last, shorter interval
//! goes when the capture ends.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::sender::Sender;
use super::{say_tally, Target, GRACE};
use crate::app::views::{Views, Wanted};
use crate::format::otlp::Request;
use crate::probe::Probe;
use crate::profile::merge;
use crate::symbolize::Symbolizer;

pub struct Stream {
    target: Target,
    interval: Duration,
    sender: Sender,
    wanted: Wanted,
    /// What the capture is of, for the views.
    of: String,
    started: SystemTime,
    /// The capture's time up to which intervals were handed over.
    sent_through: Duration,
}

impl Stream {
    /// A stream when `target` asks for one (`--otlp-interval`).
    pub fn start(target: &Target, wanted: Wanted, of: &str, started: SystemTime) -> Option<Stream> {
        let interval = target.interval?;
        Some(Stream {
            target: target.clone(),
            interval,
            sender: Sender::start(target, true),
            // Wakers are not sent; pprof's labels are.
            wanted: Wanted { wakers: false, labels: true, label_frames: false, ..wanted },
            of: of.to_string(),
            started,
            sent_through: Duration::ZERO,
        })
    }

    /// Hands over each interval the last drain completed: every one, so a
    /// drain that came late (a slow host, a long symbolization) does not
    /// leave the stream an interval behind until the end, which would then
    /// send two as one.
    pub fn step(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer) {
        if let Some(through) = recorder.drained_through() {
            self.send_whole(recorder, symbolizer, through);
        }
    }

    /// Hands over what is left, after the capture's last drain (`end`: its
    /// length); [`Self::close`] then waits for it.
    pub fn last(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer, end: Duration) {
        recorder.drain_now();
        // Whole intervals first: drains that land just before each
        // interval's end leave the stream one behind all along.
        self.send_whole(recorder, symbolizer, end);
        if end > self.sent_through {
            self.send(recorder, symbolizer, end);
        }
    }

    /// Lets the sender try for a few seconds more, and says what the
    /// receiver got.
    pub fn close(self) {
        let tally = self.sender.finish(GRACE);
        say_tally(&self.target, &tally);
    }

    /// Hands over each whole interval that ends by `through`.
    fn send_whole(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer, through: Duration) {
        while self.sent_through + self.interval <= through {
            let end = self.sent_through + self.interval;
            self.send(recorder, symbolizer, end);
        }
    }

    fn send(&mut self, recorder: &mut Probe, symbolizer: &mut Symbolizer, end: Duration) {
        let (from, to) = (recorder.slice_at(self.sent_through), recorder.slice_at(end));
        let mut recorded = recorder.snapshot_from(from);
        recorded.keep_slices(from, to);
        let length = end - self.sent_through;
        let mut views = Views::build(self.wanted, recorded, symbolizer, &self.of, length);
        let at = (self.started + self.sent_through).duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let mut request = Request::new();
        match (views.on.take(), views.off.take()) {
            (Some(on), Some(mut off)) => {
                request.add(&on, at);
                request.add(&off, at);
                let wall = merge::wall(&on, &mut off, std::mem::take(&mut views.runs));
                request.add(&wall, at);
            }
            (on, off) => {
                for p in on.iter().chain(off.iter()) {
                    request.add(p, at);
                }
            }
        }
        self.sent_through = end;
        let request = self.target.finish(request);
        // An interval with nothing recorded (the end's sliver) is not sent.
        if !request.resource_profiles.is_empty() {
            self.sender.push(request);
        }
    }
}
