//! Brendan Gregg's folded format: `process-PID;thread-TID;root;...;leaf N`,
//! one line per stack (files always keep these; pictures may draw other
//! roots, [`Leading`]). Kernel frames end in `_[k]`, inlined ones in `_[i]`,
//! JIT ones in `_[j]`.

pub mod read;

use std::io::{self, Write};

use crate::profile::{Profile, Stack};

pub use crate::profile::names::{frame_text, leading_frames, sanitize, Leading};

#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub leading: Leading,
}

/// Writes stacks of one profile as folded lines. Frames and threads recur
/// across many stacks, so each one's folded name is made once.
pub struct Folder<'p> {
    profile: &'p Profile,
    frames: Vec<String>,
    threads: Vec<String>,
}

impl<'p> Folder<'p> {
    pub fn new(profile: &'p Profile, opts: &Options) -> Self {
        let frames = profile
            .frames()
            .iter()
            .map(frame_text)
            .collect();
        let threads = profile
            .threads()
            .iter()
            .map(|t| leading_frames(t, opts.leading).join(";"))
            .collect();
        Folder {
            profile,
            frames,
            threads,
        }
    }

    /// The folded frames that stand for `stack`'s thread, joined by `;`;
    /// `None` when there are none.
    pub fn lead(&self, stack: &Stack) -> Option<&str> {
        stack
            .thread
            .map(|t| self.threads[t as usize].as_str())
            .filter(|l| !l.is_empty())
    }

    /// A frame's folded text.
    pub fn frame(&self, id: crate::profile::FrameId) -> &str {
        &self.frames[id as usize]
    }

    /// The folded frames of one stack, root first, without its weight.
    pub fn stack(&self, stack: &Stack) -> String {
        let lead = self.lead(stack);
        let len = lead.map_or(0, |l| l.len() + 1)
            + stack
                .frames
                .iter()
                .map(|&f| self.frames[f as usize].len() + 1)
                .sum::<usize>();
        let mut line = String::with_capacity(len);
        for part in lead.into_iter().chain(
            stack
                .frames
                .iter()
                .map(|&f| self.frames[f as usize].as_str()),
        ) {
            if !line.is_empty() {
                line.push(';');
            }
            line.push_str(part);
        }
        line
    }

    /// Every line of the profile, heaviest first as stored, each made as
    /// it is read.
    pub fn each_line(&self) -> impl Iterator<Item = String> + '_ {
        self.profile
            .stacks()
            .iter()
            .filter(|s| has_line(s))
            .map(|s| format!("{} {}", self.stack(s), s.weight))
    }
}

/// Whether a stack has a folded line: one with neither a thread nor
/// frames has nothing to write.
pub fn has_line(stack: &Stack) -> bool {
    !stack.frames.is_empty() || stack.thread.is_some()
}

/// Every line of the profile, heaviest first as stored.
pub fn lines(profile: &Profile, opts: &Options) -> Vec<String> {
    Folder::new(profile, opts).each_line().collect()
}

/// Writes every line, one at a time: a large profile's lines are never
/// all held at once.
pub fn write(profile: &Profile, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    for line in Folder::new(profile, opts).each_line() {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, FrameKind, Thread, Unit};

    fn sample_profile() -> Profile {
        let mut p = Profile::new(Unit::Samples);
        let t = p.intern_thread(Thread {
            start: 0,
            group: None,
            pid: 10,
            tid: 11,
            process: "srv".into(),
            name: "wo;rk\ner".into(),
        });
        let main = p.intern_frame(Frame::new("main", FrameKind::User));
        let inl = p.intern_frame(Frame::new("helper", FrameKind::Inlined));
        let k = p.intern_frame(Frame::new("do_syscall_64", FrameKind::Kernel));
        p.push(Stack {
            thread: Some(t),
            frames: vec![main, inl, k].into(),
            weight: 7,
            ..Default::default()
        });
        p.push(Stack {
            thread: Some(t),
            frames: vec![main].into(),
            weight: 3,
            ..Default::default()
        });
        p.coalesce();
        p
    }

    #[test]
    fn folds_with_suffixes_and_sanitized_names() {
        let p = sample_profile();
        let l = lines(&p, &Options::default());
        assert_eq!(
            l,
            vec![
                "srv-10;wo:rk?er-11;main;helper_[i];do_syscall_64_[k] 7",
                "srv-10;wo:rk?er-11;main 3"
            ]
        );
        let l = lines(
            &p,
            &Options {
                leading: Leading::Process,
            },
        );
        assert_eq!(l[1], "srv-10;main 3");
        let l = lines(
            &p,
            &Options {
                leading: Leading::Program,
            },
        );
        assert_eq!(l[1], "srv;main 3");
        let l = lines(
            &p,
            &Options {
                leading: Leading::None,
            },
        );
        assert_eq!(l[1], "main 3");
    }

    #[test]
    fn sanitize_never_returns_empty() {
        assert_eq!(sanitize(""), "[unnamed]");
        assert_eq!(sanitize(" "), "[unnamed]");
        assert_eq!(sanitize("a b"), "a b");
    }
}
