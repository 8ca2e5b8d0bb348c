//! `FGBPF_FORCE_FALLBACK`: the fallbacks it forces on a kernel that has
//! the features (so that every path of the loader runs on any host), and
//! whether a fallback was taken, and why ([`Taken`]), which
//! [`super::features`] decides.

/// The environment variable that forces fallbacks: a comma-separated list
/// of [`FORCE_WORDS`], or `all` (every one).
pub const FORCE_ENV: &str = "FGBPF_FORCE_FALLBACK";

/// The words `FGBPF_FORCE_FALLBACK` takes, besides `all`.
pub const FORCE_WORDS: [&str; 6] = ["task-state", "raw-tp", "perf-buffer", "no-loop", "no-task-regs", "prealloc"];

/// Fallbacks forced on a kernel that has the features.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Force {
    pub task_state: bool,
    pub raw_tp: bool,
    pub perf_buffer: bool,
    /// As if the kernel had no bpf_loop: the compat programs, which walk
    /// tables by tail calls, and no runtime walkers.
    pub no_loop: bool,
    /// As if the kernel had no bpf_task_pt_regs: the compat walker reads
    /// user registers from the task's kernel stack (implies `no-loop`,
    /// the only walker that reads them so).
    pub no_task_regs: bool,
    /// As if perf_event programs took only preallocated hash maps.
    pub prealloc: bool,
}

impl Force {
    /// Reads [`FORCE_ENV`]: the one place it is read.
    pub fn from_env() -> Result<Force, String> {
        match std::env::var(FORCE_ENV) {
            Ok(text) => Force::parse(&text),
            Err(std::env::VarError::NotPresent) => Ok(Force::default()),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "{FORCE_ENV} is not valid UTF-8: set it to a comma-separated list of {} or all",
                FORCE_WORDS.join(", ")
            )),
        }
    }

    fn parse(text: &str) -> Result<Force, String> {
        let mut force = Force::default();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "all" => {
                    force = Force {
                        task_state: true,
                        raw_tp: true,
                        perf_buffer: true,
                        no_loop: true,
                        no_task_regs: true,
                        prealloc: true,
                    }
                }
                "task-state" => force.task_state = true,
                "raw-tp" => force.raw_tp = true,
                "perf-buffer" => force.perf_buffer = true,
                "no-loop" => force.no_loop = true,
                "no-task-regs" => {
                    force.no_loop = true;
                    force.no_task_regs = true;
                }
                "prealloc" => force.prealloc = true,
                other => {
                    return Err(format!(
                        "{FORCE_ENV}: unknown fallback {other:?}: use a comma-separated list of {} or all",
                        FORCE_WORDS.join(", ")
                    ))
                }
            }
        }
        Ok(force)
    }
}

/// Whether a fallback was taken, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Taken {
    /// The kernel has the feature: no fallback.
    #[default]
    No,
    /// The kernel lacks the feature.
    Detected,
    /// `FGBPF_FORCE_FALLBACK` asked for it.
    Forced,
}

impl Taken {
    pub fn taken(self) -> bool {
        self != Taken::No
    }

    pub(super) fn of(forced: bool, missing: bool) -> Taken {
        match (forced, missing) {
            (true, _) => Taken::Forced,
            (false, true) => Taken::Detected,
            (false, false) => Taken::No,
        }
    }

    pub(super) fn why(self, missing: &str) -> String {
        match self {
            Taken::Forced => format!("forced by {FORCE_ENV}"),
            _ => missing.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_words_parse_and_unknown_ones_are_refused() {
        assert_eq!(Force::parse("").unwrap(), Force::default());
        let all = Force::parse("all").unwrap();
        assert!(all.task_state && all.raw_tp && all.perf_buffer && all.no_loop && all.no_task_regs && all.prealloc);
        let two = Force::parse("raw-tp, perf-buffer").unwrap();
        assert!(!two.task_state && two.raw_tp && two.perf_buffer && !two.no_loop);
        let regs = Force::parse("no-task-regs").unwrap();
        assert!(regs.no_loop && regs.no_task_regs, "only the compat walker reads registers by hand");
        let err = Force::parse("task-state,ringbuf").unwrap_err();
        assert!(
            err.contains("\"ringbuf\"") && err.contains("task-state, raw-tp, perf-buffer, no-loop, no-task-regs, prealloc"),
            "{err}"
        );
    }
}
