//! speedscope export (https://www.speedscope.app): its JSON file format,
//! with an all-threads profile first (stacks under their process and
//! thread frames, as in the flamegraph) and then one profile per thread,
//! heaviest thread first. Frame names are the folded output's.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;

use super::folded::{leading_frames, sanitize, Leading};
use crate::profile::{Profile, ThreadId, Unit};

const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Serialize)]
struct File {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared,
    profiles: Vec<Sampled>,
    name: String,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    exporter: &'static str,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<SharedFrame>,
}

#[derive(Serialize)]
struct SharedFrame {
    name: String,
}

#[derive(Serialize)]
struct Sampled {
    r#type: &'static str,
    name: String,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    /// Indices into `shared.frames`, root first.
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
}

/// `shared.frames`, each distinct name once.
#[derive(Default)]
struct Frames {
    names: Vec<SharedFrame>,
    index: HashMap<String, usize>,
}

impl Frames {
    fn get(&mut self, name: String) -> usize {
        if let Some(&i) = self.index.get(&name) {
            return i;
        }
        let i = self.names.len();
        self.index.insert(name.clone(), i);
        self.names.push(SharedFrame { name });
        i
    }
}

/// The samples of one speedscope profile, in step with their weights.
#[derive(Default)]
struct Track {
    samples: Vec<Vec<usize>>,
    weights: Vec<u64>,
}

impl Track {
    fn push(&mut self, stack: Vec<usize>, weight: u64) {
        self.samples.push(stack);
        self.weights.push(weight);
    }
}

fn build(profile: &Profile) -> File {
    let unit = match profile.unit {
        Unit::Samples => "none",
        Unit::Microseconds => "microseconds",
    };
    let mut frames = Frames::default();
    let code: Vec<usize> = profile
        .frames()
        .iter()
        .map(|f| frames.get(format!("{}{}", sanitize(&f.name), f.kind.suffix())))
        .collect();
    let sampled = |name: String, track: Track| Sampled {
        r#type: "sampled",
        name,
        unit,
        start_value: 0,
        end_value: track.weights.iter().sum(),
        samples: track.samples,
        weights: track.weights,
    };

    // In time order when the stacks say when they fell: speedscope's
    // "Time Order" view then shows the capture slice by slice.
    let mut all = Track::default();
    let mut by_thread: HashMap<ThreadId, Track> = HashMap::new();
    let mut stacks: Vec<Option<(Vec<usize>, Vec<usize>)>> = vec![None; profile.stacks().len()];
    for (i, weight) in time_order(profile) {
        let s = &profile.stacks()[i];
        let (stack, full) = stacks[i].get_or_insert_with(|| {
            let stack: Vec<usize> = s.frames.iter().map(|&f| code[f as usize]).collect();
            let mut full = Vec::with_capacity(stack.len() + 2);
            if let Some(t) = s.thread {
                let lead = leading_frames(profile.thread(t), Leading::ProcessAndThread);
                full.extend(lead.into_iter().map(|n| frames.get(n)));
            }
            full.extend_from_slice(&stack);
            (stack, full)
        });
        if let Some(t) = s.thread {
            by_thread.entry(t).or_default().push(stack.clone(), weight);
        }
        all.push(full.clone(), weight);
    }

    let all_name = if by_thread.is_empty() {
        "all stacks"
    } else {
        "all threads"
    };
    let mut profiles = vec![sampled(all_name.into(), all)];
    let mut threads: Vec<(ThreadId, Track)> = by_thread.into_iter().collect();
    threads.sort_by_key(|(t, track)| (std::cmp::Reverse(track.weights.iter().sum::<u64>()), *t));
    for (t, track) in threads {
        let name = leading_frames(profile.thread(t), Leading::ProcessAndThread).join(" / ");
        profiles.push(sampled(name, track));
    }
    let name = if profile.meta.target.is_empty() {
        "fgbpf profile".to_string()
    } else {
        sanitize(&profile.meta.target)
    };
    File {
        schema: SCHEMA,
        shared: Shared {
            frames: frames.names,
        },
        profiles,
        name,
        active_profile_index: 0,
        exporter: "fgbpf",
    }
}

/// (stack index, weight) in the order to list them: by slice, then as the
/// profile orders its stacks; without time, the profile's order. A span
/// over several slices is listed once in each, with its part there.
fn time_order(profile: &Profile) -> Vec<(usize, u64)> {
    let stacks = profile.stacks();
    if !profile.has_time() {
        return stacks.iter().enumerate().map(|(i, s)| (i, s.weight)).collect();
    }
    let mut order: Vec<(u32, usize, u64)> = Vec::new();
    for (i, s) in stacks.iter().enumerate() {
        for span in &s.spans {
            for slice in span.first..=span.last {
                let w = span.within(slice, slice + 1);
                if w > 0 {
                    order.push((slice, i, w));
                }
            }
        }
    }
    order.sort_unstable_by_key(|&(slice, i, _)| (slice, i));
    order.into_iter().map(|(_, i, w)| (i, w)).collect()
}

pub fn write(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &build(profile)).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Stack, Thread};

    #[test]
    fn samples_follow_the_slices() {
        let mut p = Profile::new(Unit::Samples);
        p.meta.slice = Some(std::time::Duration::from_millis(100));
        let late = p.intern_frame(Frame::new("late", FrameKind::User));
        let early = p.intern_frame(Frame::new("early", FrameKind::User));
        let spans = |v: Vec<(u32, u64)>| v.into_iter().map(|(s, w)| crate::profile::Span::at(s, w)).collect();
        p.push(Stack { labels: None, thread: None, frames: vec![late].into(), weight: 9, spans: spans(vec![(5, 9)]) });
        p.push(Stack { labels: None, thread: None, frames: vec![early].into(), weight: 3, spans: spans(vec![(0, 1), (6, 2)]) });
        let order: Vec<(usize, u64)> = time_order(&p);
        assert_eq!(order, vec![(1, 1), (0, 9), (1, 2)]);
    }

    #[test]
    fn all_threads_first_then_each_thread() {
        let mut p = Profile::new(Unit::Microseconds);
        let thread = |p: &mut Profile, tid| {
            p.intern_thread(Thread {
                start: 0,
                group: None,
                pid: 1,
                tid,
                process: "srv".into(),
                name: format!("w{tid}").into(),
            })
        };
        let (t1, t2) = (thread(&mut p, 1), thread(&mut p, 2));
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let k = p.intern_frame(Frame::new("read", FrameKind::Kernel));
        for (t, frames, weight) in [(t1, vec![main], 2), (t2, vec![main, k], 5)] {
            p.push(Stack {
                thread: Some(t),
                frames: frames.into(),
                weight,
                ..Default::default()
            });
        }
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["$schema"], SCHEMA);
        assert_eq!(v["exporter"], "fgbpf");
        let names: Vec<&str> = v["shared"]["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["main", "read_[k]", "srv-1", "w1-1", "w2-2"]);
        let profiles = v["profiles"].as_array().unwrap();
        assert_eq!(profiles.len(), 3);
        assert_eq!(profiles[0]["name"], "all threads");
        assert_eq!(profiles[0]["unit"], "microseconds");
        assert_eq!(profiles[0]["endValue"], 7);
        assert_eq!(profiles[0]["samples"][1], serde_json::json!([2, 4, 0, 1]));
        assert_eq!(profiles[1]["name"], "srv-1 / w2-2", "heaviest thread first");
        assert_eq!(profiles[1]["samples"][0], serde_json::json!([0, 1]));
    }
}
