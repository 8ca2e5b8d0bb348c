//! pprof protobuf profiles as Go's own reader prints them (`go tool pprof
//! -raw`): tests/go.rs compares fgbpf's labels with Go's own CPU profile,
//! tests/otlp.rs fgbpf's pprof output with what it sends over OTLP.

/// One sample of a pprof protobuf profile, as `go tool pprof -raw`
/// prints it: its count, its functions leaf first, and its labels.
#[derive(Debug, Default)]
pub struct RawSample {
    pub count: u64,
    pub funcs: Vec<String>,
    pub labels: Vec<(String, String)>,
}

/// Reads a `.pb.gz` profile with Go's own reader (`go tool pprof -raw`),
/// whose text has a `Samples:` section (a line `COUNT [VALUES...]: LOC
/// LOC ...` then lines of `key:[value]` labels) and a `Locations`
/// section (`ID: 0xADDR M=N FUNC FILE:LINE s=0`, and a line per inlined
/// function).
pub fn raw_samples(text: &str) -> Vec<RawSample> {
    let mut samples: Vec<(RawSample, Vec<u64>)> = Vec::new();
    let mut locations: std::collections::HashMap<u64, Vec<String>> = Default::default();
    let mut section = "";
    let mut last_location = None;
    for line in text.lines() {
        match line.trim() {
            "Samples:" | "Locations" | "Mappings" => {
                section = line.trim();
                continue;
            }
            _ => {}
        }
        match section {
            "Samples:" => {
                let t = line.trim();
                if let Some((values, locs)) = t.split_once(": ").filter(|(v, _)| v.split_whitespace().all(|n| n.parse::<u64>().is_ok())) {
                    let count = values.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
                    let locs = locs.split_whitespace().filter_map(|l| l.parse().ok()).collect();
                    samples.push((RawSample { count, ..Default::default() }, locs));
                } else if let Some((s, _)) = samples.last_mut() {
                    // `key:[value]` pairs; a value may hold spaces only
                    // inside its brackets.
                    let mut rest = t;
                    while let Some((key, after)) = rest.split_once(":[") {
                        let Some((value, more)) = after.split_once(']') else { break };
                        s.labels.push((key.trim().to_string(), value.to_string()));
                        rest = more;
                    }
                }
            }
            "Locations" => {
                let t = line.trim();
                if let Some((id, rest)) = t.split_once(": ").filter(|(id, _)| id.parse::<u64>().is_ok()) {
                    // `0xADDR M=N FUNC FILE:LINE s=0`, without `M=N` for
                    // a location of no mapping.
                    let mut tokens = rest.split_whitespace().skip(1).peekable();
                    tokens.next_if(|t| t.starts_with("M="));
                    let func = tokens.next().unwrap_or_default().to_string();
                    let id = id.parse().unwrap_or(0);
                    locations.entry(id).or_default().push(func);
                    last_location = Some(id);
                } else if let Some(id) = last_location {
                    // An inlined function of the same location, its caller
                    // after it.
                    if let Some(func) = t.split_whitespace().next() {
                        locations.entry(id).or_default().push(func.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    samples
        .into_iter()
        .map(|(mut s, locs)| {
            s.funcs = locs.iter().flat_map(|l| locations.get(l).cloned().unwrap_or_default()).collect();
            s
        })
        .collect()
}
