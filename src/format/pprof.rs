//! pprof export: gzip-compressed `perftools.profiles.Profile` protobuf, as
//! read by `go tool pprof` and the many viewers built on it.
//!
//! Sample types follow what the weights measure ([`Kind`] and [`Unit`]):
//! on-CPU captures carry `samples/count` and, when the frequency is known,
//! `cpu/nanoseconds`; off-CPU and wall-clock time `off_cpu/nanoseconds` and
//! `wall/nanoseconds`. Every frame is one location with one function named
//! as in the folded output (`_[k]` and friends included, so kernel and user
//! functions of the same name stay apart); threads become `pid`, `tid`,
//! `process` and `thread` labels rather than frames, `--group-by`
//! groups a `cgroup` label, and a Go program's stacks their goroutine's
//! id (`goroutine`, a number) and its pprof labels.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::{write::GzEncoder, Compression};
use prost::Message;

use super::folded::sanitize;
use crate::procs::elf::build_id_hex;
use crate::profile::heap::{Heap, INUSE_SPACE, TYPES};
use crate::profile::{Kind, Profile, Unit};

/// The subset of `profile.proto` fgbpf writes; tags are the proto's.
#[derive(Clone, PartialEq, Message)]
struct PbProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    /// Leaf first.
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
    #[prost(int64, tag = "3")]
    num: i64,
}

/// A binary frames lie in: its file name and build ID. Frames are
/// functions, not addresses: its range and offset are left 0.
#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(int64, tag = "6")]
    build_id: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
}

/// pprof refers to every string by its index in one table whose first
/// entry must be "".
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// One value column: its type, its unit, and what one unit of weight is
/// worth in it.
struct Column {
    r#type: &'static str,
    unit: &'static str,
    scale: i64,
}

fn columns(profile: &Profile) -> Vec<Column> {
    let col = |r#type, unit, scale| Column {
        r#type,
        unit,
        scale,
    };
    match (profile.unit, profile.meta.kind) {
        (Unit::Microseconds, Kind::OffCpu) => vec![col("off_cpu", "nanoseconds", 1000)],
        (Unit::Microseconds, Kind::Wall) => vec![col("wall", "nanoseconds", 1000)],
        (Unit::Microseconds, _) => vec![col("time", "nanoseconds", 1000)],
        (Unit::Samples, Kind::OnCpu) => match profile.meta.frequency.filter(|&hz| hz > 0) {
            Some(hz) => vec![
                col("samples", "count", 1),
                col("cpu", "nanoseconds", 1_000_000_000 / hz as i64),
            ],
            None => vec![col("samples", "count", 1)],
        },
        (Unit::Samples, _) => vec![col("samples", "count", 1)],
    }
}

fn build(profile: &Profile) -> PbProfile {
    let cols = columns(profile);
    let scales: Vec<i64> = cols.iter().map(|c| c.scale).collect();
    build_with(profile, cols, &|_, weight| scales.iter().map(|s| weight.saturating_mul(*s)).collect())
}

/// `cols` the sample types, `value` each stack's values from its index
/// and weight.
fn build_with(profile: &Profile, cols: Vec<Column>, value: &dyn Fn(usize, i64) -> Vec<i64>) -> PbProfile {
    let mut strings = Strings::new();
    let sample_type = cols
        .iter()
        .map(|c| ValueType {
            r#type: strings.get(c.r#type),
            unit: strings.get(c.unit),
        })
        .collect();
    // On-CPU samples are taken every `period` nanoseconds of CPU time.
    let (period_type, period) = match cols.as_slice() {
        [_, cpu] => (
            Some(ValueType {
                r#type: strings.get(cpu.r#type),
                unit: strings.get(cpu.unit),
            }),
            cpu.scale,
        ),
        _ => (None, 0),
    };
    // Each binary's mapping, once, with its GNU build ID in hex. pprof
    // takes the first for the profile's main binary: the one the heaviest
    // stack starts in goes first.
    let mut mapping: Vec<Mapping> = Vec::new();
    let mut mapping_ids: HashMap<crate::symbolize::Module, u64> = HashMap::new();
    let mut mapping_of = |m: &crate::symbolize::Module, strings: &mut Strings| -> u64 {
        if let Some(&id) = mapping_ids.get(m) {
            return id;
        }
        let build_id = m.build_id.as_deref().map(build_id_hex).unwrap_or_default();
        let id = mapping.len() as u64 + 1;
        mapping.push(Mapping {
            id,
            filename: strings.get(&sanitize(&m.name)),
            build_id: strings.get(&build_id),
            has_functions: true,
        });
        mapping_ids.insert(m.clone(), id);
        id
    };
    let heaviest = profile.stacks().iter().max_by_key(|s| s.weight);
    if let Some(main) = heaviest.and_then(|s| s.frames.iter().find_map(|&f| profile.frame(f).module.as_deref())) {
        mapping_of(main, &mut strings);
    }
    let (function, location): (Vec<Function>, Vec<Location>) = profile
        .frames()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let id = i as u64 + 1;
            let name = strings.get(&format!("{}{}", sanitize(&f.name), f.kind.suffix()));
            let mapping_id = f.module.as_deref().map_or(0, |m| mapping_of(m, &mut strings));
            (
                Function {
                    id,
                    name,
                    system_name: name,
                },
                Location {
                    id,
                    mapping_id,
                    line: vec![Line { function_id: id }],
                },
            )
        })
        .unzip();
    let sample = profile
        .stacks()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut label = Vec::new();
            if let Some(t) = s.thread {
                let t = profile.thread(t);
                label.push(Label {
                    key: strings.get("pid"),
                    str: 0,
                    num: t.pid.into(),
                });
                label.push(Label {
                    key: strings.get("tid"),
                    str: 0,
                    num: t.tid.into(),
                });
                label.push(Label {
                    key: strings.get("process"),
                    str: strings.get(&sanitize(&t.process)),
                    num: 0,
                });
                label.push(Label {
                    key: strings.get("thread"),
                    str: strings.get(&sanitize(&t.name)),
                    num: 0,
                });
                if let Some(group) = &t.group {
                    label.push(Label {
                        key: strings.get("cgroup"),
                        str: strings.get(&sanitize(group)),
                        num: 0,
                    });
                }
            }
            // A task's id is a number, as pprof's numeric labels are; the
            // program's labels are text.
            for (key, value) in s.labels.iter().flat_map(|l| l.iter()) {
                let id = profile.meta.id_labels.contains(&key.as_str());
                let num = id.then(|| value.parse::<i64>().ok()).flatten();
                label.push(Label {
                    key: strings.get(&sanitize(key)),
                    str: if num.is_some() { 0 } else { strings.get(&sanitize(value)) },
                    num: num.unwrap_or(0),
                });
            }
            let weight = i64::try_from(s.weight).unwrap_or(i64::MAX);
            Sample {
                location_id: s.frames.iter().rev().map(|&f| f as u64 + 1).collect(),
                value: value(i, weight),
                label,
            }
        })
        .collect();
    let comment = if profile.meta.target.is_empty() {
        Vec::new()
    } else {
        vec![strings.get(&format!("fgbpf: {}", sanitize(&profile.meta.target)))]
    };
    let default_sample_type = strings.get(cols.last().expect("at least one column").r#type);
    PbProfile {
        sample_type,
        sample,
        mapping,
        location,
        function,
        string_table: strings.table,
        duration_nanos: i64::try_from(profile.meta.duration.as_nanos()).unwrap_or(i64::MAX),
        period_type,
        period,
        comment,
        default_sample_type,
    }
}

pub fn write(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    gzipped(build(profile), out)
}

/// `fgbpf alloc`'s profile: the four sample types of Go's heap profiles,
/// `inuse_space` the default as in Go's.
pub fn write_heap(heap: &Heap, out: &mut dyn Write) -> io::Result<()> {
    let cols = TYPES.iter().map(|&(r#type, unit)| Column { r#type, unit, scale: 1 }).collect();
    let values = |i: usize, _| heap.values[i].iter().map(|&v| i64::try_from(v).unwrap_or(i64::MAX)).collect();
    let mut pb = build_with(&heap.profile, cols, &values);
    let mut strings = Strings { index: pb.string_table.iter().cloned().enumerate().map(|(i, s)| (s, i as i64)).collect(), table: std::mem::take(&mut pb.string_table) };
    pb.default_sample_type = strings.get(TYPES[INUSE_SPACE].0);
    pb.period_type = Some(ValueType { r#type: strings.get("space"), unit: strings.get("bytes") });
    pb.period = i64::try_from(heap.mean).unwrap_or(i64::MAX);
    pb.string_table = strings.table;
    gzipped(pb, out)
}

fn gzipped(pb: PbProfile, out: &mut dyn Write) -> io::Result<()> {
    let bytes = pb.encode_to_vec();
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameId, FrameKind, Stack, Thread};
    use std::io::Read;

    fn decode(p: &Profile) -> PbProfile {
        let mut gz = Vec::new();
        write(p, &mut gz).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .unwrap();
        PbProfile::decode(&raw[..]).unwrap()
    }

    fn oncpu() -> Profile {
        let mut p = Profile::new(Unit::Samples);
        p.meta.kind = Kind::OnCpu;
        p.meta.frequency = Some(100);
        let t = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 7,
            tid: 8,
            process: "srv".into(),
            name: "w".into(),
        });
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let k = p.intern_frame(Frame::new("main", FrameKind::Kernel));
        p.push(Stack {
            thread: Some(t),
            frames: vec![main, k].into(),
            weight: 3,
            ..Default::default()
        });
        p
    }

    #[test]
    fn binaries_are_mappings_with_build_ids_the_heaviest_stack_s_first() {
        let mut p = oncpu();
        let module = |name: &str, id: u8| {
            Some(std::sync::Arc::new(crate::symbolize::Module::named(name, Some(vec![id, 0xab]))))
        };
        let libc = p.intern_frame(Frame { module: module("libc.so.6", 1), ..Frame::new("__libc_start_main", FrameKind::User) });
        let work = p.intern_frame(Frame { module: module("srv", 2), ..Frame::new("work", FrameKind::User) });
        let t = p.stacks()[0].thread;
        p.push(Stack { thread: t, frames: vec![libc, work].into(), weight: 5, ..Default::default() });
        let pb = decode(&p);
        let text = |i: i64| pb.string_table[i as usize].as_str();
        let maps: Vec<(&str, &str)> = pb.mapping.iter().map(|m| (text(m.filename), text(m.build_id))).collect();
        // The heaviest stack starts in libc: its binary is first.
        assert_eq!(maps, [("libc.so.6", "01ab"), ("srv", "02ab")]);
        let of = |f: FrameId| pb.location[f as usize].mapping_id;
        assert_eq!((of(libc), of(work)), (1, 2));
        // Frames of no known binary have none.
        assert_eq!(pb.location[0].mapping_id, 0);
    }

    #[test]
    fn oncpu_has_samples_and_cpu_time() {
        let pb = decode(&oncpu());
        let s = |i: i64| pb.string_table[i as usize].as_str();
        assert_eq!(pb.string_table[0], "");
        let types: Vec<(&str, &str)> = pb
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(types, vec![("samples", "count"), ("cpu", "nanoseconds")]);
        assert_eq!(pb.period, 10_000_000);
        assert_eq!(pb.sample[0].value, vec![3, 30_000_000]);
        let leaf = pb.sample[0].location_id[0];
        let f = &pb.function[(leaf - 1) as usize];
        assert_eq!(s(f.name), "main_[k]", "leaf first");
        let labels: Vec<(&str, String)> = pb.sample[0]
            .label
            .iter()
            .map(|l| {
                let v = if l.str != 0 {
                    s(l.str).to_string()
                } else {
                    l.num.to_string()
                };
                (s(l.key), v)
            })
            .collect();
        assert!(labels.contains(&("tid", "8".into())));
        assert!(labels.contains(&("thread", "w".into())));
    }

    #[test]
    fn time_views_are_nanoseconds() {
        let mut p = oncpu();
        p.unit = Unit::Microseconds;
        p.meta.kind = Kind::OffCpu;
        let pb = decode(&p);
        assert_eq!(pb.sample_type.len(), 1);
        assert_eq!(
            pb.string_table[pb.sample_type[0].r#type as usize],
            "off_cpu"
        );
        assert_eq!(pb.sample[0].value, vec![3000]);
        assert_eq!(pb.period_type, None);
    }
}
