//! The runtimes' walkers in the one BPF object as a capture switches them:
//! each runtime's read-only flag (declared in its `<name>.bpf.h`), which
//! walkers share the interpreters' place in the walk (interp.bpf.h; some
//! verifiers refuse them together, src/probe/fallback.rs), and why the
//! kernel refused those it did. The probe loads and retries with sets of
//! walkers without knowing which runtimes they are.

use std::collections::BTreeMap;

use crate::bpf::types::rodata;

/// A runtime's walker in the BPF object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BpfWalker {
    Python,
    Ruby,
    Php,
    Perl,
    /// LuaJIT's: Lua functions of interpreted and compiled code.
    LuaJit,
    /// Go's: the goroutine a thread runs and its pprof labels.
    Go,
    Java,
    /// Node.js's: JavaScript frames named by their function.
    V8,
    /// The BEAM's: an Erlang process's stack read for its functions'
    /// return addresses.
    Beam,
}

impl BpfWalker {
    pub const ALL: [BpfWalker; 9] = [
        BpfWalker::Python,
        BpfWalker::Ruby,
        BpfWalker::Php,
        BpfWalker::Perl,
        BpfWalker::LuaJit,
        BpfWalker::Go,
        BpfWalker::Java,
        BpfWalker::V8,
        BpfWalker::Beam,
    ];

    /// On the interpreters' contract (interp.bpf.h): one place in the walk,
    /// refused together by some verifiers.
    pub fn interpreter(self) -> bool {
        !matches!(self, BpfWalker::Java | BpfWalker::V8 | BpfWalker::Beam)
    }

    /// What the walker reads, as the summary names it.
    pub fn what(self) -> &'static str {
        match self {
            BpfWalker::Python => "Python",
            BpfWalker::Ruby => "Ruby",
            BpfWalker::Php => "PHP",
            BpfWalker::Perl => "Perl",
            BpfWalker::LuaJit => "LuaJIT",
            BpfWalker::Go => "Go labels",
            BpfWalker::Java => "Java",
            BpfWalker::V8 => "JavaScript",
            BpfWalker::Beam => "Erlang",
        }
    }

    fn bit(self) -> u16 {
        1 << self as u8
    }

    /// Turns the walker on or off in a load's read-only configuration.
    fn switch(self, ro: &mut rodata, on: bool) {
        match self {
            BpfWalker::Python => ro.python_frames = on,
            BpfWalker::Ruby => ro.ruby_frames = on,
            BpfWalker::Php => ro.php_frames = on,
            BpfWalker::Perl => ro.perl_frames = on,
            BpfWalker::LuaJit => ro.luajit_frames = on,
            BpfWalker::Go => ro.go_labels = on,
            BpfWalker::Java => ro.java_frames = on,
            BpfWalker::V8 => ro.v8_frames = on,
            BpfWalker::Beam => ro.beam_frames_on = on,
        }
    }
}

/// A set of walkers: those a capture asks for, or a load holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Walkers(u16);

impl Walkers {
    pub const NONE: Walkers = Walkers(0);

    pub fn all() -> Walkers {
        BpfWalker::ALL.into_iter().collect()
    }

    pub fn has(self, w: BpfWalker) -> bool {
        self.0 & w.bit() != 0
    }

    pub fn any(self) -> bool {
        self.0 != 0
    }

    /// Those on the interpreters' contract.
    pub fn interpreters(self) -> Walkers {
        self.iter().filter(|w| w.interpreter()).collect()
    }

    pub fn without(self, other: Walkers) -> Walkers {
        Walkers(self.0 & !other.0)
    }

    /// What the walkers read, as a list: `Python, Ruby, PHP`.
    pub fn what(self) -> String {
        self.iter().map(BpfWalker::what).collect::<Vec<_>>().join(", ")
    }

    pub fn iter(self) -> impl Iterator<Item = BpfWalker> {
        BpfWalker::ALL.into_iter().filter(move |w| self.has(*w))
    }

    /// Turns each walker of the object on or off as this set says.
    pub fn set(self, ro: &mut rodata) {
        for w in BpfWalker::ALL {
            w.switch(ro, self.has(w));
        }
    }
}

impl FromIterator<BpfWalker> for Walkers {
    fn from_iter<I: IntoIterator<Item = BpfWalker>>(iter: I) -> Self {
        Walkers(iter.into_iter().fold(0, |b, w| b | w.bit()))
    }
}

/// Why the kernel refused the walkers a capture asked for, by walker: the
/// first reason each met.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refused(BTreeMap<BpfWalker, String>);

impl Refused {
    /// Each of `walkers` not refused yet was refused for `why`.
    pub fn refuse(&mut self, walkers: Walkers, why: &str) {
        for w in walkers.iter() {
            self.0.entry(w).or_insert_with(|| why.to_string());
        }
    }

    pub fn why(&self, w: BpfWalker) -> Option<&str> {
        self.0.get(&w).map(String::as_str)
    }

    /// Why the interpreters' walkers were refused (together, so one
    /// reason).
    pub fn interpreters(&self) -> Option<&str> {
        self.0.iter().find(|(w, _)| w.interpreter()).map(|(_, why)| why.as_str())
    }

    /// The summary's sentence on the interpreters' walkers, when the
    /// kernel refused them.
    pub fn interpreters_line(&self) -> Option<String> {
        self.interpreters().map(|why| {
            format!(
                "the Python, Ruby, PHP, Perl and LuaJIT frame walkers did not load ({why}): their threads show the interpreter's C frames, not Python functions, Ruby methods, PHP functions, Perl subs or Lua functions"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreters_walkers_are_the_ones_refused_together() {
        let w: Walkers = [BpfWalker::Ruby, BpfWalker::V8].into_iter().collect();
        assert!(w.any() && w.interpreters() == [BpfWalker::Ruby].into_iter().collect());
        let jvm: Walkers = [BpfWalker::Java].into_iter().collect();
        assert!(jvm.any() && !jvm.interpreters().any());
        assert!(!Walkers::NONE.any() && Walkers::all().iter().count() == 9);
        assert_eq!(
            Walkers::all().without(Walkers::all().interpreters()).iter().collect::<Vec<_>>(),
            [BpfWalker::Java, BpfWalker::V8, BpfWalker::Beam]
        );
    }

    #[test]
    fn a_walker_keeps_the_first_reason_it_was_refused_for() {
        let mut r = Refused::default();
        r.refuse([BpfWalker::Python, BpfWalker::Java].into_iter().collect(), "first");
        r.refuse(Walkers::all(), "second");
        assert_eq!((r.why(BpfWalker::Python), r.why(BpfWalker::Java), r.why(BpfWalker::V8)), (Some("first"), Some("first"), Some("second")));
        assert_eq!(r.interpreters(), Some("first"));
        assert_eq!(Refused::default().interpreters(), None);
    }
}
