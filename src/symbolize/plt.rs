//! Names of procedure linkage table stubs, as perf gives them: the stub a
//! call to another object's function goes through (`__tunable_get_val@plt`).
//! No symbol covers them; the function is the dynamic symbol of the
//! relocation that fills the GOT slot the stub jumps through. A stub is
//! read from the file: its `jmp *SLOT(%rip)` (`.plt`, `.plt.sec`,
//! `.plt.got`), or, in a lazy `.plt` beside a `.plt.sec`, its `push INDEX`
//! into `.rela.plt`. A stub of the file's own function chosen at load time
//! (an IRELATIVE relocation, which objdump and perf show as
//! `*ABS*+0x9f550@plt`) is named after the dynamic symbol at its resolver.
//! The table's first entry, which enters the dynamic linker's binder on a
//! function's first call, is `_dl_runtime_resolve@plt`.

use std::fs::File;

use crate::procs::elf::{self, ElfInfo};
use crate::procs::frame_kind::FrameKind;

use object::elf::{R_X86_64_GLOB_DAT, R_X86_64_IRELATIVE, R_X86_64_JUMP_SLOT};
use object::read::elf::{ElfFile64, SectionHeader};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget};

/// The name of the lazy table's first entry: the stub that leads to the
/// dynamic linker's binder (glibc's `_dl_runtime_resolve_*`, through the
/// GOT's third slot).
pub const LAZY_BINDING: &str = "_dl_runtime_resolve@plt";

/// Bytes read of a stub: the longest x86-64 one is 16.
const STUB: usize = 16;

/// Names the entries of `out` still unnamed whose file offsets (of
/// `offsets`, in `file`, laid out as `elf` says) lie in a stub.
pub(super) fn fill_stubs(elf: &ElfInfo, file: &File, offsets: &[u64], out: &mut [Option<Vec<(String, FrameKind)>>]) {
    if out.iter().all(Option::is_some) {
        return;
    }
    let virt: Vec<Option<u64>> = offsets
        .iter()
        .zip(out.iter())
        .map(|(&o, named)| if named.is_none() { elf.virt(o) } else { None })
        .collect();
    for (slot, name) in out.iter_mut().zip(plt_names(file, &virt)) {
        if let Some(name) = name {
            *slot = Some(vec![(name, FrameKind::User)]);
        }
    }
}

/// `name@plt` for each of `virts` (virtual addresses in the file) that lies
/// in a stub whose function is known; None for the others.
fn plt_names(file: &File, virts: &[Option<u64>]) -> Vec<Option<String>> {
    let mut out = vec![None; virts.len()];
    let Some(data) = elf::map(file) else {
        return out;
    };
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(&*data) else {
        return out;
    };
    if elf.architecture() != object::Architecture::X86_64 {
        return out;
    }
    let sections: Vec<_> = elf
        .sections()
        .filter(|s| matches!(s.name(), Ok(".plt" | ".plt.sec" | ".plt.got")))
        .collect();
    if sections.is_empty() || !virts.iter().flatten().any(|&v| sections.iter().any(|s| in_section(s, v))) {
        return out;
    }
    let lazy_beside_sec = sections.iter().any(|s| s.name() == Ok(".plt.sec"));
    let slots = slot_symbols(&elf);
    let jump_slots = jump_slot_order(&elf);
    for (slot, virt) in out.iter_mut().zip(virts) {
        let Some(v) = *virt else { continue };
        let Some(s) = sections.iter().find(|s| in_section(*s, v)) else {
            continue;
        };
        let name = s.name().unwrap_or("");
        let entsize = match s.elf_section_header().sh_entsize(elf.endian()) {
            8 if name == ".plt.got" => 8,
            _ => 16,
        };
        let entry = s.address() + (v - s.address()) / entsize * entsize;
        // The lazy table's first entry enters the dynamic linker's binder
        // (a function's first call, without BIND_NOW).
        if name == ".plt" && entry == s.address() {
            *slot = Some(LAZY_BINDING.to_string());
            continue;
        }
        let Some(bytes) = s.data_range(entry, entsize.min(STUB as u64)).ok().flatten() else {
            continue;
        };
        let target = if name == ".plt" && lazy_beside_sec {
            push_index(bytes).and_then(|i| jump_slots.get(i as usize).copied())
        } else {
            jump_target(entry, bytes)
        };
        *slot = target
            .and_then(|t| slots.iter().find(|(at, _)| *at == t))
            .map(|(_, sym)| format!("{sym}@plt"));
    }
    out
}

fn in_section<'a>(s: &impl ObjectSection<'a>, v: u64) -> bool {
    v >= s.address() && v - s.address() < s.size()
}

/// The GOT slot of a stub's `jmp *disp32(%rip)` (`ff 25`, after an
/// `endbr64` or a `bnd` prefix when there is one).
fn jump_target(entry: u64, bytes: &[u8]) -> Option<u64> {
    let p = bytes.windows(2).position(|w| w == [0xff, 0x25])?;
    let disp = i32::from_le_bytes(bytes.get(p + 2..p + 6)?.try_into().ok()?);
    Some((entry + p as u64 + 6).wrapping_add_signed(disp as i64))
}

/// A lazy stub's `push imm32`: its index in `.rela.plt`.
fn push_index(bytes: &[u8]) -> Option<u32> {
    let p = bytes.iter().position(|&b| b == 0x68)?;
    Some(u32::from_le_bytes(bytes.get(p + 1..p + 5)?.try_into().ok()?))
}

/// Each GOT slot a JUMP_SLOT or GLOB_DAT relocation fills, with its
/// symbol's name; an IRELATIVE one's (the file's own function chosen at
/// load time, `memcpy` in the C library) with the name of the dynamic
/// symbol at its resolver, the relocation's addend.
fn slot_symbols(elf: &ElfFile64<object::Endianness>) -> Vec<(u64, String)> {
    let Some(dynsym) = elf.dynamic_symbol_table() else {
        return Vec::new();
    };
    let Some(relocs) = elf.dynamic_relocations() else {
        return Vec::new();
    };
    let name_of = |sym: object::read::elf::ElfSymbol64<'_, '_, object::Endianness>| {
        let name = sym.name_bytes().ok()?;
        (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
    };
    let at_resolver = |addend: i64| {
        dynsym
            .symbols()
            .filter(|s| s.address() == addend as u64 && s.is_global())
            .find_map(name_of)
    };
    relocs
        .filter_map(|(at, r)| {
            let RelocationFlags::Elf { r_type } = r.flags() else { return None };
            let name = match (r_type, r.target()) {
                (R_X86_64_JUMP_SLOT | R_X86_64_GLOB_DAT, RelocationTarget::Symbol(i)) => name_of(dynsym.symbol_by_index(i).ok()?)?,
                (R_X86_64_IRELATIVE, _) => at_resolver(r.addend())?,
                _ => return None,
            };
            Some((at, name))
        })
        .collect()
}

/// The GOT slots of the JUMP_SLOT relocations in their order in
/// `.rela.plt`, which a lazy stub's push indexes (x86-64: little-endian
/// Elf64_Rela entries of 24 bytes, r_offset first).
fn jump_slot_order(elf: &ElfFile64<object::Endianness>) -> Vec<u64> {
    let Some(bytes) = elf.section_by_name(".rela.plt").and_then(|s| s.data().ok()) else {
        return Vec::new();
    };
    bytes
        .chunks_exact(24)
        .filter_map(|r| Some(u64::from_le_bytes(r[..8].try_into().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// objdump names the stubs too (`<name@plt>` labels): every stub of
    /// Debian's libc and of a distribution program that objdump gives a
    /// symbol's name is named the same, at its first byte and inside it;
    /// its `*ABS*+0xADDR@plt` stubs after the dynamic symbol at ADDR; the
    /// binder's entry (`<first@plt-0x10>`) is `_dl_runtime_resolve@plt`.
    #[test]
    fn stubs_are_named_as_objdump_names_them() {
        for path in ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/gzip"] {
            let out = Command::new("objdump").args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", path]).output();
            let text = String::from_utf8_lossy(&out.expect("objdump (binutils)").stdout).into_owned();
            // "0000000000026010 <__tunable_get_val@plt>:"
            let mut labels: Vec<(u64, String)> = text
                .lines()
                .filter_map(|l| {
                    let (addr, rest) = l.split_once(" <")?;
                    let name = rest.strip_suffix(">:")?;
                    Some((u64::from_str_radix(addr.trim(), 16).ok()?, name.to_string()))
                })
                .collect();
            labels.sort();
            assert!(labels.iter().filter(|(_, n)| n.ends_with("@plt") && !n.starts_with('*')).count() >= 5, "{path}: {labels:?}");
            let file = File::open(path).unwrap();
            let mut checked = 0;
            for (addr, name) in &labels {
                let got = plt_names(&file, &[Some(*addr), Some(addr + 7)]);
                assert_eq!(got[0], got[1], "{path} at {addr:#x}: one name for the whole stub");
                if let Some(resolver) = name.strip_prefix("*ABS*+0x").and_then(|n| n.strip_suffix("@plt")) {
                    // Named by the dynamic symbol at its resolver.
                    let resolver = u64::from_str_radix(resolver, 16).unwrap();
                    let n = got[0].as_deref().unwrap_or_else(|| panic!("{path} at {addr:#x}: {name} unnamed"));
                    let sym = n.strip_suffix("@plt").unwrap();
                    assert!(dynsym_at(path, sym, resolver), "{path} at {addr:#x}: {n} for {name}");
                } else {
                    let want = if name.ends_with("@plt-0x10") { LAZY_BINDING.to_string() } else { name.clone() };
                    assert_eq!(got[0], Some(want), "{path} at {addr:#x}");
                }
                checked += 1;
            }
            assert!(checked > 0);
        }
    }

    /// Whether readelf lists `sym` in the dynamic symbols at `addr`.
    fn dynsym_at(path: &str, sym: &str, addr: u64) -> bool {
        let out = Command::new("readelf").args(["-W", "--dyn-syms", path]).output().expect("readelf");
        String::from_utf8_lossy(&out.stdout).lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 8 && u64::from_str_radix(f[1], 16).ok() == Some(addr) && f[7].split('@').next() == Some(sym)
        })
    }
}
