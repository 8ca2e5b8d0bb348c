//! The attributes of an export against their definitions: the keys the
//! OpenTelemetry semantic conventions define and fgbpf's own (each named
//! in docs/otlp.md), with their types, and the test that holds a real
//! export's resource and dictionary attributes to them.

use std::collections::BTreeMap;
use std::path::Path;

use super::common::*;
use super::export;
use super::receiver::*;

/// The attribute keys fgbpf sends that the OpenTelemetry semantic
/// conventions define, with the type they give them.
const CONVENTIONS: [(&str, &str); 10] = [
    ("host.name", "string"),
    ("service.name", "string"),
    ("process.pid", "int"),
    ("process.executable.name", "string"),
    ("process.executable.build_id.gnu", "string"),
    ("container.id", "string"),
    ("k8s.pod.uid", "string"),
    ("thread.id", "int"),
    ("thread.name", "string"),
    ("profile.frame.type", "string"),
];

/// fgbpf's own keys, beyond the conventions (each named in docs/otlp.md),
/// with their types; a Go program's pprof labels go under the program's
/// own keys, as strings.
const OWN_KEYS: [(&str, &str); 1] = [("goroutine", "int")];

/// Every attribute of an export, resource and dictionary ones: `thread.id`
/// and `process.pid` are ints, and each key is one of the conventions',
/// with its type, or one of fgbpf's own that docs/otlp.md names.
#[test]
fn attributes_have_the_types_the_semantic_conventions_give() {
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/otlp.md")).unwrap();
    for (key, _) in CONVENTIONS.iter().chain(&OWN_KEYS) {
        assert!(docs.contains(&format!("`{key}`")), "docs/otlp.md does not name `{key}`");
    }
    if !require_root() {
        return;
    }
    let _serial = serial();
    let received = out_dir("otlp_attributes_received");
    let (_receiver, port) = serve(&received);
    let waits = start(&["waits", "30"]);
    let dir = out_dir("otlp_attributes");
    let out = run(fgbpf()
        .args(["wall", "-F", "99", "-d", "2", "-p", &pid_of(&waits).to_string(), "--service", "checkout"])
        .args(["--otlp", &format!("127.0.0.1:{port}"), "--otlp-insecure", "-o"])
        .arg(&dir));
    drop(waits);
    assert_ok(&out);
    let exports = dump(&received);
    assert!(!exports.is_empty(), "nothing received");
    let mut sent: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for e in &exports {
        for (resource, _) in e.profiles() {
            for kv in resource {
                let (kind, _) = export::typed(&kv["value"]);
                sent.entry(kv["key"].as_str().unwrap_or_default().to_string()).or_default().insert(kind);
            }
        }
        for i in 1..e.table("attribute_table").len() {
            let (key, (kind, _)) = e.attribute(&serde_json::json!(i));
            sent.entry(key).or_default().insert(kind);
        }
    }
    eprintln!("sent: {sent:?}");
    for key in ["thread.id", "process.pid"] {
        assert_eq!(sent.get(key).map(|t| t.iter().cloned().collect::<Vec<_>>()), Some(vec!["int".to_string()]), "{key}");
    }
    for (key, kinds) in &sent {
        let want = CONVENTIONS.iter().chain(&OWN_KEYS).find(|(k, _)| k == key).map(|(_, t)| *t);
        let want = want.unwrap_or_else(|| panic!("`{key}` is neither the conventions' nor one of fgbpf's own"));
        assert!(kinds.iter().all(|k| k == want), "`{key}` sent as {kinds:?}, defined as {want}");
    }
}
