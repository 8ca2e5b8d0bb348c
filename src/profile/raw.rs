//! Stacks as the recorder hands them over, before symbolization: a thread,
//! instruction pointers, what was measured and its weight. The probe
//! produces them, the profile builder turns them into a [`super::Profile`].

/// Stands for the frames of a stack the kernel could not store.
pub const LOST_STACK: &str = "[lost stack]";

/// The pseudo-frame for blocks that began before the capture, whose user
/// stack could not be taken.
pub const BEFORE_CAPTURE: &str = "[blocked before capture]";

/// The pseudo-frame in place of the kernel frames of a wait whose end
/// sched_switch did not report: its time ends where the scheduler's own
/// record says the thread ran again, its kernel stack was gone by then.
pub const END_UNTRACED: &str = "[switch-in not traced]";

/// The pseudo-frame at the root of a wait whose start sched_switch did not
/// report: it began where the scheduler's account of the thread's run
/// time ran out, and its user stack was not taken.
pub const START_UNTRACED: &str = "[switch-out not traced]";

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
    /// With `pid`, which process: its start in clock ticks since boot; 0
    /// when not known (the process under the PID now, or last).
    pub start: u32,
    pub tid: u32,
    /// The thread's name at the time of the sample (untrusted).
    /// Shared by the stacks of threads of the same name.
    pub comm: std::sync::Arc<str>,
    /// Instruction pointers, shared among the stacks that hold the same
    /// stored stack (a capture's keys share their stacks many times over).
    pub user: std::sync::Arc<[u64]>,
    pub kernel: std::sync::Arc<[u64]>,
    /// Samples, or microseconds for time-weighted captures.
    pub weight: u64,
    /// When the weight fell (see [`super::time`]), adding up to `weight`.
    pub spans: super::Spans,
    /// A pseudo-frame standing in for missing frames at the root, e.g. for
    /// a stack that could not be stored.
    pub root_note: Option<&'static str>,
    /// A pseudo-frame standing in for the kernel frames, e.g.
    /// [`END_UNTRACED`], or ending a stack that has none: a goroutine's
    /// state (`[chan receive]`).
    pub kernel_note: Option<&'static str>,
    /// `None` for on-CPU samples; the off-CPU state otherwise, which also
    /// ends the stack as a pseudo-frame.
    pub state: Option<State>,
    /// How the user stack was walked; `None` when none was.
    pub walk: Option<super::unwinding::Walk>,
    /// `--wakers`: the thread that ended this wait, with its stacks (its
    /// `pid`, `tid`, `comm`, `user`, `kernel`; no weight or state).
    pub waker: Option<Box<RawStack>>,
    /// How the interpreter stack was read; `None` outside interpreters.
    pub interp_walk: Option<InterpWalk>,
    /// What only some stacks hold, apart (a whole host's hundreds of
    /// thousands of stacks mostly hold none of it).
    pub more: Option<Box<More>>,
}

/// The rarer parts of a [`RawStack`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct More {
    /// `--group-by cgroup`: the name of the cgroup it ran in, the root
    /// frame of its stacks (see [`super::Thread::group`]).
    pub group: Option<String>,
    /// Kernel frames already named (leaf first), where no addresses could
    /// be had, e.g. from /proc/TID/stack; a module's `name [module]`.
    pub kernel_names: Vec<String>,
    /// The frames of an interpreter thread, named, leaf first; they take
    /// the place of the evaluator frames of `user` they ran in.
    pub interp: Vec<InterpFrame>,
    /// Which of `user`'s frames are that interpreter's evaluator.
    pub evaluator: Option<Evaluator>,
    /// A Go thread's goroutine and its pprof labels (see
    /// [`super::Stack::labels`]).
    pub labels: Option<super::Labels>,
}

impl RawStack {
    /// The rarer parts, to set (made when there were none).
    pub fn more_mut(&mut self) -> &mut More {
        self.more.get_or_insert_with(Default::default)
    }

    /// `more` made of what was given, `None` when nothing was.
    pub fn more_of(more: More) -> Option<Box<More>> {
        (more != More::default()).then(|| Box::new(more))
    }
}

/// An interpreter's native evaluator frames, each call of which runs a
/// run of its frames (given by its runtime, which knows its names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evaluator {
    pub frames: &'static [Pattern],
    /// The native frame an evaluator frame runs its code in when it calls
    /// one (an interpreter loop apart from its entry): it goes with it.
    pub loops: &'static [Pattern],
    /// Code its JIT compiled, run on the evaluator's frame: such a frame
    /// called by one of `jit_callers` (those that call the evaluator)
    /// stands for the evaluator.
    pub jit: &'static [Pattern],
    pub jit_callers: &'static [Pattern],
}

/// A native frame's name, as an [`Evaluator`] matches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Is(&'static str),
    /// `.cold` parts and the like.
    Prefix(&'static str),
    /// An unnamed address (`lib+0x…`) in a library whose name starts so.
    AddressIn(&'static str),
}

impl Pattern {
    pub fn matches(&self, name: &str) -> bool {
        match *self {
            Pattern::Is(n) => name == n,
            Pattern::Prefix(p) => name.starts_with(p),
            Pattern::AddressIn(lib) => name.starts_with(lib) && name.contains("+0x"),
        }
    }
}

impl Evaluator {
    /// No evaluator: the interpreter's frames go at the root.
    pub const NONE: Evaluator = Evaluator { frames: &[], loops: &[], jit: &[], jit_callers: &[] };

    pub fn is(&self, name: &str) -> bool {
        self.frames.iter().any(|p| p.matches(name))
    }

    pub fn is_loop(&self, name: &str) -> bool {
        self.loops.iter().any(|p| p.matches(name))
    }

    pub fn is_jit(&self, name: &str) -> bool {
        self.jit.iter().any(|p| p.matches(name))
    }

    pub fn is_jit_caller(&self, name: &str) -> bool {
        self.jit_callers.iter().any(|p| p.matches(name))
    }
}

/// One interpreted function's frame: its text, e.g. `handler (app.py:42)`, and
/// whether it is the outermost frame of one call of the evaluator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterpFrame {
    pub text: std::sync::Arc<str>,
    pub entry: bool,
}

/// How a thread's interpreter stack was read (enum fg_interp_walk).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InterpWalk {
    Whole,
    /// The thread had no interpreter state: it runs no interpreted code.
    NoThread,
    /// Cut: no room left in the 127-frame stack.
    Cut,
    /// Cut by a failed read of the interpreter's memory.
    Fault,
}

impl InterpWalk {
    pub fn from_raw(raw: u32) -> Option<InterpWalk> {
        Some(match raw {
            1 => InterpWalk::Whole,
            2 => InterpWalk::NoThread,
            3 => InterpWalk::Cut,
            4 => InterpWalk::Fault,
            _ => return None,
        })
    }
}

/// The separator frame between a blocked stack and its waker's stack, as
/// offwaketime writes it.
pub const WAKER_SEPARATOR: &str = "--";

/// The waker frame that stands for an interrupt or softirq: the task it
/// interrupted had nothing to do with the wakeup.
pub const INTERRUPT_WAKER: &str = "[interrupt]";

#[cfg(test)]
mod tests {
    /// A whole host's end holds hundreds of thousands of raw stacks at
    /// once: what only some of them need stays boxed apart.
    #[test]
    fn a_raw_stack_stays_small() {
        assert_eq!(std::mem::size_of::<super::RawStack>(), 144);
    }
}
