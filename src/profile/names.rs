//! How frames and threads are named as text, in every output and in the
//! analysis that ranks them: untrusted names made safe, and the leading
//! pseudo-frames (`process-PID;thread-TID`, or the program's name alone,
//! under a `[cgroup PATH]` or `[container ID]` frame with `--group-by`)
//! that say where a stack ran.

use super::{Frame, Thread};

/// Which leading pseudo-frames identify where a stack ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Leading {
    /// `process-PID;thread-TID;...`
    #[default]
    ProcessAndThread,
    /// `process-PID;...`: threads of a process merged.
    Process,
    /// `process;...`: every process of one program (process name)
    /// merged, as perf's `stackcollapse-perf.pl` groups by command name:
    /// a whole host read at a glance.
    Program,
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

/// Makes a name safe to print on a terminal or in a text file: control
/// characters (an untrusted process, thread or file name may hold
/// escapes) become `?`.
pub fn printable(name: &str) -> String {
    name.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// The pseudo-frames that stand for `thread` at the root of its stacks.
///
/// A thread with a [`Thread::group`] has the group's frame first,
/// `[GROUP]` (see [`group_frame`]), with any leading frames but none.
pub fn leading_frames(thread: &Thread, leading: Leading) -> Vec<String> {
    let process = || format!("{}-{}", sanitize(&thread.process), thread.pid);
    let mut out = match (&thread.group, leading) {
        (Some(group), Leading::ProcessAndThread | Leading::Process | Leading::Program) => vec![group_frame(group)],
        _ => Vec::new(),
    };
    match leading {
        Leading::ProcessAndThread => {
            out.push(process());
            // Thread 0 of a process is none of its threads but what they
            // run: its goroutines.
            if thread.tid == 0 && thread.pid != 0 {
                out.push(sanitize(&thread.name));
            } else {
                out.push(format!("{}-{}", sanitize(&thread.name), thread.tid));
            }
        }
        Leading::Process => out.push(process()),
        Leading::Program => out.push(sanitize(&thread.process)),
        Leading::None => {}
    }
    out
}

/// A process frame (`process-PID`) as its program's frame (`process`):
/// the `-PID` its writer appended taken off. `None` when `frame` does
/// not end in one.
pub fn program_of_frame(frame: &str) -> Option<&str> {
    let (name, pid) = frame.rsplit_once('-')?;
    (!name.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(name)
}

/// What a group's frame starts with: `[cgroup PATH]`, `[container ID]`.
pub const GROUP_FRAME_STARTS: [&str; 2] = ["[cgroup ", "[container "];

/// The root frame of a group's stacks: its name bracketed, made safe.
pub fn group_frame(group: &str) -> String {
    format!("[{}]", sanitize(group))
}

/// The group named by a frame of [`group_frame`]'s form, if `frame` is one.
pub fn group_of_frame(frame: &str) -> Option<&str> {
    GROUP_FRAME_STARTS
        .iter()
        .any(|s| frame.starts_with(s))
        .then(|| frame.strip_prefix('[')?.strip_suffix(']'))
        .flatten()
}

/// A frame's text: its sanitized name and its kind's suffix.
pub fn frame_text(frame: &Frame) -> String {
    format!("{}{}", sanitize(&frame.name), frame.kind.suffix())
}
