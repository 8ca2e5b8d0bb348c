//! What kind of code a frame is: the one [`FrameKind`], from a frame's
//! naming (the Java reader's frames, the probe's runtime names, the
//! symbolizer's) to the profile's frames, their folded suffix and their
//! colour. It imports nothing of fgbpf's, so every layer may use it.

/// Where a frame's code lives; decides its folded suffix and its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    User,
    Kernel,
    /// A function inlined into its caller (from DWARF, or a Java method
    /// inlined by the JIT into the frame before it).
    Inlined,
    /// JIT-compiled code named from a perf map, or a Java method compiled
    /// by HotSpot's C2 (or of an unknown tier, or a native method's frame).
    Jit,
    /// A Java method run by HotSpot's interpreter (async-profiler's `_[0]`).
    Interpreted,
    /// A Java method compiled by HotSpot's C1 (async-profiler's `_[1]`).
    C1,
    /// A function an interpreter's evaluator runs (a Python function, a
    /// Ruby method, a PHP function), in place of the evaluator's native
    /// frame: `name (file.py:line)`, `label (file.rb:line)`.
    Evaluated,
    /// A frame fgbpf adds that is not code: a process, thread or state.
    Pseudo,
    /// A frame of the thread that woke a blocked one (`--wakers`), above
    /// the `--` separator of the offwake view.
    Waker,
}

impl FrameKind {
    /// Whether the frame is code that ran in user space: a function,
    /// inlined or not, or JIT code.
    pub fn is_user_space(self) -> bool {
        matches!(
            self,
            FrameKind::User
                | FrameKind::Inlined
                | FrameKind::Jit
                | FrameKind::Interpreted
                | FrameKind::C1
                | FrameKind::Evaluated
        )
    }

    /// The suffix the folded format uses for this kind of frame.
    pub fn suffix(self) -> &'static str {
        match self {
            FrameKind::Kernel => "_[k]",
            FrameKind::Inlined => "_[i]",
            FrameKind::Jit => "_[j]",
            FrameKind::Interpreted => "_[0]",
            FrameKind::C1 => "_[1]",
            FrameKind::Evaluated => "_[p]",
            FrameKind::Waker => "_[w]",
            FrameKind::User | FrameKind::Pseudo => "",
        }
    }
}
