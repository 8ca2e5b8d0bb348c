//! Starting on kernels that refuse part of the object: a verifier that
//! cannot follow the interpreter walkers (CPython's, Ruby's, PHP's, Go's
//! labels: runtimes::walkers), which share one place in the walk (Debian 12's 6.1 loses the bound of a
//! spilled index that 6.12 keeps) or the .eh_frame walker (the tail-call
//! walker of kernels without bpf_loop needs 5.10) still lets fgbpf
//! profile, without that part, and the summary says which part the kernel
//! refused and why.
//! Features probed before loading (src/probe/features.rs) decide the
//! other paths first.

use std::path::Path;

use super::features::{Force, Paths, KERNEL_BTF};
use super::{CaptureError, Options, Probe};
use crate::runtimes::Walkers;

impl Probe {
    /// Loads the object with the programs `opts` asks for, fills the
    /// targets and starts recording; when the kernel refuses the object,
    /// tries again without the interpreter walkers, then without the
    /// table walker, then without both.
    pub fn start(opts: &Options) -> Result<Self, CaptureError> {
        if let Some(started) = Probe::start_modern(opts) {
            return started;
        }
        let paths = Paths::probe(opts.btf.as_deref())?;
        Probe::start_on(opts, paths)
    }

    /// On a kernel with its own BTF and no fallback forced, most likely
    /// one with every feature: reading the kernel's BTF for the features
    /// (about 15 ms, and libbpf reads it again while loading) need not
    /// delay the load. The object loads for the modern paths while
    /// another thread reads the features; the programs are attached only
    /// if both agree. `None`: not tried, or they disagreed (the features
    /// read are then used as usual).
    fn start_modern(opts: &Options) -> Option<Result<Self, CaptureError>> {
        let forced = Force::from_env().map_or(true, |f| f != Force::default());
        if opts.btf.is_some() || forced || !Path::new(KERNEL_BTF).exists() {
            return None;
        }
        let reading = std::thread::spawn(|| Paths::probe(None));
        let assumed = Paths::modern();
        let mut read = None;
        let mut reading = Some(reading);
        let mut agree = || {
            if let Some(r) = reading.take() {
                read = Some(r.join().unwrap_or_else(|_| Err(CaptureError::new("reading the kernel's BTF failed"))));
            }
            matches!(&read, Some(Ok(p)) if p.loads_as(&assumed))
        };
        let started = Probe::start_with(opts, &assumed, &mut agree);
        // Joined in any case (a load that fails before agreeing leaves it).
        agree();
        let paths = match read? {
            Ok(paths) => paths,
            Err(e) => return Some(Err(e)),
        };
        match started {
            Ok(Some(mut probe)) => {
                probe.paths = paths;
                Some(Ok(probe))
            }
            // They disagreed, or the kernel refused the object: the
            // usual way, with what was read.
            _ => Some(Probe::start_on(opts, paths)),
        }
    }

    /// [`Probe::start`] on the paths read from the kernel.
    fn start_on(opts: &Options, paths: Paths) -> Result<Self, CaptureError> {
        // Without bpf_loop no runtime's walker is tried (the table walker
        // runs by tail calls), and without a ring buffer neither (what
        // they announce goes through it only).
        let asked = opts.runtimes_on().walkers;
        let no_loop = paths.compat.taken().then(|| paths.no_loop_why());
        let opts = &match paths.perf_buffer.taken() || paths.compat.taken() {
            true => opts.with_walkers(Walkers::NONE),
            false => opts.clone(),
        };
        let whole = Options { staged_start: false, ..opts.clone() };
        // A kernel that verifies every global function of the object, used
        // or not (before 6.8: Debian 12's 6.1), refuses a staged start's
        // first load, whose walker functions name maps it leaves out: the
        // object is then loaded whole, as on every kernel before staged
        // starts, and the tries below start from there.
        let staged = opts.staged_start && opts.targets.whole_system();
        let started = Probe::start_with(opts, &paths, &mut || true).map(Option::unwrap);
        let started = match started {
            Err(_) if staged => Probe::start_with(&whole, &paths, &mut || true).map(Option::unwrap),
            other => other,
        };
        let opts = &whole;
        let said = |mut probe: Probe, interpreters_off: Option<&str>| {
            if let Some(why) = interpreters_off {
                probe.walkers_refused.refuse(asked.interpreters(), why);
            }
            if let Some(why) = &no_loop {
                probe.walkers_refused.refuse(asked, why);
            }
            probe
        };
        let first = match started {
            Ok(probe) => return Ok(said(probe, None)),
            Err(e) => e,
        };
        let walkers = opts.runtimes_on().walkers;
        let interpreters = walkers.interpreters().any();
        let tables = opts.user_stacks && opts.max_unwind_rows > 0;
        let no_interpreters = opts.with_walkers(walkers.without(walkers.interpreters()));
        let no_tables = Options {
            max_unwind_rows: 0,
            ..opts.clone()
        };
        let neither = Options {
            max_unwind_rows: 0,
            ..no_interpreters.clone()
        };
        let tries = [
            (interpreters, &no_interpreters, true, false),
            (tables, &no_tables, false, true),
            (interpreters && tables, &neither, true, true),
        ];
        for (wanted, with, interpreters_off, tables_off) in tries {
            if !wanted {
                continue;
            }
            if let Ok(Some(mut probe)) = Probe::start_with(with, &paths, &mut || true) {
                if tables_off {
                    probe.tables_refused = Some(first.message.clone());
                }
                return Ok(said(probe, interpreters_off.then_some(first.message.as_str())));
            }
        }
        Err(first)
    }
}
