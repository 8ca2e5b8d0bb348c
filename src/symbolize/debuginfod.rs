//! Debug information fetched from debuginfod servers, for stripped binaries
//! no local debug file names: the servers are `DEBUGINFOD_URLS` (spaces
//! between them), as perf, gdb and elfutils read it; files are kept in
//! elfutils' cache (`DEBUGINFOD_CACHE_PATH`, else `~/.cache/debuginfod_client`
//! of the user fgbpf runs as) when that directory is fgbpf's user's alone,
//! else in a private directory removed at exit. A fetched file is used only
//! when its build ID is the binary's and it holds symbols or DWARF. A server
//! that cannot be reached is asked nothing more in the capture. What each
//! server gave, and what it could not, is one line of the report.

use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use debuginfod::{BuildId, CachingClient, Client, HttpClient, HttpClientError, Readable};

use crate::procs::debug_file::belongs;
use crate::procs::elf::build_id_hex;

/// The environment variable naming the servers.
pub const URLS: &str = "DEBUGINFOD_URLS";

/// How long a connection may take to open.
const CONNECT: Duration = Duration::from_secs(5);

/// How long one file may take to arrive, unless `DEBUGINFOD_TIMEOUT`
/// (seconds, elfutils' variable) says otherwise.
const TRANSFER: Duration = Duration::from_secs(90);

/// The largest debug file read from a server (a browser's can be some
/// GB; a server's answer is not trusted to end).
const MAX_FILE: u64 = 2 << 30;

/// Files fetched at once.
const AT_ONCE: usize = 4;

/// The servers a capture may ask, and what they gave.
pub struct Debuginfod {
    servers: Vec<Server>,
    /// `DEBUGINFOD_URLS` words not used, with why.
    not_used: Vec<String>,
    cache: PathBuf,
    /// The private cache, when elfutils' cannot be used safely.
    _private: Option<tempfile::TempDir>,
    /// By build ID: the file that names it, once looked for.
    found: Mutex<HashMap<Vec<u8>, Option<PathBuf>>>,
    /// Binaries named from files already in the cache, by name.
    from_cache: Mutex<Vec<String>>,
    /// Files in the cache under a binary's build ID that are not its
    /// debug information, which fgbpf did not write: kept, and said.
    foreign: Mutex<Vec<PathBuf>>,
}

struct Server {
    url: String,
    client: CachingClient,
    /// Why the server could not be reached, once it could not.
    down: Arc<Mutex<Option<String>>>,
    tally: Mutex<Tally>,
}

#[derive(Default)]
struct Tally {
    /// Binaries named from the server's files.
    named: Vec<String>,
    /// Build IDs the server did not have.
    missing: u64,
    /// Files refused: not the binary's, or without symbols.
    refused: Vec<String>,
    /// Binaries the server did not answer for: asked while it went
    /// down, or not asked because it was.
    unanswered: u64,
    /// Binaries it answered with an error (an HTTP status), and the last.
    failed: u64,
    error: Option<String>,
}

/// One server's HTTP client: ureq, on rustls with the system's
/// certificates; a failure to reach the server is kept for [`Server`].
struct Http {
    agent: ureq::Agent,
    down: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Http")
    }
}

/// A response's body, bounded to [`MAX_FILE`].
struct Body(std::io::Take<ureq::BodyReader<'static>>);

impl std::io::Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        if n == 0 && self.0.limit() == 0 {
            return Err(std::io::Error::other(format!("a file over {} MB", MAX_FILE >> 20)));
        }
        Ok(n)
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Body")
    }
}

impl HttpClient for Http {
    fn get(&self, url: &str) -> Result<Box<dyn Readable>, HttpClientError> {
        match self.agent.get(url).call() {
            Ok(r) if r.status().is_success() => Ok(Box::new(Body(std::io::Read::take(r.into_body().into_reader(), MAX_FILE)))),
            Ok(r) => Err(HttpClientError::StatusCode(r.status())),
            Err(e) => {
                let why = e.to_string();
                *self.down.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.clone());
                Err(HttpClientError::Other(why.into()))
            }
        }
    }
}

fn agent(url: &str) -> ureq::Agent {
    let transfer = std::env::var("DEBUGINFOD_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(TRANSFER, Duration::from_secs);
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT))
        .timeout_global(Some(transfer))
        .tls_config(crate::net::tls_config(url.starts_with("https:")))
        .build()
        .new_agent()
}

/// elfutils' cache directory for the user fgbpf runs as: from the password
/// database, not `$HOME` (which `sudo -E` keeps as the caller's).
fn elfutils_cache() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DEBUGINFOD_CACHE_PATH").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid()).ok()??;
    Some(user.dir.join(".cache").join("debuginfod_client"))
}

/// Whether fgbpf may keep files in `dir`: made if missing, below a
/// directory [`safe_dir`] (so nothing is created through another user's
/// link), and safe itself.
fn usable(dir: &Path) -> bool {
    let Some(existing) = dir.ancestors().find(|d| std::fs::symlink_metadata(d).is_ok()) else {
        return false;
    };
    safe_dir(existing) && std::fs::create_dir_all(dir).is_ok() && safe_dir(dir)
}

/// Whether `dir`, and every directory above it, is a real directory only
/// fgbpf's user (or root) can write to: files are created in it.
fn safe_dir(dir: &Path) -> bool {
    let me = nix::unistd::geteuid().as_raw();
    dir.ancestors().filter(|d| !d.as_os_str().is_empty()).all(|d| {
        std::fs::symlink_metadata(d).is_ok_and(|m| {
            m.is_dir() && (m.uid() == me || m.uid() == 0) && (m.permissions().mode() & 0o022 == 0 || m.mode() & 0o1000 != 0 && d != dir)
        })
    })
}

impl Debuginfod {
    /// The servers `DEBUGINFOD_URLS` names; `None` when it names none.
    pub fn from_env() -> Option<Debuginfod> {
        let urls = std::env::var(URLS).ok()?;
        Self::new(urls.split_whitespace().map(str::to_string).collect())
    }

    fn new(urls: Vec<String>) -> Option<Debuginfod> {
        if urls.is_empty() {
            return None;
        }
        let (cache, private) = match elfutils_cache() {
            Some(dir) if usable(&dir) => (dir, None),
            _ => {
                let t = tempfile::Builder::new().prefix("fgbpf-debuginfod-").tempdir().ok()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let mut not_used = Vec::new();
        let mut servers = Vec::new();
        for url in urls {
            let down = Arc::new(Mutex::new(None));
            let http = Http { agent: agent(&url), down: down.clone() };
            let client = Client::builder().http_client(http).build([url.as_str()]);
            match client.map(|c| c.map(|c| CachingClient::new(c, &cache))) {
                Ok(Some(Ok(client))) => servers.push(Server { url, client, down, tally: Mutex::default() }),
                Ok(Some(Err(e))) => not_used.push(format!("{url}: {e:#}")),
                Ok(None) => {}
                Err(_) => not_used.push(format!("{url}: not a URL")),
            }
        }
        (!servers.is_empty() || !not_used.is_empty()).then(|| Debuginfod {
            servers,
            not_used,
            cache,
            _private: private,
            found: Mutex::default(),
            from_cache: Mutex::default(),
            foreign: Mutex::default(),
        })
    }

    /// Debug files for `wanted` (name, build ID), fetched a few at a time:
    /// for each, the file when a server (or the cache) had one that is the
    /// binary's.
    pub fn fetch_all(&self, wanted: &[(&str, &[u8])]) -> Vec<Option<PathBuf>> {
        let mut out = vec![None; wanted.len()];
        for (chunk, slots) in wanted.chunks(AT_ONCE).zip(out.chunks_mut(AT_ONCE)) {
            std::thread::scope(|s| {
                for ((name, id), slot) in chunk.iter().zip(slots.iter_mut()) {
                    s.spawn(move || *slot = self.fetch(name, id));
                }
            });
        }
        out
    }

    fn fetch(&self, name: &str, id: &[u8]) -> Option<PathBuf> {
        if let Some(known) = self.found.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            return known.clone();
        }
        let hex = build_id_hex(id);
        let cached = self.cache.join(&hex).join("debuginfo");
        let there = std::fs::symlink_metadata(&cached);
        let got = if there.as_ref().is_ok_and(|m| m.is_file()) && belongs(&cached, id) {
            self.from_cache.lock().unwrap_or_else(|e| e.into_inner()).push(name.to_string());
            Some(cached)
        } else if there.is_ok() {
            // Something there that is not this binary's is someone else's:
            // kept, and said with its remedy. The servers are not asked:
            // their client answers from the cache.
            self.foreign.lock().unwrap_or_else(|e| e.into_inner()).push(cached);
            None
        } else {
            // One the servers send and fgbpf refuses is fgbpf's own
            // writing, removed, so that the next server is asked (the
            // servers share the cache) and later runs do not refuse it
            // again.
            self.ask(name, id, Some(cached.as_path()))
        };
        self.found.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_vec(), got.clone());
        got
    }

    /// The servers in order, until one has the build ID's file; `ours`:
    /// the cache's name for it, when nothing was there before this ask.
    fn ask(&self, name: &str, id: &[u8], ours: Option<&Path>) -> Option<PathBuf> {
        let build_id = BuildId::raw(id);
        for server in &self.servers {
            let tally = |f: &dyn Fn(&mut Tally)| f(&mut server.tally.lock().unwrap_or_else(|e| e.into_inner()));
            if server.down.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                tally(&|t| t.unanswered += 1);
                continue;
            }
            match server.client.fetch_debug_info(&build_id) {
                Ok(Some(path)) if belongs(&path, id) => {
                    tally(&|t| t.named.push(name.to_string()));
                    return Some(path);
                }
                Ok(Some(path)) => {
                    tally(&|t| t.refused.push(name.to_string()));
                    if ours == Some(path.as_path()) && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                        let _ = std::fs::remove_file(&path);
                    }
                }
                Ok(None) => tally(&|t| t.missing += 1),
                // Down (kept by Http), or an answer that was not a file.
                Err(_) if server.down.lock().unwrap_or_else(|e| e.into_inner()).is_some() => tally(&|t| t.unanswered += 1),
                Err(e) => {
                    let why = format!("{e:#}");
                    let mut t = server.tally.lock().unwrap_or_else(|e| e.into_inner());
                    t.failed += 1;
                    t.error = Some(why);
                }
            }
        }
        None
    }

    /// One line per server used, and one for the cache: what each gave.
    pub fn lines(&self) -> Vec<String> {
        let list = |names: &[String]| {
            let mut names: Vec<String> = names.iter().map(|n| shown(n)).collect();
            names.sort();
            names.dedup();
            let more = names.len().saturating_sub(LISTED);
            names.truncate(LISTED);
            let mut s = names.join(", ");
            if more > 0 {
                s.push_str(&format!(" and {more} more"));
            }
            s
        };
        let mut out: Vec<String> = self
            .not_used
            .iter()
            .map(|w| format!("{URLS} not used: {}", shown(w)))
            .collect();
        let cached = self.from_cache.lock().unwrap_or_else(|e| e.into_inner());
        if !cached.is_empty() {
            out.push(format!(
                "debuginfod cache {}: debug information for {} ({})",
                self.cache.display(),
                binaries(cached.len() as u64),
                list(&cached)
            ));
        }
        let foreign = self.foreign.lock().unwrap_or_else(|e| e.into_inner());
        if !foreign.is_empty() {
            let paths: Vec<String> = foreign.iter().map(|p| p.display().to_string()).collect();
            let one = foreign.len() == 1;
            out.push(format!(
                "debuginfod cache {}: {} {} not the debug information of {} build ID, and fgbpf did not write {}: kept; remove {} and the servers are asked again",
                self.cache.display(),
                list(&paths),
                if one { "is" } else { "are" },
                if one { "its" } else { "their" },
                if one { "it" } else { "them" },
                if one { "it" } else { "them" },
            ));
        }
        for s in &self.servers {
            let t = s.tally.lock().unwrap_or_else(|e| e.into_inner());
            let mut parts = Vec::new();
            if !t.named.is_empty() {
                parts.push(format!("debug information for {} ({})", binaries(t.named.len() as u64), list(&t.named)));
            }
            if t.missing > 0 {
                parts.push(format!("none for {}", binaries(t.missing)));
            }
            if !t.refused.is_empty() {
                parts.push(format!("files refused as not the binary's or without symbols for {}", list(&t.refused)));
            }
            if let Some(why) = &t.error {
                parts.push(format!("failed for {} ({why})", binaries(t.failed)));
            }
            if let Some(why) = s.down.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                parts.push(format!(
                    "could not be reached ({why}): {} named by address only",
                    binaries(t.unanswered)
                ));
            }
            if !parts.is_empty() {
                out.push(format!("debuginfod {}: {}", shown(&s.url), parts.join("; ")));
            }
        }
        out
    }
}

/// A name from a path or the environment, its control characters
/// replaced: lines are printed to a terminal and into the report.
fn shown(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// `n binaries`, or `1 binary`.
fn binaries(n: u64) -> String {
    if n == 1 {
        "1 binary".into()
    } else {
        format!("{n} binaries")
    }
}

/// Binaries listed by name in a line.
const LISTED: usize = 5;

/// The debug files asked of servers so far, for tests: by server, the
/// binaries named.
#[cfg(test)]
fn named(d: &Debuginfod) -> std::collections::BTreeMap<String, Vec<String>> {
    d.servers.iter().map(|s| (s.url.clone(), s.tally.lock().unwrap().named.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_server_is_asked_once_and_said() {
        // Port 9 (discard) on loopback: nothing listens in the test.
        let d = Debuginfod::new(vec!["http://127.0.0.1:9".into()]).unwrap();
        let got = d.fetch_all(&[("a", &[1, 2, 3, 4]), ("b", &[5, 6, 7, 8])]);
        assert_eq!(got, vec![None, None]);
        let lines = d.lines().join("\n");
        assert!(lines.contains("debuginfod http://127.0.0.1:9: "), "{lines}");
        assert!(lines.contains("could not be reached ("), "{lines}");
        assert!(named(&d).values().all(Vec::is_empty));
    }

    #[test]
    fn no_urls_no_client() {
        assert!(Debuginfod::new(Vec::new()).is_none());
    }

    #[test]
    fn a_directory_others_can_write_is_not_used() {
        let t = tempfile::tempdir().unwrap();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!safe_dir(&open));
        let link = t.path().join("link");
        std::os::unix::fs::symlink(t.path(), &link).unwrap();
        assert!(!safe_dir(&link));
        let mine = t.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
        // /tmp above it is world-writable with the sticky bit: allowed.
        assert!(safe_dir(&mine), "{}", mine.display());
    }
}
