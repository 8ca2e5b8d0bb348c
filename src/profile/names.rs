//! How frames and threads are named as text, in every output and in the
//! analysis that ranks them: untrusted names made safe, and the leading
//! pseudo-frames (`process-PID;thread-TID`) that say where a stack ran.

use super::{Frame, Thread};

/// Which leading pseudo-frames identify where a stack ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Leading {
    /// `process-PID;thread-TID;...`
    #[default]
    ProcessAndThread,
    /// `process-PID;...`: threads of a process merged.
    Process,
    /// Stacks only.
    None,
}

/// Makes a name safe inside a folded line: `;` separates frames and a line
/// break ends the stack, so neither may survive from untrusted names.
pub fn sanitize(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => '?',
            c => c,
        })
        .collect();
    if clean.trim().is_empty() {
        "[unnamed]".to_string()
    } else {
        clean
    }
}

/// The pseudo-frames that stand for `thread` at the root of its stacks.
pub fn leading_frames(thread: &Thread, leading: Leading) -> Vec<String> {
    let process = || format!("{}-{}", sanitize(&thread.process), thread.pid);
    match leading {
        Leading::ProcessAndThread => vec![
            process(),
            format!("{}-{}", sanitize(&thread.name), thread.tid),
        ],
        Leading::Process => vec![process()],
        Leading::None => vec![],
    }
}

/// A frame's text: its sanitized name and its kind's suffix.
pub fn frame_text(frame: &Frame) -> String {
    format!("{}{}", sanitize(&frame.name), frame.kind.suffix())
}
