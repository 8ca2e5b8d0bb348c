//! An export as the official classes decode it whole (receiver.py `dump`:
//! their JSON mapping, field names as in the proto, 64-bit integers as
//! strings, default values left out), and what tests/otlp.rs reads of it:
//! the dictionary's tables, each sample's stack by name, attributes with
//! their types; and the ELF facts (program headers, symbols, addr2line) a
//! location's address is checked against.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The dictionary's tables, as the proto names them.
pub const TABLES: [&str; 6] = ["string_table", "function_table", "mapping_table", "location_table", "stack_table", "attribute_table"];

/// A field that is a number, or a 64-bit integer sent as a string; a field
/// left out is its default, 0.
pub fn num(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_i64().map(|i| i as u64)).unwrap_or(0),
        Value::String(s) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

/// The entries of a repeated field (none when left out).
pub fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

/// An attribute value: ("int", "42"), ("string", "main"), and the like.
pub fn typed(v: &Value) -> (String, String) {
    let Some((kind, value)) = v.as_object().and_then(|o| o.iter().next()) else { return ("none".into(), String::new()) };
    let kind = kind.trim_end_matches("_value").to_string();
    let value = value.as_str().map_or_else(|| value.to_string(), str::to_string);
    (kind, value)
}

/// One export.
pub struct Export(pub Value);

/// A location as a backend symbolizes it: its function names (innermost
/// first, joined by `;`), its address, its mapping's bounds and offset.
#[derive(Debug)]
pub struct Placed {
    pub name: String,
    pub address: u64,
    pub start: u64,
    pub limit: u64,
    pub offset: u64,
}

/// One sample of one profile, its stack by name.
pub struct Sampled {
    pub pid: u64,
    pub tid: u64,
    /// The profile's sample type.
    pub kind: String,
    pub value: u64,
    /// Function names, root first.
    pub frames: Vec<String>,
}

impl Export {
    pub fn dict(&self) -> &Value {
        &self.0["dictionary"]
    }

    pub fn table(&self, name: &str) -> &[Value] {
        list(&self.dict()[name])
    }

    pub fn string(&self, index: &Value) -> &str {
        self.table("string_table").get(num(index) as usize).and_then(Value::as_str).unwrap_or_default()
    }

    /// An entry of the attribute table: (key, (type, value)).
    pub fn attribute(&self, index: &Value) -> (String, (String, String)) {
        let a = &self.table("attribute_table")[num(index) as usize];
        (self.string(&a["key_strindex"]).to_string(), typed(&a["value"]))
    }

    /// Each entry of `table` that an earlier entry holds already, by value:
    /// (its index, the earlier one's).
    pub fn duplicates(&self, table: &str) -> Vec<(usize, usize)> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut out = Vec::new();
        for (i, e) in self.table(table).iter().enumerate() {
            if let Some(was) = seen.insert(e.to_string(), i) {
                out.push((i, was));
            }
        }
        out
    }

    /// The resources' profiles: (the resource's attributes, the profile).
    pub fn profiles(&self) -> Vec<(&[Value], &Value)> {
        let mut out = Vec::new();
        for rp in list(&self.0["resource_profiles"]) {
            let attributes = list(&rp["resource"]["attributes"]);
            for sp in list(&rp["scope_profiles"]) {
                out.extend(list(&sp["profiles"]).iter().map(|p| (attributes, p)));
            }
        }
        out
    }

    /// A location's function names, innermost first, and its type.
    pub fn location_names(&self, index: u64) -> Vec<String> {
        let loc = &self.table("location_table")[index as usize];
        list(&loc["lines"])
            .iter()
            .map(|l| self.string(&self.table("function_table")[num(&l["function_index"]) as usize]["name_strindex"]).to_string())
            .collect()
    }

    /// The native locations (`profile.frame.type` native) the samples
    /// reach whose mapping is the file `name`, each once.
    pub fn native_locations_in(&self, name: &str) -> Vec<Placed> {
        let mut locations = std::collections::BTreeSet::new();
        for (_, p) in self.profiles() {
            for s in list(&p["samples"]) {
                let stack = &self.table("stack_table")[num(&s["stack_index"]) as usize];
                locations.extend(list(&stack["location_indices"]).iter().map(num));
            }
        }
        let native = ("profile.frame.type".to_string(), ("string".to_string(), "native".to_string()));
        let mut out = Vec::new();
        for l in locations {
            let loc = &self.table("location_table")[l as usize];
            let m = &self.table("mapping_table")[num(&loc["mapping_index"]) as usize];
            if self.string(&m["filename_strindex"]) != name || !list(&loc["attribute_indices"]).iter().any(|i| self.attribute(i) == native) {
                continue;
            }
            let (address, start, limit, offset) = (num(&loc["address"]), num(&m["memory_start"]), num(&m["memory_limit"]), num(&m["file_offset"]));
            out.push(Placed { name: self.location_names(l).join(";"), address, start, limit, offset });
        }
        out
    }

    /// Every sample, its stack by name.
    pub fn samples(&self) -> Vec<Sampled> {
        let mut out = Vec::new();
        for (resource, p) in self.profiles() {
            let pid = resource.iter().find(|kv| kv["key"] == "process.pid").map_or(0, |kv| typed(&kv["value"]).1.parse().unwrap_or(0));
            let kind = self.string(&p["sample_type"]["type_strindex"]).to_string();
            for s in list(&p["samples"]) {
                let tid = list(&s["attribute_indices"])
                    .iter()
                    .map(|i| self.attribute(i))
                    .find(|(k, _)| k == "thread.id")
                    .map_or(0, |(_, (_, v))| v.parse().unwrap_or(0));
                let stack = &self.table("stack_table")[num(&s["stack_index"]) as usize];
                let mut frames: Vec<String> = list(&stack["location_indices"]).iter().flat_map(|l| self.location_names(num(l))).collect();
                frames.reverse();
                let value = list(&s["values"]).iter().map(num).sum();
                out.push(Sampled { pid, tid, kind: kind.clone(), value, frames });
            }
        }
        out
    }
}

/// The weight of each (pid, tid, frames root first) of a folded file of
/// the capture (roots `process-PID;thread-TID`), its frames' kind suffixes
/// left out, times `scale`.
pub fn folded_stacks(path: &Path, scale: u64) -> BTreeMap<(u64, u64, Vec<String>), u64> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((stack, weight)) = line.rsplit_once(' ') else { continue };
        let frames: Vec<&str> = stack.split(';').collect();
        let id = |f: &str| f.rsplit_once('-').and_then(|(_, n)| n.parse().ok()).unwrap_or(0);
        let names = frames[2..].iter().map(|f| strip_kind(f).to_string()).collect();
        *out.entry((id(frames[0]), id(frames[1]), names)).or_default() += weight.parse::<u64>().unwrap() * scale;
    }
    out
}

/// A folded frame's name without its kind's suffix.
pub fn strip_kind(f: &str) -> &str {
    ["_[k]", "_[i]", "_[j]", "_[0]", "_[1]", "_[p]", "_[w]"].iter().find_map(|s| f.strip_suffix(s)).unwrap_or(f)
}

/// An ELF file's loadable segments: (file offset, virtual address, file
/// size), as `readelf -lW` prints them.
pub fn load_segments(bin: &Path) -> Vec<(u64, u64, u64)> {
    let out = Command::new("readelf").arg("-lW").arg(bin).output().expect("readelf (binutils) is installed");
    let hex = |x: &str| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (hex(f[1]), hex(f[2]), hex(f[4]))
        })
        .collect()
}

/// The virtual address of file offset `offset` of an ELF file with these
/// segments.
pub fn file_to_virt(segments: &[(u64, u64, u64)], offset: u64) -> Option<u64> {
    segments.iter().find(|&&(off, _, size)| offset >= off && offset - off < size).map(|&(off, virt, _)| offset - off + virt)
}

/// The file offset of virtual address `virt`.
pub fn virt_to_file(segments: &[(u64, u64, u64)], virt: u64) -> Option<u64> {
    segments.iter().find(|&&(_, v, size)| virt >= v && virt - v < size).map(|&(off, v, _)| virt - v + off)
}

/// The function `addr2line -f` names at each virtual address of `bin`.
pub fn addr2line(bin: &Path, addrs: &[u64]) -> Vec<Vec<String>> {
    let out = Command::new("addr2line")
        .args(["-a", "-f", "-i", "-e"])
        .arg(bin)
        .args(addrs.iter().map(|a| format!("{a:#x}")))
        .output()
        .expect("addr2line (binutils) is installed");
    assert!(out.status.success(), "addr2line: {}", String::from_utf8_lossy(&out.stderr));
    // Each address's line (`0x…`), then (function, file:line) pairs, the
    // function its code was inlined into after each inlined one.
    let mut chains: Vec<Vec<String>> = Vec::new();
    let mut lines = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect::<Vec<_>>().into_iter();
    while let Some(line) = lines.next() {
        if line.starts_with("0x") {
            chains.push(Vec::new());
        } else if let Some(chain) = chains.last_mut() {
            chain.push(line);
            lines.next();
        }
    }
    assert_eq!(chains.len(), addrs.len(), "addr2line: {}", String::from_utf8_lossy(&out.stdout));
    chains
}

/// Each function symbol of `bin` (unstripped) by virtual address, as `nm`
/// lists them.
pub fn symbols(bin: &Path) -> HashMap<String, u64> {
    let nm = Command::new("nm").arg(bin).output().expect("nm (binutils) is installed");
    String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p.len() == 3 && p[1].eq_ignore_ascii_case("t")).then(|| (p[2].to_string(), u64::from_str_radix(p[0], 16).unwrap()))
        })
        .collect()
}

/// plain.c built with `gcc -O2 -g` under a build ID no earlier run used,
/// as `name` stripped (returned second) and `name-full` not.
pub fn stripped_plain(dir: &Path, name: &str, salt: u8) -> (PathBuf, PathBuf) {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let id = format!("{salt:02x}{:08x}{nanos:030x}", std::process::id());
    let (full, stripped) = (dir.join(format!("{name}-full")), dir.join(name));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/plain.c");
    let gcc = Command::new("gcc").args(["-O2", "-g", "-pthread", &format!("-Wl,--build-id=0x{id}"), "-o"]).arg(&full).arg(&src).status().unwrap();
    assert!(gcc.success(), "gcc");
    assert!(Command::new("strip").arg("--strip-all").arg("-o").arg(&stripped).arg(&full).status().unwrap().success(), "strip");
    (full, stripped)
}
