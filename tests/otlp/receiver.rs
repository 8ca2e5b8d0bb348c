//! The receiving end of tests/otlp.rs: tests/otlp/receiver.py (the
//! official OpenTelemetry Python classes and grpcio, from PyPI) started
//! and stopped, and what it kept read back: each sample decoded, or each
//! export whole ([`super::export`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::common::*;
use super::export;

const NEEDS_RECEIVER: &str = "the OTLP receiver is not installed: run scripts/test.sh (scripts/fetch-otlp-receiver.sh)";

pub fn receiver_python() -> PathBuf {
    let python = consumers_dir().join("otlp/bin/python");
    assert!(python.is_file(), "{NEEDS_RECEIVER}");
    python
}

pub fn receiver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py")
}

/// The receiver, serving until dropped; its port.
pub fn serve(dir: &Path) -> (KillOnDrop, u16) {
    serve_with(dir, &[])
}

/// The receiver with receiver.py's options (`--port N`, `--http`,
/// `--delay S`, `--fail CODE`).
pub fn serve_with(dir: &Path, options: &[&str]) -> (KillOnDrop, u16) {
    let _ = std::fs::remove_dir_all(dir);
    let mut child = Command::new(receiver_python())
        .arg(receiver_script())
        .arg("serve")
        .arg(dir)
        .args(options)
        .stdout(Stdio::piped())
        .spawn()
        .expect(NEEDS_RECEIVER);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.trim().strip_prefix("listening ").and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("receiver said {line:?}"));
    (KillOnDrop(child), port)
}

/// One sample as the receiver decoded it.
#[derive(Debug)]
pub struct Decoded {
    pub profile: String,
    pub pid: i64,
    pub service: String,
    pub value: i64,
    /// Leaf first, with each location's mapping (file name, build ID)
    /// and frame type.
    pub frames: Vec<String>,
    pub mappings: Vec<String>,
    pub build_ids: Vec<String>,
    pub types: Vec<String>,
    pub tid: String,
    /// Its profile's start (ns since the epoch).
    pub time: u64,
    /// Each frame's file and line, where known ("" and 0 else).
    pub files: Vec<String>,
    pub lines: Vec<i64>,
}

pub fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().map(|f| f.as_str().unwrap_or_default().to_string()).collect()).unwrap_or_default()
}

/// A binary's GNU build ID, hex, as readelf prints it.
pub fn build_id_of(path: &Path) -> String {
    let out = Command::new("readelf").arg("-n").arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).unwrap_or_default().trim().to_string()
}

pub fn decode(dir: &Path) -> Vec<Decoded> {
    let out = Command::new(receiver_python()).arg(receiver_script()).arg("decode").arg(dir).output().unwrap();
    assert!(out.status.success(), "decoding: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Decoded {
                profile: v["profile"].as_str().unwrap_or_default().to_string(),
                pid: v["resource"]["process.pid"].as_i64().unwrap_or(0),
                service: v["resource"]["service.name"].as_str().unwrap_or_default().to_string(),
                value: v["value"].as_i64().unwrap_or(0),
                frames: strings(&v["frames"]),
                mappings: strings(&v["mappings"]),
                build_ids: strings(&v["build_ids"]),
                types: strings(&v["types"]),
                tid: v["attributes"]["thread.id"].as_i64().map(|t| t.to_string()).unwrap_or_default(),
                time: v["time"].as_u64().unwrap_or(0),
                files: strings(&v["files"]),
                lines: v["lines"].as_array().map(|a| a.iter().map(|l| l.as_i64().unwrap_or(0)).collect()).unwrap_or_default(),
            }
        })
        .collect()
}

pub fn start(args: &[&str]) -> KillOnDrop {
    KillOnDrop(Command::new(plain_workload("plain")).args(args).spawn().unwrap())
}

pub fn pid_of(c: &KillOnDrop) -> i64 {
    let child: &Child = &c.0;
    i64::from(child.id())
}

/// The exports the receiver kept in `dir`, whole.
pub fn dump(dir: &Path) -> Vec<export::Export> {
    let out = Command::new(receiver_python()).arg(receiver_script()).arg("dump").arg(dir).output().unwrap();
    assert!(out.status.success(), "dumping: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| export::Export(serde_json::from_str(l).unwrap())).collect()
}
