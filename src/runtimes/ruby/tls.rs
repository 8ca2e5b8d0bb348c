//! Where a libruby that no longer exports `ruby_current_ec` (3.3 on)
//! keeps it: the variable is local to the library, reached through a
//! general-dynamic TLS pair in its GOT (a DTPMOD64 slot ld.so fills with
//! the module id, and the variable's offset in the module's block beside
//! it, written by the linker). Which of the library's pairs is
//! `ruby_current_ec` is read from the code of an exported function that
//! reads it and nothing else first: `rb_thread_current`, which is
//! `GET_EC()->thread_ptr->self`. Its code must be exactly the TLS call,
//! the load of the variable, then a load at the layout's
//! `ec->thread_ptr`; anything else and the VM is said not read, with why.

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Object, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget};

use super::{read_at, R_X86_64_DTPMOD64};

/// R_X86_64_DTPOFF64.
const R_X86_64_DTPOFF64: u32 = 17;
/// Bytes of rb_thread_current looked through.
const CODE: usize = 64;

/// (the DTPMOD64 slot's address, `ruby_current_ec`'s offset in the
/// module's TLS block), as link-time addresses; or why not.
pub(super) fn current_ec(obj: &object::File<'_>, data: &[u8], thread_ptr: u16) -> Result<(u64, u64), String> {
    let table = obj.dynamic_symbol_table().ok_or("no dynamic symbols")?;
    let f = table
        .symbols()
        .find(|s| s.name() == Ok("rb_thread_current") && s.address() != 0)
        .ok_or("neither ruby_current_ec nor rb_thread_current in its dynamic symbols")?;
    let code = read_at(obj, data, f.address(), CODE).ok_or("rb_thread_current's code could not be read")?;
    let (slot, after) = gd_slot(code, f.address()).ok_or("rb_thread_current does not read a TLS variable as expected")?;
    // mov (%rax),%rax: the variable; mov disp8(%rax),%rax: its thread_ptr.
    let rest = &code[after..];
    if rest.len() < 7 || rest[..3] != [0x48, 0x8b, 0x00] || rest[3..6] != [0x48, 0x8b, 0x40] || u16::from(rest[6]) != thread_ptr {
        return Err(format!("rb_thread_current does not read ec->thread_ptr at {thread_ptr} after its TLS call"));
    }
    let mut modid = false;
    let mut off_sym = None;
    for (at, r) in obj.dynamic_relocations().into_iter().flatten() {
        let RelocationFlags::Elf { r_type } = r.flags() else { continue };
        if at == slot && r_type == R_X86_64_DTPMOD64 {
            modid = true;
        }
        if at == slot + 8 && r_type == R_X86_64_DTPOFF64 {
            let value = match r.target() {
                RelocationTarget::Symbol(i) => table.symbol_by_index(i).map(|s| s.address()).unwrap_or(u64::MAX),
                _ => 0,
            };
            off_sym = Some(value.wrapping_add(r.addend() as u64));
        }
    }
    if !modid {
        return Err(format!("rb_thread_current's TLS slot {slot:#x} has no module id relocation"));
    }
    // A variable local to the library: the linker wrote its offset.
    let off = match off_sym {
        Some(v) => v,
        None => {
            let b = read_at(obj, data, slot + 8, 8).filter(|b| b.len() == 8).ok_or("the TLS offset could not be read")?;
            u64::from_le_bytes(b.try_into().expect("8 bytes"))
        }
    };
    let tls = tls_size(data).ok_or("no TLS segment")?;
    if off.checked_add(8).is_none_or(|end| end > tls) {
        return Err(format!("ruby_current_ec's TLS offset {off:#x} is outside the {tls}-byte TLS block"));
    }
    Ok((slot, off))
}

/// The GOT slot of a general-dynamic TLS call in `code` (at `addr`):
/// `data16 lea disp(%rip),%rdi; data16 data16 rex.W call
/// __tls_get_addr`, and the offset in `code` just past the call.
fn gd_slot(code: &[u8], addr: u64) -> Option<(u64, usize)> {
    const LEA: [u8; 4] = [0x66, 0x48, 0x8d, 0x3d];
    const CALL: [u8; 4] = [0x66, 0x66, 0x48, 0xe8];
    let at = code.windows(4).position(|w| w == LEA)?;
    // Only the function's entry may come first (endbr64, a stack adjustment).
    if at > 12 {
        return None;
    }
    let disp = i32::from_le_bytes(code.get(at + 4..at + 8)?.try_into().ok()?);
    if code.get(at + 8..at + 12)? != CALL {
        return None;
    }
    let next = addr + at as u64 + 8;
    Some((next.wrapping_add(disp as i64 as u64), at + 16))
}

/// The size of the library's TLS block (PT_TLS's memsz).
fn tls_size(data: &[u8]) -> Option<u64> {
    let elf = ElfFile64::<object::Endianness>::parse(data).ok()?;
    let e = elf.endian();
    elf.elf_header()
        .program_headers(e, data)
        .ok()?
        .iter()
        .find(|p| p.p_type(e) == object::elf::PT_TLS)
        .map(|p| p.p_memsz(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian 13's libruby-3.3.so.3.3.8: rb_thread_current at 0x235ab0.
    #[test]
    fn the_slot_of_rb_thread_currents_tls_call() {
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x08, 0x66, 0x48, 0x8d, 0x3d, 0x10, 0x50, 0x22, 0x00, 0x66, 0x66, 0x48,
            0xe8, 0x38, 0x9c, 0xe0, 0xff, 0x48, 0x8b, 0x00, 0x48, 0x8b, 0x40, 0x30,
        ];
        assert_eq!(gd_slot(&code, 0x235ab0), Some((0x45aad0, 24)));
        assert_eq!(gd_slot(&code[8..], 0x235ab8), Some((0x45aad0, 16)));
        assert_eq!(gd_slot(&code[..18], 0x235ab0), None, "cut in the call");
    }
}
