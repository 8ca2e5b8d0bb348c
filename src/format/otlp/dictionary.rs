//! The dictionary every profile of one OTLP export indexes: strings,
//! functions, mappings, locations, stacks and attribute entries, each held
//! once by value however many views and processes use it (the schema: a
//! dictionary SHOULD NOT hold duplicates), each table with its zero value
//! first. A frame of fgbpf's model is one location across the views; its
//! binary is one mapping per executable segment, at the addresses the
//! binary is linked at, so that a location's address is both its ELF
//! virtual address and, by pprof's rule (address − memory_start +
//! file_offset), its file offset.

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Location, Mapping, ProfilesDictionary, Stack, ValueType,
};

use crate::format::folded::sanitize;
use crate::procs::elf::build_id_hex;
use crate::profile::{Frame, FrameKind};
use crate::symbolize::Module;

/// An attribute's value: text, or an integer where the semantic
/// conventions define one (`thread.id`, `process.pid`) or fgbpf's key is
/// an id (a goroutine's).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attr {
    Text(String),
    Int(i64),
}

impl Attr {
    pub fn value(self) -> AnyValue {
        let value = match self {
            Attr::Text(s) => any_value::Value::StringValue(s),
            Attr::Int(i) => any_value::Value::IntValue(i),
        };
        AnyValue { value: Some(value) }
    }
}

/// A location's value, for finding it again.
type LocationValue = (i32, u64, Vec<Line>, Vec<i32>);

pub struct Dictionary {
    pub d: ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<Function, i32>,
    /// (binary, its segment holding the addresses) → mapping.
    modules: HashMap<(Arc<Module>, Option<usize>), i32>,
    mappings: HashMap<Mapping, i32>,
    /// (frame, frame type) → location: one per frame, whatever address
    /// each view's copy of it carries.
    frames: HashMap<(Frame, Option<&'static str>), i32>,
    locations: HashMap<LocationValue, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(i32, Attr), i32>,
}

impl Dictionary {
    pub fn new() -> Self {
        let d = ProfilesDictionary {
            mapping_table: vec![Mapping::default()],
            location_table: vec![Location::default()],
            function_table: vec![Function::default()],
            link_table: vec![Default::default()],
            string_table: vec![String::new()],
            attribute_table: vec![KeyValueAndUnit::default()],
            stack_table: vec![Stack::default()],
        };
        Dictionary {
            d,
            strings: HashMap::from([(String::new(), 0)]),
            functions: HashMap::from([(Function::default(), 0)]),
            modules: HashMap::new(),
            mappings: HashMap::from([(Mapping::default(), 0)]),
            frames: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::from([(Vec::new(), 0)]),
            attributes: HashMap::new(),
        }
    }

    pub fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    pub fn value_type(&mut self, (t, unit): (&str, &str)) -> ValueType {
        ValueType { type_strindex: self.string(t), unit_strindex: self.string(unit) }
    }

    pub fn attribute(&mut self, key: &str, value: Attr) -> i32 {
        let entry = (self.string(key), value);
        if let Some(&i) = self.attributes.get(&entry) {
            return i;
        }
        let i = self.d.attribute_table.len() as i32;
        self.d.attribute_table.push(KeyValueAndUnit { key_strindex: entry.0, value: Some(entry.1.clone().value()), unit_strindex: 0 });
        self.attributes.insert(entry, i);
        i
    }

    fn function(&mut self, f: Function) -> i32 {
        let table = &mut self.d.function_table;
        *self.functions.entry(f).or_insert_with(|| {
            table.push(f);
            table.len() as i32 - 1
        })
    }

    /// The mapping of a binary's executable segment (`segment`, an index
    /// into [`Module::code`]): its linked addresses and file offset, its
    /// file name and GNU build ID (`process.executable.build_id.gnu`,
    /// hex). Without a segment, the binary by name and build ID alone.
    fn mapping(&mut self, module: &Arc<Module>, segment: Option<usize>) -> i32 {
        if let Some(&i) = self.modules.get(&(module.clone(), segment)) {
            return i;
        }
        let filename_strindex = self.string(&sanitize(&module.name));
        let attribute_indices = match &module.build_id {
            Some(id) => vec![self.attribute("process.executable.build_id.gnu", Attr::Text(build_id_hex(id)))],
            None => Vec::new(),
        };
        let code = segment.and_then(|s| module.code.get(s));
        let m = Mapping {
            memory_start: code.map_or(0, |c| c.vaddr),
            memory_limit: code.map_or(0, |c| c.vaddr.saturating_add(c.size)),
            file_offset: code.map_or(0, |c| c.offset),
            filename_strindex,
            attribute_indices,
        };
        let table = &mut self.d.mapping_table;
        let i = *self.mappings.entry(m.clone()).or_insert_with(|| {
            table.push(m);
            table.len() as i32 - 1
        });
        self.modules.insert((module.clone(), segment), i);
        i
    }

    /// A frame's location, with OpenTelemetry's frame type `kind`: one
    /// line, its function (an interpreter's frame with its file and line
    /// apart), and for code in a binary its mapping and, when the frame
    /// has one inside that mapping, its address.
    pub fn location(&mut self, frame: &Frame, kind: Option<&'static str>) -> i32 {
        let key = (frame.clone(), kind);
        if let Some(&i) = self.frames.get(&key) {
            return i;
        }
        let text = sanitize(&frame.name);
        let (function, file, line) = match frame.kind {
            FrameKind::Evaluated => file_line(&text).unwrap_or((text.as_str(), "", 0)),
            _ => (text.as_str(), "", 0),
        };
        let name = self.string(function);
        let filename_strindex = self.string(file);
        let function_index = self.function(Function {
            name_strindex: name,
            system_name_strindex: name,
            filename_strindex,
            start_line: 0,
        });
        let attribute_indices = kind.map(|t| vec![self.attribute("profile.frame.type", Attr::Text(t.into()))]).unwrap_or_default();
        let (mapping_index, address) = match &frame.module {
            Some(m) => {
                let segment = m.segment_of(frame.address).filter(|_| frame.address != 0);
                (self.mapping(m, segment), segment.map_or(0, |_| frame.address))
            }
            None => (0, 0),
        };
        let lines = vec![Line { function_index, line, column: 0 }];
        let table = &mut self.d.location_table;
        let value = (mapping_index, address, lines.clone(), attribute_indices.clone());
        let i = *self.locations.entry(value).or_insert_with(|| {
            table.push(Location { mapping_index, address, lines, attribute_indices });
            table.len() as i32 - 1
        });
        self.frames.insert(key, i);
        i
    }

    pub fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = self.d.stack_table.len() as i32;
        self.d.stack_table.push(Stack { location_indices: locations.clone() });
        self.stacks.insert(locations, i);
        i
    }
}

/// An interpreter's frame name `name (file:line)` as its three parts; the
/// name may hold parentheses (Ruby's `block (2 levels) in run`), a file
/// that does is left unparted (which " (" begins it is not certain).
pub fn file_line(name: &str) -> Option<(&str, &str, i64)> {
    let (function, at) = name.strip_suffix(')')?.rsplit_once(" (")?;
    let (file, line) = at.rsplit_once(':')?;
    if file.is_empty() || file.contains(['(', ')']) {
        return None;
    }
    Some((function, file, line.parse().ok().filter(|&l| l > 0)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procs::elf::ExecSegment;

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
    fn a_frame_is_one_location_at_its_address_in_its_segment() {
        let code = vec![ExecSegment { offset: 0x1000, size: 0x800, vaddr: 0x401000 }];
        let bin = Arc::new(Module { name: "srv".into(), build_id: Some(vec![0xab, 0xcd]), code });
        let at = |address| Frame { module: Some(bin.clone()), address, ..Frame::new("work", FrameKind::User) };
        let mut d = Dictionary::new();
        let work = d.location(&at(0x401234), Some("native"));
        // The same function met again at another address, as another view
        // holds it: the same location.
        assert_eq!(d.location(&at(0x401300), Some("native")), work);
        let l = &d.d.location_table[work as usize];
        let m = &d.d.mapping_table[l.mapping_index as usize];
        assert_eq!((l.address, m.memory_start, m.memory_limit, m.file_offset), (0x401234, 0x401000, 0x401800, 0x1000));
        assert_eq!(l.address - m.memory_start + m.file_offset, 0x1234, "pprof's rule gives the file offset");
        // An address outside the binary's code is not sent; its binary is.
        let outside = Frame { name: "other".into(), ..at(0x9000) };
        let l = d.location(&outside, Some("native"));
        let l = &d.d.location_table[l as usize];
        assert_eq!(l.address, 0);
        let m = &d.d.mapping_table[l.mapping_index as usize];
        assert_eq!((m.memory_start, m.memory_limit, d.d.string_table[m.filename_strindex as usize].as_str()), (0, 0, "srv"));
        // Two frames whose locations are the same value share one.
        let a = d.location(&Frame::new("f", FrameKind::User), None);
        assert_eq!(d.location(&Frame::new("f", FrameKind::Inlined), None), a);
        assert_eq!(d.d.function_table.len(), 4, "work, other, f and the zero value");
        assert_eq!(d.attribute("thread.id", Attr::Int(7)), d.attribute("thread.id", Attr::Int(7)));
        assert_ne!(d.attribute("thread.id", Attr::Int(7)), d.attribute("thread.id", Attr::Text("7".into())));
    }
}
