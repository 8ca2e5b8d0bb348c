//! `fgbpf events`: the events a capture counts stacks at — classic
//! tracepoints (`CATEGORY:NAME`), uprobes and uretprobes
//! (`u:PATH:SYMBOL`, `uret:PATH:SYMBOL`) and USDT probes
//! (`usdt:PATH:PROVIDER:NAME`) — parsed from `-e`, attached with their
//! index as BPF cookie (src/bpf/events.bpf.h), and each one's tally read
//! back at the end. Symbols are resolved by libbpf in user space from the
//! binary's symbol tables; USDT notes (`.note.stapsdt`) and semaphores are
//! libbpf's (`bpf_program__attach_usdt`), the semaphore counted up by the
//! kernel while the probe is attached.

use std::path::{Path, PathBuf};

use libbpf_rs::{Link, MapCore, MapFlags, TracepointCategory, TracepointOpts, UprobeOpts, UsdtOpts};

use super::{bpf_error, CaptureError};
use crate::bpf::{FgbpfSkel, OpenFgbpfProgs};

/// Events one capture may count (`FG_MAX_EVENTS` of events.bpf.h).
pub const MAX_EVENTS: usize = 64;

/// Where tracefs is mounted for the tracepoints' ids.
const TRACEFS: &str = "/sys/kernel/tracing";

/// What an event attaches to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Point {
    Tracepoint { category: String, name: String },
    Uprobe { path: PathBuf, symbol: String, ret: bool },
    Usdt { path: PathBuf, provider: String, name: String },
}

/// One `-e`: its text as given (the root frame of its stacks) and where it
/// attaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub text: String,
    pub point: Point,
}

const FORMS: &str = "CATEGORY:NAME (a tracepoint, e.g. sched:sched_process_exec), u:PATH:SYMBOL, uret:PATH:SYMBOL or usdt:PATH:PROVIDER:NAME";

impl Event {
    /// Parses one `-e`. A PATH without a `/` is looked up on PATH.
    pub fn parse(text: &str) -> Result<Event, String> {
        let bad = |why: &str| format!("-e {text:?}: {why}; the forms are {FORMS}");
        let (prefix, rest) = text.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let point = match prefix {
            "u" | "uprobe" | "uret" | "uretprobe" => {
                let (path, symbol) = rest.rsplit_once(':').ok_or_else(|| bad("no SYMBOL after the PATH"))?;
                if symbol.is_empty() || path.is_empty() {
                    return Err(bad("an empty PATH or SYMBOL"));
                }
                Point::Uprobe { path: binary(path, text)?, symbol: symbol.to_string(), ret: prefix.starts_with("uret") }
            }
            "usdt" => {
                let mut parts = rest.rsplitn(3, ':');
                let (name, provider, path) = (parts.next(), parts.next(), parts.next());
                let (Some(name), Some(provider), Some(path)) = (name, provider, path) else {
                    return Err(bad("usdt needs PATH:PROVIDER:NAME"));
                };
                if name.is_empty() || provider.is_empty() || path.is_empty() {
                    return Err(bad("an empty PATH, PROVIDER or NAME"));
                }
                Point::Usdt { path: binary(path, text)?, provider: provider.to_string(), name: name.to_string() }
            }
            _ => {
                let (category, name) = match prefix {
                    "t" | "tracepoint" => rest.split_once(':').ok_or_else(|| bad("no NAME after the CATEGORY"))?,
                    _ => (prefix, rest),
                };
                let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                if !plain(category) || !plain(name) {
                    return Err(bad("a tracepoint's CATEGORY and NAME are letters, digits and '_'"));
                }
                Point::Tracepoint { category: category.to_string(), name: name.to_string() }
            }
        };
        Ok(Event { text: text.to_string(), point })
    }
}

/// The binary a probe names: as given with a `/`, else found on PATH.
fn binary(path: &str, text: &str) -> Result<PathBuf, String> {
    let found = match path.contains('/') {
        true => Some(PathBuf::from(path)),
        false => std::env::var_os("PATH")
            .and_then(|p| std::env::split_paths(&p).map(|d| d.join(path)).find(|p| p.is_file())),
    };
    match found {
        Some(p) if p.is_file() => Ok(p),
        _ => Err(format!("-e {text:?}: no file {path:?} (give the binary's or library's full path)")),
    }
}

/// `--weight argN`: N (1-based), checked against the events (a uprobe
/// has 6 register arguments, a USDT probe up to 12; a tracepoint's fields
/// are not read); 0 without it.
pub fn parse_weight(weight: Option<&str>, events: &[Event]) -> Result<u32, String> {
    let Some(text) = weight else { return Ok(0) };
    let n: u32 = text
        .strip_prefix("arg")
        .and_then(|n| n.parse().ok())
        .filter(|n| (1..=12).contains(n))
        .ok_or_else(|| format!("--weight {text:?}: give argN, N from 1 (the first argument) to 6 for uprobes, 12 for USDT probes"))?;
    for e in events {
        match &e.point {
            Point::Tracepoint { .. } => {
                return Err(format!("--weight: -e {} is a tracepoint, whose fields --weight does not read yet: count its hits without --weight", e.text))
            }
            Point::Uprobe { ret: false, .. } if n > 6 => {
                return Err(format!("--weight arg{n}: a uprobe (-e {}) has 6 register arguments", e.text))
            }
            _ => {}
        }
    }
    Ok(n)
}

/// Parses every `-e`, refusing none or more than [`MAX_EVENTS`].
pub fn parse_all(texts: &[String]) -> Result<Vec<Event>, String> {
    if texts.is_empty() {
        return Err(format!("give at least one event with -e: {FORMS}"));
    }
    if texts.len() > MAX_EVENTS {
        return Err(format!("{} events asked for: at most {MAX_EVENTS} at once", texts.len()));
    }
    texts.iter().map(|t| Event::parse(t)).collect()
}

/// The event programs a capture loads.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Uses {
    pub tracepoints: bool,
    pub uprobes: bool,
    pub uretprobes: bool,
    pub usdt: bool,
}

impl Uses {
    pub fn of(events: &[Event]) -> Uses {
        let any = |f: fn(&Point) -> bool| events.iter().any(|e| f(&e.point));
        Uses {
            tracepoints: any(|p| matches!(p, Point::Tracepoint { .. })),
            uprobes: any(|p| matches!(p, Point::Uprobe { ret: false, .. })),
            uretprobes: any(|p| matches!(p, Point::Uprobe { ret: true, .. })),
            usdt: any(|p| matches!(p, Point::Usdt { .. })),
        }
    }

    pub fn any(&self) -> bool {
        self.tracepoints || self.uprobes || self.uretprobes || self.usdt
    }

    /// Refuses a kernel whose programs would be the compat ones.
    pub fn check(&self, compat: bool) -> Result<(), CaptureError> {
        match self.any() && compat {
            true => Err(CaptureError::new(
                "fgbpf events needs Linux 5.15 or later (bpf_loop and BPF cookies): this kernel has neither",
            )),
            false => Ok(()),
        }
    }

    /// Turns autoload on for the event programs used, off for the rest.
    pub fn autoload(&self, p: &mut OpenFgbpfProgs<'_>) {
        p.event_tp.set_autoload(self.tracepoints);
        p.event_uprobe.set_autoload(self.uprobes);
        p.event_uretprobe.set_autoload(self.uretprobes);
        p.event_usdt.set_autoload(self.usdt);
    }
}

/// Mounts tracefs where libbpf looks for tracepoints' ids, if it is not.
fn mount_tracefs() -> Result<(), CaptureError> {
    if Path::new(TRACEFS).join("events").is_dir() || Path::new("/sys/kernel/debug/tracing/events").is_dir() {
        return Ok(());
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, dir, fs) = (c("nodev"), c(TRACEFS), c("tracefs"));
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(CaptureError::new(format!(
            "tracefs is not mounted and mounting it failed ({}): mount it with `mount -t tracefs nodev {TRACEFS}`",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Attaches every event, its index as cookie. `pid`: the one process to
/// probe (uprobes and USDT are then set in it only), or -1 for all (the
/// programs' target filter then keeps the targets').
pub(super) fn attach(skel: &FgbpfSkel<'_>, events: &[Event], pid: i32) -> Result<Vec<Link>, CaptureError> {
    let p = &skel.progs;
    let mut links = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let cookie = i as u64;
        let what = format!("attaching -e {}", e.text);
        let link = match &e.point {
            Point::Tracepoint { category, name } => {
                mount_tracefs()?;
                if !Path::new(TRACEFS).join("events").join(category).join(name).is_dir() {
                    return Err(CaptureError::new(format!(
                        "-e {}: the kernel has no tracepoint {category}:{name} (they are listed in {TRACEFS}/available_events)",
                        e.text
                    )));
                }
                let opts = TracepointOpts { cookie, ..Default::default() };
                p.event_tp.attach_tracepoint_with_opts(TracepointCategory::Custom(category.clone()), name, opts)
            }
            Point::Uprobe { path, symbol, ret } => {
                let opts = UprobeOpts { cookie, retprobe: *ret, func_name: Some(symbol.clone()), ..Default::default() };
                let prog = if *ret { &p.event_uretprobe } else { &p.event_uprobe };
                prog.attach_uprobe_with_opts(pid, path, 0, opts)
            }
            Point::Usdt { path, provider, name } => {
                let opts = UsdtOpts { cookie, ..Default::default() };
                p.event_usdt.attach_usdt_with_opts(pid, path, provider, name, opts)
            }
        };
        let link = link.map_err(|err| match &e.point {
            Point::Uprobe { path, symbol, .. } => CaptureError::new(format!(
                "{what}: {err} (is {symbol} a function symbol of {}? `nm -D {} | grep {symbol}` or `nm` on an unstripped build shows it)",
                path.display(),
                path.display()
            )),
            Point::Usdt { path, .. } => CaptureError::new(format!(
                "{what}: {err} (`readelf -n {}` lists its stapsdt notes: provider and name)",
                path.display()
            )),
            _ => bpf_error(&what, err),
        })?;
        links.push(link);
    }
    Ok(links)
}

/// One event's tally over the capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// The event as given to `-e`.
    pub event: String,
    /// Hits in the targets.
    pub seen: u64,
    /// Hits counted in a stack.
    pub recorded: u64,
    /// Hits lost: the counts map was full.
    pub lost_counts: u64,
    /// Hits counted without their user or kernel stack: the stack map was full.
    pub lost_user_stack: u64,
    pub lost_kern_stack: u64,
}

/// Each event's tally, summed over CPUs.
pub(super) fn tallies(skel: &FgbpfSkel<'_>, events: &[Event]) -> Vec<Tally> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut sum = [0u64; 5];
            if let Ok(Some(per_cpu)) = skel.maps.event_stats.lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY) {
                for bytes in per_cpu {
                    for (s, c) in sum.iter_mut().zip(bytes.chunks_exact(8)) {
                        *s += u64::from_ne_bytes(c.try_into().expect("chunks of 8 bytes"));
                    }
                }
            }
            Tally {
                event: e.text.clone(),
                seen: sum[0],
                recorded: sum[1],
                lost_counts: sum[2],
                lost_user_stack: sum[3],
                lost_kern_stack: sum[4],
            }
        })
        .collect()
}

/// The summary's line for the events' tallies.
pub fn summary_line(tallies: &[Tally]) -> String {
    let each: Vec<String> = tallies
        .iter()
        .map(|t| {
            let mut s = format!("{}: {} hit{}", t.event, t.seen, if t.seen == 1 { "" } else { "s" });
            if t.recorded != t.seen {
                s.push_str(&format!(", {} counted", t.recorded));
            }
            s
        })
        .collect();
    format!("events: {}", each.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_parses_and_bad_ones_say_the_forms() {
        let tp = Event::parse("sched:sched_process_exec").unwrap();
        assert_eq!(tp.point, Point::Tracepoint { category: "sched".into(), name: "sched_process_exec".into() });
        assert_eq!(Event::parse("t:syscalls:sys_enter_write").unwrap().point, Point::Tracepoint {
            category: "syscalls".into(),
            name: "sys_enter_write".into()
        });
        let u = Event::parse("u:/bin/sh:main").unwrap();
        assert_eq!(u.point, Point::Uprobe { path: "/bin/sh".into(), symbol: "main".into(), ret: false });
        assert!(matches!(Event::parse("uret:/bin/sh:main").unwrap().point, Point::Uprobe { ret: true, .. }));
        let usdt = Event::parse("usdt:/bin/sh:python:function__entry").unwrap();
        assert_eq!(usdt.point, Point::Usdt {
            path: "/bin/sh".into(),
            provider: "python".into(),
            name: "function__entry".into()
        });
        for bad in ["nothing", "u:/bin/sh", "usdt:/bin/sh:x", "u:/no/such/file:f", "sched:a/b"] {
            let err = Event::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert!(parse_all(&[]).unwrap_err().contains("-e"));
        assert_eq!(parse_weight(None, &[tp.clone()]), Ok(0));
        assert!(parse_weight(Some("arg2"), &[tp]).unwrap_err().contains("tracepoint"));
        assert_eq!(parse_weight(Some("arg2"), &[u.clone()]), Ok(2));
        assert!(parse_weight(Some("arg7"), &[u.clone()]).is_err());
        assert_eq!(parse_weight(Some("arg7"), &[usdt]), Ok(7));
        assert!(parse_weight(Some("2"), &[u]).is_err());
        let many: Vec<String> = (0..=MAX_EVENTS).map(|_| "sched:sched_switch".to_string()).collect();
        assert!(parse_all(&many).is_err());
    }
}
