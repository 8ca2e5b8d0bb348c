//! Analysis of a profile, for the reports and the diff: rankings of
//! functions and threads ([`ranking`]), what moved between two profiles
//! ([`diff`]), and where time went by off-CPU state. Writers in
//! [`crate::format`] only render what these compute.

pub mod diff;
pub mod findings;
pub mod functions;
pub mod idle;
pub mod ranking;
pub mod threads;
pub mod top;
pub mod waits;
pub mod woken;

pub use diff::{changes, Change};
pub use functions::Lens;
pub use ranking::{summarize, FunctionRow, Options, Summary};

use crate::profile::{FrameKind, Profile, Stack, State};

/// `part` as a percentage of `total`; 0 for an empty total.
pub fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// The off-CPU state pseudo-frames, in report order.
pub const STATES: [State; 3] = State::ALL;

/// The off-CPU state a stack ends in (its `[sleeping]` frame); `None` for
/// on-CPU stacks.
pub fn state_of(profile: &Profile, stack: &Stack) -> Option<State> {
    stack
        .frames
        .last()
        .map(|&f| profile.frame(f))
        .filter(|f| f.kind == FrameKind::Pseudo)
        .and_then(|f| State::from_frame(&f.name))
}

/// Which column a stack's weight belongs to: 0 on-CPU, 1.. the states in
/// [`STATES`] order.
pub fn category(profile: &Profile, stack: &Stack) -> usize {
    state_of(profile, stack)
        .and_then(|s| STATES.iter().position(|x| *x == s))
        .map_or(0, |i| i + 1)
}

/// Whether a stack is off-CPU time (it ends in a state frame).
pub fn is_off_cpu(profile: &Profile, stack: &Stack) -> bool {
    category(profile, stack) != 0
}
