//! The BEAM (Erlang, Elixir), read with no flag asked of the node: its
//! JIT-compiled functions named from the JIT's own code map ([`codemap`]),
//! read from outside the process; their callers read in the kernel from
//! each Erlang process's own stack (`beam.bpf.h`: the return addresses
//! into the JIT's code, to the one every process starts with). OTP 23's
//! emulator, an interpreter without the JIT, is walked alike from its
//! registers and named from its loaded code ([`interp`]); earlier ones
//! are named as not read. [`walker`] is its user-space half in a
//! capture; [`process`] labels each Erlang stack with the Erlang process
//! it ran.

pub mod codemap;
pub mod interp;
pub mod process;
pub mod walker;

use std::fs::File;

use object::{Object, ObjectSymbol};

use crate::procs::elf::load_bias;

/// A BEAM found in a process: how its code is named, and its version.
#[derive(Clone, Debug)]
pub struct Node {
    pub emulator: Emulator,
    /// The OTP release ("25") and the emulator's version ("13.1.5").
    pub otp: String,
    pub erts: String,
}

/// How a node runs Erlang code.
#[derive(Clone, Debug)]
pub enum Emulator {
    /// The JIT (OTP 24 and later): its code list,
    /// `__jit_debug_descriptor`, in the process.
    Jit { descriptor: u64 },
    /// OTP 23's interpreter.
    Interp(interp::Layout),
}

/// Whether a mapped file may be the emulator: `beam.smp` and its debug,
/// valgrind and other flavours.
pub fn may_be_beam(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|f| f.starts_with("beam.") && f.ends_with("smp"))
}

/// A string of the emulator's data at virtual address `at`.
fn string_at(obj: &object::File, at: u64) -> Option<String> {
    use object::ObjectSection;
    let sec = obj.sections().find(|s| s.address() <= at && at < s.address() + s.size())?;
    let data = sec.data_range(at, (sec.address() + sec.size() - at).min(32)).ok()??;
    let end = data.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&data[..end]).into_owned())
}

/// Looks for the BEAM in a file mapped by a process at `start` (file
/// `offset`). `Ok(None)`: not the emulator; `Err`: an emulator fgbpf
/// cannot read, with why.
pub fn find(file: &File, path: &str, start: u64, offset: u64) -> Result<Option<Node>, String> {
    let Some(data) = crate::procs::elf::map(file) else {
        return Ok(None);
    };
    let Ok(obj) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let symbol = |name: &str| obj.dynamic_symbols().find(|s| s.name() == Ok(name) && s.address() != 0).map(|s| s.address());
    // etp_otp_release: what OTP's own debugger macros read.
    let Some(release) = symbol("etp_otp_release") else {
        return Ok(None);
    };
    let otp = string_at(&obj, release).unwrap_or_default();
    let erts = symbol("etp_erts_version").and_then(|a| string_at(&obj, a)).unwrap_or_default();
    let Some(bias) = load_bias(&data, start, offset) else {
        return Err(format!("{path}: its load address could not be worked out"));
    };
    let emulator = match symbol("__jit_debug_descriptor") {
        Some(descriptor) => Emulator::Jit { descriptor: descriptor + bias },
        None if otp == "23" => Emulator::Interp(interp::layout(&obj, bias).map_err(|why| format!("{path}: Erlang/OTP 23's interpreter: {why}"))?),
        None => {
            return Err(format!("{path}: Erlang/OTP {otp}'s emulator without the JIT (the interpreter): fgbpf names the functions of OTP 23's interpreter and of the JIT (OTP 24 and later)"));
        }
    };
    Ok(Some(Node { emulator, otp, erts }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn beam_binaries_are_told_by_name() {
        assert!(super::may_be_beam("/usr/lib/erlang/erts-13.1.5/bin/beam.smp"));
        assert!(super::may_be_beam("/x/beam.debug.smp"));
        assert!(!super::may_be_beam("/usr/bin/beam"));
    }
}
