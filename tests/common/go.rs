//! Go programs built for the tests as users build them: the machine's
//! `go` (Debian's golang-go), or Debian 13's Go 1.24
//! (scripts/fetch-go.sh), default flags, offline; and a plain HTTP GET of
//! their net/http/pprof pages.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use super::consumers_dir;

/// What `go` says when it is missing.
pub const NEEDS_GO: &str = "this test needs Go (apt-get install golang-go)";

/// `go` with an environment that builds offline as users do: no GOFLAGS,
/// GOPATH mode (the programs use the standard library only, no go.mod),
/// the build cache under target/tmp, and never a toolchain download.
pub fn go_command(cache: &Path) -> Command {
    go_command_of(Path::new("go"), cache)
}

/// The same with the toolchain `go` (a path, or `go` from PATH).
pub fn go_command_of(go: &Path, cache: &Path) -> Command {
    let mut cmd = Command::new(go);
    cmd.env_remove("GOFLAGS")
        .env("GO111MODULE", "off")
        .env("GOTOOLCHAIN", "local")
        .env("GOCACHE", cache);
    cmd
}

pub fn go_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("go")
}

/// Builds tests/workloads/go/NAME.go once per test run, with
/// `extra_flags` (such as `-ldflags=-s -w`) before the default ones, into
/// target/tmp/go/, and returns the binary's path: NAME, or NAME-TAG with
/// TAG the flags' letters and digits (`waits-ldflagssw`, 15 bytes: the
/// whole of it is the process's comm).
pub fn go_build(name: &str, extra_flags: &[&str]) -> PathBuf {
    go_build_by(Path::new("go"), &go_dir(), name, extra_flags)
}

/// Debian 13's Go 1.24 (scripts/fetch-go.sh), or a panic saying how to get
/// it.
pub fn go_1_24() -> PathBuf {
    let go = consumers_dir().join("go1.24/bin/go");
    assert!(go.exists(), "{} is missing: scripts/fetch-go.sh fetches it (scripts/test.sh runs it)", go.display());
    go
}

/// [`go_build`] with the toolchain `go`, into `dir`.
pub fn go_build_by(go: &Path, dir: &Path, name: &str, extra_flags: &[&str]) -> PathBuf {
    static BUILT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let dir = dir.to_path_buf();
    let tag: String = extra_flags.concat().chars().filter(char::is_ascii_alphanumeric).collect();
    let bin = match tag.is_empty() {
        true => dir.join(name),
        false => dir.join(format!("{name}-{tag}")),
    };
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.contains(&bin) {
        return bin;
    }
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workloads/go")
        .join(format!("{name}.go"));
    let out = match go_command_of(go, &cache).arg("build").args(extra_flags).arg("-o").arg(&bin).arg(&src).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{NEEDS_GO}"),
        Err(e) => panic!("running go build: {e}"),
    };
    assert!(
        out.status.success(),
        "go build {extra_flags:?} {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    built.push(bin.clone());
    bin
}

/// The minor version of the machine's Go: 19 for `go version go1.19.8
/// linux/amd64`.
pub fn go_minor() -> u32 {
    let out = match go_command(&go_dir().join("cache")).arg("version").output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{NEEDS_GO}"),
        Err(e) => panic!("running go version: {e}"),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("go1."))
        .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Go version in {text:?}"))
}


/// `GET PATH` from the Go HTTP server at `base` (`http://HOST:PORT`),
/// HTTP/1.0 by hand: the body of its 200 answer.
pub fn http_get(base: &str, path: &str) -> String {
    let host = base.strip_prefix("http://").unwrap_or_else(|| panic!("not an http:// address: {base}"));
    let mut conn = TcpStream::connect(host).unwrap_or_else(|e| panic!("connecting to {host}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(conn, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    // HTTP/1.0: the server ends the body by closing the connection.
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).unwrap_or_else(|e| panic!("reading GET {path}: {e}"));
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("GET {path}: no end of header in {answer:?}"));
    assert_eq!(head.split_whitespace().nth(1), Some("200"), "GET {path}:\n{head}");
    body.to_string()
}
