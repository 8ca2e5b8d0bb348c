//! OTLP profiles: a capture's views as one `ExportProfilesServiceRequest`
//! of OpenTelemetry's `profiles.v1development` schema, built with the
//! messages generated from the published protos (`opentelemetry-proto`).
//! Each process is a resource (`process.pid`, `process.executable.name`,
//! `host.name`, `service.name`), holding one profile per view, each with
//! its random ID, start and length: on-CPU samples (`samples`/`count`,
//! period in CPU nanoseconds), off-CPU time one profile per state
//! (`off_cpu_sleeping`, `off_cpu_uninterruptible`, `off_cpu_runqueue`, in
//! nanoseconds; the state is still its stacks' last frame, as in every
//! other output) and wall time (`wall`/`nanoseconds`). Frames are
//! locations of one line each, with the OpenTelemetry frame type where it
//! is certain (`kernel`, `native`), the mapping of the binary they are in
//! (its name, GNU build ID and code segment) and their address in it; one
//! dictionary serves every view ([`dictionary`]). Threads and Go labels
//! are sample attributes, typed as the semantic conventions type them.
//! Sending is [`crate::app::otlp`]'s.

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::profiles::v1development::{Profile as OtlpProfile, ResourceProfiles, Sample, ScopeProfiles};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::folded::sanitize;
use crate::profile::{FrameId, FrameKind, Kind, Profile, State, Unit};

mod dictionary;

use dictionary::{Attr, Dictionary};

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
    /// The period's (type, unit) and length.
    period: Option<((&'static str, &'static str), i64)>,
    /// What one unit of the view's weights is worth in the sample's unit.
    scale: i64,
}

fn sample_type(p: &Profile) -> Option<SampleType> {
    let (sample, period, scale) = match (p.meta.kind, p.unit) {
        (Kind::OnCpu, Unit::Samples) => {
            let period = p.meta.frequency.map(|f| (("cpu", "nanoseconds"), 1_000_000_000 / f.max(1) as i64));
            (("samples", "count"), period, 1)
        }
        (Kind::OffCpu, Unit::Microseconds) => (("off_cpu", "nanoseconds"), None, 1000),
        (Kind::Wall, Unit::Microseconds) => (("wall", "nanoseconds"), None, 1000),
        _ => return None,
    };
    Some(SampleType { sample, period, scale })
}

/// OpenTelemetry's frame type (`profile.frame.type`) of the frames whose
/// kind says it for certain: the kernel's; native code (in a binary);
/// Java methods HotSpot's interpreter or C1 ran. A runtime's frames of the
/// kinds runtimes share (an interpreter's frame: CPython, Ruby, PHP, OTP
/// 23's BEAM; JIT code: a C2 method, V8's, the BEAM's) take the type of the runtime the walkers found
/// in their process (`runtime`); none when it is not known.
fn frame_type(frame: &crate::profile::Frame, runtime: Option<&'static str>) -> Option<&'static str> {
    match frame.kind {
        FrameKind::Kernel => Some("kernel"),
        FrameKind::Interpreted | FrameKind::C1 => Some("jvm"),
        FrameKind::Evaluated => runtime.filter(|r| ["cpython", "ruby", "php", "perl", "luajit", "beam"].contains(r)),
        FrameKind::Jit => runtime.filter(|r| ["jvm", "v8js", "beam"].contains(r)),
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

/// A profile's ID: 16 random bytes, never all zero (the schema's invalid
/// ID).
fn profile_id() -> Vec<u8> {
    let mut id = [0u8; 16];
    while id == [0; 16] {
        getrandom::fill(&mut id).expect("the kernel's random numbers");
    }
    id.to_vec()
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
        if let Some(t) = sample_type(p) {
            self.add_as(p, start_unix_nano, t);
        }
    }

    /// Adds `fgbpf alloc`'s four views (in
    /// [`crate::profile::heap::TYPES`]' order), each a profile of its
    /// sample type (`alloc_space`/`bytes`…) with the sampling mean as
    /// period (`space`/`bytes`), as Go's heap profiles have them.
    pub fn add_heap(&mut self, views: &[Profile], mean: u64, start_unix_nano: u64) {
        for (p, &sample) in views.iter().zip(crate::profile::heap::TYPES.iter()) {
            let period = Some((("space", "bytes"), i64::try_from(mean).unwrap_or(i64::MAX)));
            self.add_as(p, start_unix_nano, SampleType { sample, period, scale: 1 });
        }
    }

    fn add_as(&mut self, p: &Profile, start_unix_nano: u64, t: SampleType) {
        let (dict, by_process) = (&mut self.dict, &mut self.by_process);
        let SampleType { sample: sample_type, period, scale } = t;
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
                let id = *locations.entry((f, kind)).or_insert_with(|| dict.location(frame, kind));
                ids.push(id);
            }
            let mut attribute_indices = Vec::new();
            if let Some(t) = thread {
                attribute_indices.push(dict.attribute("thread.id", Attr::Int(t.tid.into())));
                attribute_indices.push(dict.attribute("thread.name", Attr::Text(sanitize(&t.name))));
            }
            // A task's id (a goroutine's) as the integer it is; the
            // program's own labels as text.
            for (k, v) in s.labels.iter().flat_map(|l| l.iter()) {
                let id = p.meta.id_labels.contains(&k.as_str()).then(|| v.parse().ok()).flatten();
                attribute_indices.push(dict.attribute(&sanitize(k), id.map_or_else(|| Attr::Text(sanitize(v)), Attr::Int)));
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
                profile_id: profile_id(),
                sample_type: Some(dict.value_type((kind, sample_type.1))),
                samples,
                time_unix_nano: start_unix_nano,
                duration_nano: p.meta.duration.as_nanos() as u64,
                period_type: period.map(|(t, _)| dict.value_type(t)),
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
        let text = |k: &str, v: String| KeyValue { key: k.into(), value: Some(Attr::Text(v).value()), ..Default::default() };
        let resource_profiles = by_process
            .into_iter()
            .map(|((pid, _, process), profiles)| {
                let mut attributes = vec![text("host.name", origin.host.clone())];
                if pid != 0 {
                    attributes.push(KeyValue { key: "process.pid".into(), value: Some(Attr::Int(pid.into()).value()), ..Default::default() });
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

    #[test]
    fn ids_are_sent_as_integers_and_each_profile_has_its_own_id() {
        let mut p = Profile::new(Unit::Samples);
        p.meta.kind = Kind::OnCpu;
        p.meta.id_labels = vec!["goroutine"];
        let burn = p.intern_frame(Frame::new("main.burn", FrameKind::User));
        let t = p.intern_thread(Thread { start: 0, pid: 7, tid: 8, process: "app".into(), name: "worker".into(), group: None });
        let labels: crate::profile::Labels = vec![("goroutine".into(), "18".into()), ("route".into(), "/api".into())].into();
        p.push(Stack { thread: Some(t), frames: vec![burn].into(), weight: 1, labels: Some(labels), ..Default::default() });
        let mut r = Request::new();
        r.add(&p, 5);
        r.add(&p, 5);
        let req = r.finish(&Origin::default());
        let d = req.dictionary.unwrap();
        let said: Vec<String> = d.attribute_table[1..]
            .iter()
            .map(|a| format!("{}={:?}", d.string_table[a.key_strindex as usize], a.value.clone().unwrap().value.unwrap()))
            .collect();
        assert_eq!(said, ["thread.id=IntValue(8)", "thread.name=StringValue(\"worker\")", "goroutine=IntValue(18)", "route=StringValue(\"/api\")"]);
        let ids: Vec<&Vec<u8>> = req.resource_profiles[0].scope_profiles[0].profiles.iter().map(|p| &p.profile_id).collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.iter().all(|id| id.len() == 16 && id.iter().any(|&b| b != 0)) && ids[0] != ids[1], "{ids:?}");
        assert_eq!(d.location_table.len(), 2, "the view added twice: one location");
    }
}
