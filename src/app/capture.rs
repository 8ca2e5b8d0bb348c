//! Steps every capture command takes: checks before the capture (targets,
//! privileges, kernel, output directory), and starting and stopping the
//! recording around its window ([`Live`], which `top` and `flight` drive
//! step by step). Writing the outputs after is [`crate::format::outputs`]'s.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use super::otlp::stream::Stream;
use super::recording::Recording;
use super::stages;
use super::summary::say;
use super::CliError;
use crate::probe::{Probe, Targets};
use crate::procs::cgroup::Scope;
use crate::procs::groups::Groups;
use crate::cli::{CaptureArgs, GroupBy};
use crate::format::files::{self, OutDir};
use crate::app::session::command::{HeldCommand, RunAs, Stage};
use nix::sys::signal::Signal;
use crate::app::session::signals::StopFlag;
use crate::app::session::window::{EndReason, Window};
use crate::app::session::{command, targets};
use crate::symbolize::{self, Symbolizer};

/// What a finished capture window leaves for the command to write out.
pub struct Finished {
    pub prepared: Prepared,
    pub out_dir: PathBuf,
    pub recorder: Probe,
    pub symbolizer: Symbolizer,
    pub elapsed: Duration,
    pub end: EndReason,
    pub command_status: Option<i32>,
    /// Local time the window opened, for subtitles, and when.
    pub started_at: String,
    pub started: std::time::SystemTime,
    /// `--otlp-interval`: the stream, its last interval still to send.
    pub stream: Option<Stream>,
}

/// Runs the steps every capture command shares: checks, output directory,
/// the held `-- COMMAND`, starting the recorder, the window, stopping at
/// its end, and handing the `--otlp-interval` stream its last interval.
pub fn capture(rec: &Recording<'_>) -> Result<Finished, CliError> {
    let args = rec.capture;
    let outputs = rec.outputs();
    let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
    super::summary::set_quiet(args.quiet);
    let prepared = preflight(args)?;
    let out_dir = output_dir(args, rec.kind.name(), &names)?;
    let mut live = open(rec, prepared)?;
    let mut stream = live.stream(rec);
    let (window, recorder, symbolizer) = live.window(args);
    let (_, end) = window.run(recorder, symbolizer, &mut |r, s| {
        if let Some(stream) = stream.as_mut() {
            stream.step(r, s);
        }
    });
    let (elapsed, command_status) = live.close(args, end);
    stages::mark("capturing");
    if let Some(s) = stream.as_mut() {
        s.last(&mut live.recorder, &mut live.symbolizer, elapsed);
        stages::mark("OTLP's last interval");
    }
    Ok(Finished {
        prepared: live.prepared,
        out_dir,
        recorder: live.recorder,
        symbolizer: live.symbolizer,
        elapsed,
        end,
        command_status,
        started_at: live.started_at,
        started: live.started,
        stream,
    })
}

/// Starts recording as `top` and `flight` do, with no output directory of
/// its own: the checks, the held `-- COMMAND` and the probe.
pub fn start(rec: &Recording<'_>) -> Result<Live, CliError> {
    super::summary::set_quiet(rec.capture.quiet);
    let prepared = preflight(rec.capture)?;
    open(rec, prepared)
}

/// A capture that is recording: what it records, how stacks are named,
/// Ctrl-C, and the held `-- COMMAND`.
pub struct Live {
    pub prepared: Prepared,
    pub recorder: Probe,
    pub symbolizer: Symbolizer,
    pub stop: StopFlag,
    pub held: Option<HeldCommand>,
    /// Local time the window opened, for subtitles, and when.
    pub started_at: String,
    pub started: std::time::SystemTime,
}

/// Starts the held `-- COMMAND` and `rec`'s probe on the final targets,
/// says so on stderr, and lets the walkers join.
fn open(rec: &Recording<'_>, mut prepared: Prepared) -> Result<Live, CliError> {
    let args = rec.capture;
    let stop = StopFlag::install().map_err(CliError::failed)?;
    let mut held = match args.command.is_empty() {
        true => None,
        false => Some(
            HeldCommand::spawn(&args.command, prepared.run_as.as_ref())
                .map_err(CliError::usage)?,
        ),
    };
    prepared.targets.held = held.as_ref().map(|h| h.pid);
    let targets = prepared.targets.clone();
    let loading = std::time::Instant::now();
    let mut recorder = rec.start(targets)?;
    let attach_ms = loading.elapsed().as_secs_f64() * 1000.0;
    let symbolizer = Symbolizer::new(&symbolize::Options {
        debug_dirs: args.symbols.debug_dirs.clone(),
        own_debug: !args.command.is_empty(),
        thread_roles: &crate::runtimes::THREAD_ROLES,
    });
    if let Some(h) = held.as_mut() {
        recorder.prepare_command(&h.program);
        // Nothing of the held command runs before this: its window starts
        // here, not when the programs were attached.
        recorder.restart_window();
        // Stopped at its entry point, its tables placed: it is recorded
        // from there, the window starting again, so that the stop (fgbpf's
        // doing) is not the command's wait. The kernel's exec and the
        // dynamic linker before it (a millisecond or two) are not recorded.
        let mut failed = None;
        let note = h
            .release(|stage| {
                let done = match stage {
                    Stage::Traced(pid) => recorder.hold_until_entry(pid),
                    Stage::Entry(pid) => recorder.command_at_entry(pid).map(|()| recorder.restart_window()),
                };
                if let Err(e) = done {
                    failed.get_or_insert(e);
                }
            })
            .map_err(CliError::usage)?;
        if let Some(e) = failed {
            return Err(CliError::failed(e.message));
        }
        if let Some(note) = note {
            say(format_args!("{note}; its first stacks may be walked by frame pointers until its image is read"));
        }
        stop.forward_to(h.pid);
    }
    say(format_args!(
        "recording {} of {} (attached in {attach_ms:.0} ms){}",
        rec.what(),
        prepared.target,
        if args.duration.is_none() {
            "; Ctrl-C to stop"
        } else {
            ""
        }
    ));
    // Sampling has begun: the table and runtime walkers of a system-wide
    // capture join now.
    recorder.join_walkers();
    Ok(Live {
        prepared,
        recorder,
        symbolizer,
        stop,
        held,
        started_at: local_timestamp("%Y-%m-%d %H:%M:%S"),
        started: std::time::SystemTime::now(),
    })
}

impl Live {
    /// `--otlp-interval`'s stream of `rec`'s views, from the window's
    /// start.
    pub fn stream(&self, rec: &Recording<'_>) -> Option<Stream> {
        let target = rec.otlp.as_ref()?;
        Stream::start(target, rec.wanted(), &self.prepared.target, self.started)
    }

    /// The capture's window, and what its steps feed.
    pub fn window(&mut self, args: &CaptureArgs) -> (Window<'_>, &mut Probe, &mut Symbolizer) {
        let window = Window {
            duration: args.duration,
            stop: &self.stop,
            command: self.held.as_mut(),
            watched: [&args.pids[..], &args.tids[..]].concat(),
            prepare: args.pids.clone(),
            quiet: args.quiet,
            started: None,
        };
        (window, &mut self.recorder, &mut self.symbolizer)
    }

    /// Stops recording at the window's `end` and settles the command;
    /// returns the window recorded and the command's exit status.
    pub fn close(&mut self, args: &CaptureArgs, end: EndReason) -> (Duration, Option<i32>) {
        self.recorder.stop();
        // The window the programs recorded, from the capture's time 0 (just
        // before they were attached) to their stop: what every weight and
        // wall-clock sum is measured against.
        let elapsed = self.recorder.recorded_window();
        let command_status = self
            .held
            .as_mut()
            .and_then(|h| command_fate(h, end, args.kill_at_end, elapsed));
        self.stop.forward_none();
        (elapsed, command_status)
    }
}

/// How long an interrupted command gets to end, and a stopped one to
/// handle SIGTERM.
const COMMAND_GRACE: Duration = Duration::from_secs(2);

/// What became of the `-- COMMAND` when the capture ended, said in one
/// line when it matters; its exit status if it ended.
fn command_fate(
    cmd: &mut HeldCommand,
    end: EndReason,
    kill_at_end: bool,
    elapsed: Duration,
) -> Option<i32> {
    let status = match end {
        EndReason::CommandExited(code) => Some(code),
        // The signal reached the command too (from the terminal, or
        // passed on by fgbpf): give it a moment to end.
        EndReason::Interrupted => cmd.wait_for(COMMAND_GRACE),
        EndReason::Duration | EndReason::TargetsGone => cmd.try_wait(),
    };
    if let Some(code) = status {
        if code > 128 {
            say(format_args!(
                "the command was killed by signal {} (exit status {code})",
                code - 128
            ));
        } else if code != 0 {
            say(format_args!("the command exited with status {code}"));
        }
        return status;
    }
    if kill_at_end {
        cmd.signal_tree(Signal::SIGTERM);
        if cmd.wait_for(COMMAND_GRACE).is_none() {
            cmd.signal_tree(Signal::SIGKILL);
            cmd.wait_for(COMMAND_GRACE);
        }
        say(format_args!(
            "stopped the command (PID {}) as the capture ended (--kill-at-end)",
            cmd.pid
        ));
    } else {
        say(format_args!(
            "the capture ended after {:.1} s; the command is still running as PID {} (--kill-at-end stops it with the capture)",
            elapsed.as_secs_f64(),
            cmd.pid
        ));
    }
    None
}

/// A capture that passed every check.
pub struct Prepared {
    /// `--user`: who the command runs as.
    pub run_as: Option<RunAs>,
    pub targets: Targets,
    /// What was profiled, for titles and reports.
    pub target: String,
}

/// Everything that can be checked before the capture starts, so that bad
/// input fails fast with one line and writes nothing.
fn preflight(args: &CaptureArgs) -> Result<Prepared, CliError> {
    targets::check(&args.pids, &args.tids).map_err(CliError::usage)?;
    check_command(args)?;
    let scope = targets::scope(args).map_err(CliError::usage)?;
    if args.group_by == Some(GroupBy::Cgroup) {
        Groups::new(scope.as_ref()).map_err(CliError::usage)?;
    }
    let run_as = match &args.user {
        Some(name) => Some(RunAs::lookup(name).map_err(CliError::usage)?),
        None => None,
    };
    check_privileges()?;
    check_kernel(args)?;
    Ok(Prepared {
        run_as,
        targets: Targets {
            pids: args.pids.clone(),
            tids: args.tids.clone(),
            held: None,
            follow_children: !args.command.is_empty(),
            scope: scope.clone(),
        },
        target: describe(args, scope.as_ref()),
    })
}

/// The capture's output directory (`-o`, or a fresh one named after
/// `kind` and the time), ready for `outputs`.
pub fn output_dir(args: &CaptureArgs, kind: &str, outputs: &[&str]) -> Result<PathBuf, CliError> {
    match &args.output {
        Some(dir) => files::prepare_dir(OutDir::Given(dir), outputs),
        None => files::prepare_dir(OutDir::Fresh(&default_dir(kind)), outputs),
    }
    .map_err(CliError::usage)
}

/// `-- COMMAND` and the flags that only make sense with one.
fn check_command(args: &CaptureArgs) -> Result<(), CliError> {
    // `fgbpf oncpu --` or `-- $CMD` with CMD empty: never the whole system.
    let bare_dashes = args.command.is_empty() && std::env::args_os().any(|a| a == "--");
    if bare_dashes || args.command.first().is_some_and(|p| p.is_empty()) {
        return Err(CliError::usage(
            "no command after --; give one (-- ./server), or drop -- to profile the whole system",
        ));
    }
    if let Some(program) = args.command.first() {
        command::resolve(program).map_err(CliError::usage)?;
    } else if args.user.is_some() || args.kill_at_end {
        let flag = if args.user.is_some() { "--user" } else { "--kill-at-end" };
        return Err(CliError::usage(format!(
            "{flag} applies to a command started by fgbpf: add -- COMMAND"
        )));
    }
    Ok(())
}

fn describe(args: &CaptureArgs, scope: Option<&Scope>) -> String {
    let what = describe_targets(args);
    match scope {
        Some(s) => format!("{what} in cgroup {}", s.path),
        None => what,
    }
}

fn describe_targets(args: &CaptureArgs) -> String {
    let list = |ids: &[u32]| ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    if !args.command.is_empty() {
        return args.command.join(" ");
    }
    let mut parts = Vec::new();
    if !args.pids.is_empty() {
        let names: Vec<String> = args
            .pids
            .iter()
            .map(|p| {
                let comm = fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                format!("{} ({p})", comm.trim())
            })
            .collect();
        parts.push(format!("pid {}", names.join(", ")));
    }
    if !args.tids.is_empty() {
        parts.push(format!("tid {}", list(&args.tids)));
    }
    if parts.is_empty() {
        let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        return format!("all processes on {}", host.trim());
    }
    parts.join(" and ")
}

/// `./fgbpf-KIND-YYYYmmdd-HHMMSS` in local time.
pub fn default_dir(kind: &str) -> PathBuf {
    PathBuf::from(format!("fgbpf-{kind}-{}", local_timestamp("%Y%m%d-%H%M%S")))
}

pub fn local_timestamp(format: &str) -> String {
    local_timestamp_before(format, Duration::ZERO)
}

/// [`local_timestamp`] of the moment `ago` before now.
pub fn local_timestamp_before(format: &str, ago: Duration) -> String {
    let fmt = std::ffi::CString::new(format).expect("format has no NUL");
    let mut buf = [0u8; 64];
    // SAFETY: time/localtime_r/strftime with valid, sized buffers.
    let n = unsafe {
        let t = libc::time(std::ptr::null_mut()) - ago.as_secs().min(i32::MAX as u64) as libc::time_t;
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        libc::strftime(buf.as_mut_ptr().cast(), buf.len(), fmt.as_ptr(), &tm)
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Root, or CAP_BPF and CAP_PERFMON (plus CAP_SYS_ADMIN for reading other
/// processes' mappings).
fn check_privileges() -> Result<(), CliError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let missing: Vec<&str> = [(CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON")]
        .iter()
        .filter(|(bit, _)| eff & (1 << bit) == 0)
        .map(|&(_, name)| name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "not running as root and missing {}: run with sudo, or grant them with `setcap cap_bpf,cap_perfmon,cap_sys_admin+ep fgbpf`",
        missing.join(" and ")
    )))
}

/// BTF for CO-RE (the kernel's, or a valid `--btf` file) and the words of
/// FGBPF_FORCE_FALLBACK (src/probe/features.rs).
fn check_kernel(args: &CaptureArgs) -> Result<(), CliError> {
    crate::probe::features::preflight(args.btf.as_deref()).map_err(CliError::usage)
}
