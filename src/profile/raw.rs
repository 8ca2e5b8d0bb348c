//! Stacks as the recorder hands them over, before symbolization: a thread,
//! instruction pointers, what was measured and its weight. The probe
//! produces them, the profile builder turns them into a [`super::Profile`].

/// Stands for the frames of a stack the kernel could not store.
pub const LOST_STACK: &str = "[lost stack]";

/// The pseudo-frame for blocks that began before the capture, whose user
/// stack could not be taken.
pub const BEFORE_CAPTURE: &str = "[blocked before capture]";

/// Why a thread was off the CPU, read from its state when it switched out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    Sleeping,
    Uninterruptible,
    Runqueue,
}

impl State {
    pub const ALL: [State; 3] = [State::Sleeping, State::Uninterruptible, State::Runqueue];

    /// The pseudo-frame that ends every off-CPU stack.
    pub fn frame(self) -> &'static str {
        match self {
            State::Sleeping => "[sleeping]",
            State::Uninterruptible => "[uninterruptible]",
            State::Runqueue => "[runqueue]",
        }
    }

    /// The word for the state in reports.
    pub const fn name(self) -> &'static str {
        match self {
            State::Sleeping => "sleeping",
            State::Uninterruptible => "uninterruptible",
            State::Runqueue => "runqueue",
        }
    }

    /// The state a pseudo-frame stands for, e.g. `[sleeping]`.
    pub fn from_frame(name: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.frame() == name)
    }

    /// Parses a `--state` word: a name or ps(1)'s letter.
    pub fn parse(word: &str) -> Option<Self> {
        match word.trim().to_ascii_lowercase().as_str() {
            "sleeping" | "s" => Some(State::Sleeping),
            "uninterruptible" | "d" => Some(State::Uninterruptible),
            "runqueue" | "r" => Some(State::Runqueue),
            _ => None,
        }
    }
}

/// A stack as the kernel recorded it: instruction pointers, leaf first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawStack {
    pub pid: u32,
    pub tid: u32,
    /// The thread's name at the time of the sample (untrusted).
    pub comm: String,
    pub user: Vec<u64>,
    pub kernel: Vec<u64>,
    /// Samples, or microseconds for time-weighted captures.
    pub weight: u64,
    /// Kernel frames already named (leaf first), where no addresses could
    /// be had, e.g. from /proc/TID/stack.
    pub kernel_names: Vec<String>,
    /// A pseudo-frame standing in for missing frames at the root, e.g. for
    /// a stack that could not be stored.
    pub root_note: Option<&'static str>,
    /// `None` for on-CPU samples; the off-CPU state otherwise, which also
    /// ends the stack as a pseudo-frame.
    pub state: Option<State>,
    /// How the user stack was walked; `None` when none was.
    pub walk: Option<super::unwinding::Walk>,
    /// `--wakers`: the thread that ended this wait, with its stacks (its
    /// `pid`, `tid`, `comm`, `user`, `kernel`; no weight or state).
    pub waker: Option<Box<RawStack>>,
}

/// The separator frame between a blocked stack and its waker's stack, as
/// offwaketime writes it.
pub const WAKER_SEPARATOR: &str = "--";

/// The waker frame that stands for an interrupt or softirq: the task it
/// interrupted had nothing to do with the wakeup.
pub const INTERRUPT_WAKER: &str = "[interrupt]";
