//! OTLP profiles: a capture's views as one `ExportProfilesServiceRequest`
//! of OpenTelemetry's `profiles.v1development` schema, built with the
//! messages generated from the published protos (`opentelemetry-proto`).
//! Each process is a resource (`process.pid`, `process.executable.name`,
//! `host.name`, `service.name`), holding one profile per view: on-CPU
//! samples (`samples`/`count`, period in CPU nanoseconds), off-CPU time
//! one profile per state (`off_cpu_sleeping`, `off_cpu_uninterruptible`,
//! `off_cpu_runqueue`, in nanoseconds; the state is still its stacks' last
//! frame, as in every other output) and wall time (`wall`/`nanoseconds`). Frames are
//! locations of one line each, with the OpenTelemetry frame type where it
//! is certain (`kernel`, `native`) and the mapping of the binary they are
//! in (its name and GNU build ID); threads and Go labels are sample
//! attributes. Sending is [`crate::app::otlp`]'s.

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Location, Mapping, Profile as OtlpProfile, ProfilesDictionary, ResourceProfiles,
    Sample, ScopeProfiles, Stack as OtlpStack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::folded::sanitize;
use crate::procs::elf::build_id_hex;
use crate::profile::{FrameId, FrameKind, Kind, Profile, State, Unit};
use crate::symbolize::Module;

/// What names the sender: the host, and the service when one was given.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    pub host: String,
    pub service: Option<String>,
    /// More resource attributes of a process (`container.id`,
    /// `k8s.pod.uid`, a systemd unit's `service.name`), by pid.
    pub of_process: HashMap<u32, Vec<(&'static str, String)>>,
}

/// What a view's samples measure.
struct SampleType {
    /// (type, unit).
    sample: (&'static str, &'static str),
    /// The period's type (in nanoseconds) and length.
    period: Option<(&'static str, i64)>,
    /// What one unit of the view's weights is worth in the sample's unit.
    scale: i64,
}

fn sample_type(p: &Profile) -> Option<SampleType> {
    let (sample, period, scale) = match (p.meta.kind, p.unit) {
        (Kind::OnCpu, Unit::Samples) => {
            let period = p.meta.frequency.map(|f| ("cpu", 1_000_000_000 / f.max(1) as i64));
            (("samples", "count"), period, 1)
        }
        (Kind::OffCpu, Unit::Microseconds) => (("off_cpu", "nanoseconds"), None, 1000),
        (Kind::Wall, Unit::Microseconds) => (("wall", "nanoseconds"), None, 1000),
        _ => return None,
    };
    Some(SampleType { sample, period, scale })
}

/// The tables every profile of the request indexes, each with its zero
/// value first, as the schema asks.
struct Dictionary {
    d: ProfilesDictionary,
    strings: HashMap<String, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(i32, String), i32>,
    mappings: HashMap<std::sync::Arc<Module>, i32>,
}

impl Dictionary {
    fn new() -> Self {
        let d = ProfilesDictionary {
            mapping_table: vec![Mapping::default()],
            location_table: vec![Location::default()],
            function_table: vec![Function::default()],
            link_table: vec![Default::default()],
            string_table: vec![String::new()],
            attribute_table: vec![KeyValueAndUnit::default()],
            stack_table: vec![OtlpStack::default()],
        };
        Dictionary {
            d,
            strings: HashMap::from([(String::new(), 0)]),
            stacks: HashMap::new(),
            attributes: HashMap::new(),
            mappings: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn value_type(&mut self, (t, unit): (&str, &str)) -> ValueType {
        ValueType { type_strindex: self.string(t), unit_strindex: self.string(unit) }
    }

    fn attribute(&mut self, key: &str, value: &str) -> i32 {
        let k = self.string(key);
        if let Some(&i) = self.attributes.get(&(k, value.to_string())) {
            return i;
        }
        let i = self.d.attribute_table.len() as i32;
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex: k,
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.to_string())) }),
            unit_strindex: 0,
        });
        self.attributes.insert((k, value.to_string()), i);
        i
    }

    /// The binary's mapping: its file name, and its GNU build ID
    /// (`process.executable.build_id.gnu`, hex) when it has one. Frames are
    /// functions, not addresses: a mapping names the binary, its range and
    /// offsets are left 0.
    fn mapping(&mut self, module: &std::sync::Arc<Module>) -> i32 {
        if let Some(&i) = self.mappings.get(module) {
            return i;
        }
        let filename_strindex = self.string(&sanitize(&module.name));
        let attribute_indices = match &module.build_id {
            Some(id) => {
                let hex = build_id_hex(id);
                vec![self.attribute("process.executable.build_id.gnu", &hex)]
            }
            None => Vec::new(),
        };
        let i = self.d.mapping_table.len() as i32;
        self.d.mapping_table.push(Mapping { filename_strindex, attribute_indices, ..Default::default() });
        self.mappings.insert(module.clone(), i);
        i
    }

    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = self.d.stack_table.len() as i32;
        self.d.stack_table.push(OtlpStack { location_indices: locations.clone() });
        self.stacks.insert(locations, i);
        i
    }
}

/// OpenTelemetry's frame type (`profile.frame.type`) of the frames whose
/// kind says it for certain: the kernel's; native code (in a binary);
/// Java methods HotSpot's interpreter or C1 ran. A runtime's frames of the
/// kinds runtimes share (an interpreter's frame: CPython, Ruby, PHP; JIT
/// code: a C2 method, V8's) take the type of the runtime the walkers found
/// in their process (`runtime`); none when it is not known.
fn frame_type(frame: &crate::profile::Frame, runtime: Option<&'static str>) -> Option<&'static str> {
    match frame.kind {
        FrameKind::Kernel => Some("kernel"),
        FrameKind::Interpreted | FrameKind::C1 => Some("jvm"),
        FrameKind::Evaluated => runtime.filter(|r| ["cpython", "ruby", "php"].contains(r)),
        FrameKind::Jit => runtime.filter(|r| ["jvm", "v8js"].contains(r)),
        FrameKind::User | FrameKind::Inlined if frame.module.is_some() => Some("native"),
        _ => None,
    }
}

/// The runtime of each process whose runtime frames the walkers read, as
/// OpenTelemetry names it; a process found twice with two is left out.
fn runtimes(p: &Profile) -> HashMap<u32, &'static str> {
    let Some(u) = p.meta.unwinding.as_ref() else { return HashMap::new() };
    let mut found: HashMap<u32, Option<&'static str>> = HashMap::new();
    for &(pid, t) in &u.runtimes.processes {
        found.entry(pid).and_modify(|e| *e = e.filter(|&was| was == t)).or_insert(Some(t));
    }
    found.into_iter().filter_map(|(pid, t)| Some((pid, t?))).collect()
}

/// An interpreter's frame name `name (file:line)` as its three parts; the
/// name may hold parentheses (Ruby's `block (2 levels) in run`), a file
/// that does is left unparted (which " (" begins it is not certain).
fn file_line(name: &str) -> Option<(&str, &str, i64)> {
    let (function, at) = name.strip_suffix(')')?.rsplit_once(" (")?;
    let (file, line) = at.rsplit_once(':')?;
    if file.is_empty() || file.contains(['(', ')']) {
        return None;
    }
    Some((function, file, line.parse().ok().filter(|&l| l > 0)?))
}

/// A request being built, a view at a time (a view may be dropped once
/// added).
pub struct Request {
    dict: Dictionary,
    /// (pid, start, process name) → the profiles of its views: a PID given
    /// again within the capture is another process, another resource.
    by_process: BTreeMap<(u32, u32, String), Vec<OtlpProfile>>,
}

impl Default for Request {
    fn default() -> Self {
        Self::new()
    }
}

impl Request {
    pub fn new() -> Self {
        Request { dict: Dictionary::new(), by_process: BTreeMap::new() }
    }

    /// Adds a view that began at `start_unix_nano`.
    pub fn add(&mut self, p: &Profile, start_unix_nano: u64) {
        let (dict, by_process) = (&mut self.dict, &mut self.by_process);
        let Some(SampleType { sample: sample_type, period, scale }) = sample_type(p) else { return };
        // Each of the profile's frames as a location, once (once per
        // runtime for a kind runtimes share).
        let mut locations: HashMap<(FrameId, Option<&'static str>), i32> = HashMap::new();
        let runtimes = runtimes(p);
        // Off-CPU time is one sample type per state (its stacks' last frame).
        let type_of = |s: &crate::profile::Stack| match p.meta.kind {
            Kind::OffCpu => match s.frames.last().and_then(|&f| State::from_frame(&p.frame(f).name)) {
                Some(State::Sleeping) => "off_cpu_sleeping",
                Some(State::Uninterruptible) => "off_cpu_uninterruptible",
                Some(State::Runqueue) => "off_cpu_runqueue",
                None => sample_type.0,
            },
            _ => sample_type.0,
        };
        let mut per: BTreeMap<((u32, u32, String), &str), Vec<Sample>> = BTreeMap::new();
        for s in p.stacks() {
            let thread = s.thread.map(|t| p.thread(t));
            let key = thread.map_or((0, 0, String::new()), |t| (t.pid, t.start, sanitize(&t.process)));
            let mut ids = Vec::with_capacity(s.frames.len());
            let runtime = thread.and_then(|t| runtimes.get(&t.pid).copied());
            for &f in s.frames.iter().rev() {
                let frame = p.frame(f);
                let kind = frame_type(frame, runtime);
                let id = *locations.entry((f, kind)).or_insert_with(|| {
                    // An interpreter's frame has its file and line apart.
                    let text = sanitize(&frame.name);
                    let (function, file, line) = match frame.kind {
                        FrameKind::Evaluated => file_line(&text).unwrap_or((text.as_str(), "", 0)),
                        _ => (text.as_str(), "", 0),
                    };
                    let name = dict.string(function);
                    let filename_strindex = dict.string(file);
                    let function_index = dict.d.function_table.len() as i32;
                    dict.d.function_table.push(Function {
                        name_strindex: name,
                        system_name_strindex: name,
                        filename_strindex,
                        ..Default::default()
                    });
                    let attribute_indices = kind.map(|t| vec![dict.attribute("profile.frame.type", t)]).unwrap_or_default();
                    let mapping_index = frame.module.as_ref().map_or(0, |m| dict.mapping(m));
                    let i = dict.d.location_table.len() as i32;
                    dict.d.location_table.push(Location {
                        mapping_index,
                        lines: vec![Line { function_index, line, ..Default::default() }],
                        attribute_indices,
                        ..Default::default()
                    });
                    i
                });
                ids.push(id);
            }
            let mut attribute_indices = Vec::new();
            if let Some(t) = thread {
                attribute_indices.push(dict.attribute("thread.id", &t.tid.to_string()));
                attribute_indices.push(dict.attribute("thread.name", &sanitize(&t.name)));
            }
            for (k, v) in s.labels.iter().flat_map(|l| l.iter()) {
                attribute_indices.push(dict.attribute(&sanitize(k), &sanitize(v)));
            }
            per.entry((key, type_of(s))).or_default().push(Sample {
                stack_index: dict.stack(ids),
                values: vec![i64::try_from(s.weight).unwrap_or(i64::MAX).saturating_mul(scale)],
                attribute_indices,
                ..Default::default()
            });
        }
        for ((key, kind), samples) in per {
            let profile = OtlpProfile {
                sample_type: Some(dict.value_type((kind, sample_type.1))),
                samples,
                time_unix_nano: start_unix_nano,
                duration_nano: p.meta.duration.as_nanos() as u64,
                period_type: period.map(|(t, _)| dict.value_type((t, "nanoseconds"))),
                period: period.map_or(0, |(_, n)| n),
                ..Default::default()
            };
            by_process.entry(key).or_default().push(profile);
        }
    }

    /// The processes it has profiles of.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_process.keys().map(|(pid, _, _)| *pid).filter(|&p| p != 0)
    }

    /// The request, with each process's resource attributes.
    pub fn finish(self, origin: &Origin) -> ExportProfilesServiceRequest {
        let (dict, by_process) = (self.dict, self.by_process);
        let text = |k: &str, v: String| KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(v)) }),
            ..Default::default()
        };
        let resource_profiles = by_process
            .into_iter()
            .map(|((pid, _, process), profiles)| {
                let mut attributes = vec![text("host.name", origin.host.clone())];
                if pid != 0 {
                    attributes.push(KeyValue {
                        key: "process.pid".into(),
                        value: Some(AnyValue { value: Some(any_value::Value::IntValue(pid.into())) }),
                        ..Default::default()
                    });
                    attributes.push(text("process.executable.name", process.clone()));
                }
                let more = origin.of_process.get(&pid).filter(|_| pid != 0).map_or(&[][..], |v| &v[..]);
                let unit = more.iter().find(|(k, _)| *k == "service.name").map(|(_, v)| v.clone());
                if let Some(service) = origin.service.clone().or(unit) {
                    attributes.push(text("service.name", service));
                }
                for (k, v) in more.iter().filter(|(k, _)| *k != "service.name") {
                    attributes.push(text(k, v.clone()));
                }
                ResourceProfiles {
                    resource: Some(Resource { attributes, ..Default::default() }),
                    scope_profiles: vec![ScopeProfiles {
                        scope: Some(InstrumentationScope {
                            name: "fgbpf".into(),
                            version: env!("CARGO_PKG_VERSION").into(),
                            ..Default::default()
                        }),
                        profiles,
                        ..Default::default()
                    }],
                    ..Default::default()
                }
            })
            .collect();
        ExportProfilesServiceRequest { resource_profiles, dictionary: Some(dict.d) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, Stack, Thread};

    #[test]
    fn interpreter_frames_part_name_file_and_line() {
        assert_eq!(file_line("fifty (split.py:18)"), Some(("fifty", "split.py", 18)));
        assert_eq!(file_line("block (2 levels) in run (x.rb:3)"), Some(("block (2 levels) in run", "x.rb", 3)));
        assert_eq!(file_line("f (a (b).py:3)"), None, "not certain where the file begins");
        assert_eq!(file_line("<module> (/x:y.py:7)"), Some(("<module>", "/x:y.py", 7)));
        for not in ["main", "f (x.py)", "f (x.py:)", "f (x.py:0)", "f (x.py:-1)", "f (:3)"] {
            assert_eq!(file_line(not), None, "{not}");
        }
    }

    #[test]
    fn a_view_becomes_one_profile_per_process_with_zero_values_first() {
        let mut p = Profile::new(Unit::Microseconds);
        p.meta.kind = Kind::OffCpu;
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let sleep = p.intern_frame(Frame::new("do_nanosleep", FrameKind::Kernel));
        for (pid, w) in [(7, 3), (9, 4)] {
            let t = p.intern_thread(Thread { start: 0, pid, tid: pid, process: "app".into(), name: "app".into(), group: None });
            p.push(Stack { thread: Some(t), frames: vec![main, sleep].into(), weight: w, ..Default::default() });
        }
        let mut r = Request::new();
        r.add(&p, 5);
        let req = r.finish(&Origin { host: "h".into(), service: Some("s".into()), ..Default::default() });
        let d = req.dictionary.unwrap();
        assert_eq!(d.string_table[0], "");
        assert_eq!((d.location_table[0].clone(), d.stack_table[0].clone()), Default::default());
        // Both processes' samples share one stack of two locations, leaf first.
        assert_eq!(d.stack_table.len(), 2);
        let leaf = d.stack_table[1].location_indices[0] as usize;
        let f = d.location_table[leaf].lines[0].function_index as usize;
        assert_eq!(d.string_table[d.function_table[f].name_strindex as usize], "do_nanosleep");
        assert_eq!(req.resource_profiles.len(), 2);
        let values: Vec<i64> = req.resource_profiles.iter().map(|r| r.scope_profiles[0].profiles[0].samples[0].values[0]).collect();
        assert_eq!(values, [3000, 4000], "microseconds sent as nanoseconds");
        let profile = &req.resource_profiles[0].scope_profiles[0].profiles[0];
        assert_eq!(d.string_table[profile.sample_type.unwrap().type_strindex as usize], "off_cpu");
        // A stack that ends at a state is that state's.
        let mut p = Profile::new(Unit::Microseconds);
        p.meta.kind = Kind::OffCpu;
        let t = p.intern_thread(Thread { start: 0, pid: 7, tid: 7, process: "app".into(), name: "app".into(), group: None });
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let slept = p.intern_frame(Frame::new("[sleeping]", FrameKind::Pseudo));
        p.push(Stack { thread: Some(t), frames: vec![main].into(), weight: 1, ..Default::default() });
        p.push(Stack { thread: Some(t), frames: vec![main, slept].into(), weight: 1, ..Default::default() });
        let mut r = Request::new();
        r.add(&p, 5);
        let req = r.finish(&Origin::default());
        let d = req.dictionary.unwrap();
        let types: Vec<&str> = req.resource_profiles[0].scope_profiles[0].profiles.iter().map(|p| d.string_table[p.sample_type.unwrap().type_strindex as usize].as_str()).collect();
        assert_eq!(types, ["off_cpu", "off_cpu_sleeping"]);
        // What a process's cgroup says goes on its resource; --service
        // before a unit's name.
        let mut r = Request::new();
        r.add(&p, 5);
        let more = vec![("service.name", "nginx".to_string()), ("container.id", "c0".to_string())];
        let mut origin = Origin { of_process: HashMap::from([(7, more)]), ..Default::default() };
        let attributes = |origin: &Origin, r: Request| {
            let req = r.finish(origin);
            let a = req.resource_profiles[0].resource.clone().unwrap().attributes;
            a.iter().map(|kv| format!("{}={:?}", kv.key, kv.value.clone().unwrap().value.unwrap())).collect::<Vec<_>>().join(" ")
        };
        let said = attributes(&origin, r);
        assert!(said.contains("service.name=StringValue(\"nginx\")") && said.contains("container.id=StringValue(\"c0\")"), "{said}");
        origin.service = Some("checkout".into());
        let mut r = Request::new();
        r.add(&p, 5);
        let said = attributes(&origin, r);
        assert!(said.contains("service.name=StringValue(\"checkout\")") && !said.contains("nginx"), "{said}");
        assert_eq!(profile.time_unix_nano, 5);
    }
}
