//! Which Erlang process each Erlang stack ran: `beam.bpf.h` ends a stack it
//! walked with FG_BEAM_MARKER and the process's id (the internal pid term
//! in the process's first word); here those words leave the stack and
//! become its label, `erlang_process`, the pid printed as Erlang prints it
//! (`<0.N.S>`), as goroutines are labelled by their id.

use std::collections::HashMap;

use crate::profile::{Labels, RawStack};

/// FG_BEAM_MARKER of src/runtimes/beam/beam.h.
pub(crate) const MARKER: u64 = 0xffff_ffff_ffff_ff56;

/// The label a stack's Erlang process has (the BEAM folder's task-id
/// label).
pub const ERLANG_PROCESS: &str = "erlang_process";

/// Where an OTP release keeps an internal pid's number and serial in the
/// term (above its 4-bit immediate tag, 0x3): the data starts at `shift`
/// and holds `bits` bits, the number its low `number` bits, the serial
/// the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidLayout {
    pub shift: u32,
    pub bits: u32,
    pub number: u32,
}

/// The layout of an OTP release measured here (the pids of processes
/// spawned after 40,000 others, as the node printed them, beside the
/// terms read, tests/beam.rs): OTP 23 and 25 keep 28 bits of data above
/// the tag in the term's low half (its high half is the process table's
/// index), 15 of number and 13 of serial (OTP 25's 40,080th process is
/// `<0.7311.1>`); OTP 27 its number from bit 7 (`<0.40093.0>` is
/// 0x4e4e83), 28 bits wide, the serial above it (0 in every pid seen: it
/// grows only once 2^28 numbers are used). `None`: not known, and no
/// label is given rather than a wrong one.
pub fn layout(otp: &str) -> Option<PidLayout> {
    match otp {
        "23" | "25" => Some(PidLayout { shift: 4, bits: 28, number: 15 }),
        "27" => Some(PidLayout { shift: 7, bits: 57, number: 28 }),
        _ => None,
    }
}

/// An internal pid term as Erlang prints it.
pub fn pid_text(id: u64, l: PidLayout) -> Option<String> {
    if id & 0xf != 0x3 || l.bits >= 64 || l.number >= l.bits {
        return None;
    }
    let data = (id >> l.shift) & ((1 << l.bits) - 1);
    Some(format!("<0.{}.{}>", data & ((1 << l.number) - 1), data >> l.number))
}

/// The Erlang processes of one node's stacks, each label made once.
pub(crate) struct Labeller {
    layout: Option<PidLayout>,
    made: HashMap<u64, Labels>,
    /// Stacks that named their process but were not labelled: the
    /// release's pid layout is not known.
    pub unlabelled: u64,
}

impl Labeller {
    pub fn new(otp: &str) -> Self {
        Labeller { layout: layout(otp), made: HashMap::new(), unlabelled: 0 }
    }

    /// Moves `r`'s process words out of its frames, into its label.
    pub fn split(&mut self, r: &mut RawStack) {
        let Some(at) = r.user.iter().position(|&w| w == MARKER) else { return };
        let id = r.user.get(at + 1).copied();
        r.user = r.user[..at].into();
        let Some(id) = id else { return };
        let layout = self.layout;
        let labels = match self.made.get(&id) {
            Some(l) => Some(l.clone()),
            None => layout.and_then(|l| pid_text(id, l)).map(|text| {
                let l: Labels = [(ERLANG_PROCESS.to_string(), text)].into_iter().collect();
                self.made.insert(id, l.clone());
                l
            }),
        };
        match labels {
            Some(l) => r.more_mut().labels = Some(l),
            None => self.unlabelled += 1,
        }
    }
}

/// Drops the process words of a stack of a node no longer known (its
/// words are never frames).
pub(crate) fn strip(r: &mut RawStack) {
    if let Some(at) = r.user.iter().position(|&w| w == MARKER) {
        r.user = r.user[..at].into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OTP 25's term: the process table's index in the high half.
    fn term25(number: u64, serial: u64) -> u64 {
        0x439f_0000_0000_0000 | ((serial << 15 | number) << 4) | 0x3
    }

    #[test]
    fn pids_print_as_erlang_prints_them() {
        let (otp25, otp27) = (layout("25").unwrap(), layout("27").unwrap());
        assert_eq!(pid_text(term25(7311, 1), otp25).as_deref(), Some("<0.7311.1>"));
        assert_eq!(pid_text(term25(81, 0), otp25).as_deref(), Some("<0.81.0>"));
        // Read from a node that printed <0.40093.0>.
        assert_eq!(pid_text(0x4e4e83, otp27).as_deref(), Some("<0.40093.0>"));
        // Not a pid's tag: a port (0x7), or anything else.
        assert_eq!(pid_text(0x17, otp25), None);
        assert_eq!(layout("26"), None);
    }

    #[test]
    fn the_words_leave_the_stack_for_its_label() {
        let mut r = RawStack { user: vec![0x1000, 0x2000, MARKER, term25(5, 0)].into(), ..Default::default() };
        let mut l = Labeller::new("25");
        l.split(&mut r);
        assert_eq!(&r.user[..], &[0x1000, 0x2000]);
        let labels = r.more.as_ref().and_then(|m| m.labels.clone()).unwrap();
        assert_eq!(&labels[..], &[(ERLANG_PROCESS.to_string(), "<0.5.0>".to_string())]);
        let mut r = RawStack { user: vec![0x1000, MARKER, term25(5, 0)].into(), ..Default::default() };
        let mut unknown = Labeller::new("28");
        unknown.split(&mut r);
        assert_eq!((&r.user[..], unknown.unlabelled), (&[0x1000u64][..], 1));
    }
}
