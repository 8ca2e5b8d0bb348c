//! Starting on kernels that refuse part of the object: a verifier that
//! cannot follow the Python walker (Debian 12's 6.1 loses the bound of a
//! spilled index that 6.12 keeps) or the .eh_frame walker (the tail-call
//! walker of kernels without bpf_loop needs 5.10) still lets fgbpf
//! profile, without that part, and the summary says which part the kernel
//! refused and why.
//! Features probed before loading (src/probe/features.rs) decide the
//! other paths first.

use super::features::Paths;
use super::{CaptureError, Options, Probe};

impl Probe {
    /// Loads the object with the programs `opts` asks for, fills the
    /// targets and starts recording; when the kernel refuses the object,
    /// tries again without the Python walker, then without the table
    /// walker, then without both.
    pub fn start(opts: &Options) -> Result<Self, CaptureError> {
        let paths = Paths::probe(opts.btf.as_deref())?;
        // Without bpf_loop the Python walker is not tried (the table
        // walker runs by tail calls). Python code objects are announced
        // through the ring buffer only.
        let no_loop = paths.compat.taken().then(|| paths.no_loop_why());
        let wanted_python = opts.user_stacks && opts.python;
        let opts = &Options {
            python: opts.python && !paths.perf_buffer.taken() && !paths.compat.taken(),
            ..opts.clone()
        };
        let first = match Probe::start_with(opts, &paths) {
            Ok(mut probe) => {
                if wanted_python {
                    probe.python_refused = no_loop.clone();
                }
                return Ok(probe);
            }
            Err(e) => e,
        };
        let python = opts.user_stacks && opts.python;
        let tables = opts.user_stacks && opts.max_unwind_rows > 0;
        let no_python = Options {
            python: false,
            ..opts.clone()
        };
        let no_tables = Options {
            max_unwind_rows: 0,
            ..opts.clone()
        };
        let neither = Options {
            max_unwind_rows: 0,
            ..no_python.clone()
        };
        let tries = [
            (python, &no_python, true, false),
            (tables, &no_tables, false, true),
            (python && tables, &neither, true, true),
        ];
        for (wanted, with, python_off, tables_off) in tries {
            if !wanted {
                continue;
            }
            if let Ok(mut probe) = Probe::start_with(with, &paths) {
                if python_off {
                    probe.python_refused = Some(first.message.clone());
                }
                if tables_off {
                    probe.tables_refused = Some(first.message.clone());
                }
                if wanted_python && probe.python_refused.is_none() {
                    probe.python_refused = no_loop;
                }
                return Ok(probe);
            }
        }
        Err(first)
    }
}
