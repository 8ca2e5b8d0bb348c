//! The words the BPF side writes into its keys and entries, read back:
//! how a user stack was walked and how an interpreter's stack was read (bits of
//! the flags), the off-CPU state (enum fg_state, both ways), and the clock
//! their times are on. Shared by the drain of the counts and the reading
//! of the off-CPU entries, which import it and not each other.

use crate::profile::{InterpWalk, State, Walk};

/// CLOCK_MONOTONIC in nanoseconds: bpf_ktime_get_ns's clock.
pub(super) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a stack value.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Where the flags of struct fg_key and struct fg_start keep the walk
/// (FG_WALK_SHIFT).
const FG_WALK_SHIFT: u32 = 4;

/// How a user stack was walked, from the flags of a key or a start.
pub(super) fn walk_of(flags: u32) -> Option<Walk> {
    Walk::from_raw(flags >> FG_WALK_SHIFT & 0xf)
}

/// Where the flags keep how an interpreter's stack was read (FG_INTERP_SHIFT).
const FG_INTERP_SHIFT: u32 = 8;

/// How an interpreter's stack was read, from the flags of a key or a start.
pub(super) fn interp_walk_of(flags: u32) -> Option<InterpWalk> {
    InterpWalk::from_raw(flags >> FG_INTERP_SHIFT & 0xf)
}

/// The BPF side's number for an off-CPU state (enum fg_state).
pub(super) fn raw_state(state: State) -> u32 {
    match state {
        State::Sleeping => 1,
        State::Uninterruptible => 2,
        State::Runqueue => 3,
    }
}

/// The off-CPU state for the BPF side's number; `None` for on-CPU.
pub(super) fn state_of_raw(raw: u32) -> Option<State> {
    match raw {
        0 => None,
        2 => Some(State::Uninterruptible),
        3 => Some(State::Runqueue),
        _ => Some(State::Sleeping),
    }
}
