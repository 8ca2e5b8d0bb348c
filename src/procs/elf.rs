//! What fgbpf needs to know of an ELF file besides its symbols (which
//! blazesym reads): where its segments load, to turn file offsets into the
//! addresses symbols use; its build ID and `.gnu_debuglink`, to find and
//! check a separate debug file; whether it carries symbols or DWARF; and
//! where its functions start (from `.eh_frame_hdr`, which stripped binaries
//! keep). Parsed with `object` (both endiannesses, 32 and 64 bits) and
//! `gimli`; the debuglink CRC with `crc32fast`.

use std::fs::File;
use std::os::unix::fs::FileExt;

use object::{Object, ObjectSection, ObjectSegment};

/// A GNU build ID as it is written in paths, URLs and interchange
/// formats: lower-case hex, two digits a byte.
pub fn build_id_hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

pub struct ElfInfo {
    /// Loadable segments: (file offset, file size, virtual address).
    loads: Vec<(u64, u64, u64)>,
    /// The executable ones.
    pub code: Vec<ExecSegment>,
    pub build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: the debug file's name and CRC32.
    pub debuglink: Option<(String, u32)>,
    pub has_symtab: bool,
    pub has_dwarf: bool,
    /// `.gnu_debugdata` (MiniDebugInfo): an xz-compressed ELF holding the
    /// function symbols a stripped binary kept, as Fedora's and some
    /// vendors' builds carry; blazesym reads it when `.symtab` is absent.
    pub has_debugdata: bool,
}

/// Maps a file for reading. The map is private and read-only; a binary
/// rewritten while it is read (not in place, as package managers replace
/// files) cannot change under it.
pub(crate) fn map(file: &File) -> Option<memmap2::Mmap> {
    // SAFETY: see above.
    unsafe { memmap2::Mmap::map(file) }.ok()
}

impl ElfInfo {
    pub fn read(file: &File) -> Option<ElfInfo> {
        let data = map(file)?;
        let obj = object::File::parse(&*data).ok()?;
        if obj.format() != object::BinaryFormat::Elf {
            return None;
        }
        let stored = |name: &str| {
            obj.section_by_name(name)
                .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
        };
        let debuglink = obj.gnu_debuglink().ok().flatten().and_then(|(name, crc)| {
            let name = std::str::from_utf8(name).ok()?;
            (!name.is_empty() && !name.contains('/')).then(|| (name.to_string(), crc))
        });
        Some(ElfInfo {
            loads: obj
                .segments()
                .map(|s| {
                    let (off, size) = s.file_range();
                    (off, size, s.address())
                })
                .collect(),
            code: exec_segments(&data),
            build_id: obj.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink,
            has_symtab: stored(".symtab"),
            has_dwarf: stored(".debug_info") || stored(".zdebug_info"),
            has_debugdata: stored(".gnu_debugdata"),
        })
    }

    /// The virtual address the byte at `offset` of the file is loaded at,
    /// as symbol tables and DWARF give addresses.
    pub fn virt(&self, offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|&&(off, size, _)| offset >= off && offset - off < size)
            .map(|&(off, _, vaddr)| offset - off + vaddr)
    }

    /// The file offset of the byte loaded at virtual address `virt`.
    pub fn file_offset(&self, virt: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|&&(_, size, vaddr)| virt >= vaddr && virt - vaddr < size)
            .map(|&(off, _, vaddr)| virt - vaddr + off)
    }

    /// Start addresses of the functions the unwind tables describe,
    /// sorted: stripped binaries keep them, which tells where the function
    /// holding an address begins.
    pub fn function_starts(&self, file: &File) -> Vec<u64> {
        let mut starts = map(file)
            .and_then(|data| eh_frame_hdr_starts(&data))
            .unwrap_or_default();
        starts.sort_unstable();
        starts
    }
}

/// The binary search table of `.eh_frame_hdr`: one initial location per
/// FDE.
fn eh_frame_hdr_starts(data: &[u8]) -> Option<Vec<u64>> {
    use gimli::{BaseAddresses, EhFrameHdr, Pointer, RunTimeEndian};
    let obj = object::File::parse(data).ok()?;
    let section = obj.section_by_name(".eh_frame_hdr")?;
    let endian = if obj.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let bases = BaseAddresses::default().set_eh_frame_hdr(section.address());
    let bytes = section.data().ok()?;
    let hdr = EhFrameHdr::new(bytes, endian)
        .parse(&bases, if obj.is_64() { 8 } else { 4 })
        .ok()?;
    let table = hdr.table()?;
    let mut iter = table.iter(&bases);
    let mut out = Vec::new();
    while let Ok(Some((start, _))) = iter.next() {
        if let Pointer::Direct(addr) = start {
            out.push(addr);
        }
    }
    Some(out)
}

/// The CRC32 a debuglink records: of the whole debug file.
pub fn crc32(file: &File) -> Option<u32> {
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    // Positional reads: the descriptor's offset is shared.
    let mut pos = 0u64;
    loop {
        let n = file.read_at(&mut buf, pos).ok()?;
        if n == 0 {
            break;
        }
        pos += n as u64;
        hasher.update(&buf[..n]);
    }
    Some(hasher.finalize())
}

/// An executable loadable segment of an ELF file: where it lies in the
/// file, and its virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExecSegment {
    pub offset: u64,
    pub size: u64,
    pub vaddr: u64,
}

/// The virtual address the byte at file offset `offset` is loaded at, by
/// the segment of `segments` holding it.
pub fn virt_in(segments: &[ExecSegment], offset: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| offset >= s.offset && offset - s.offset < s.size)
        .map(|s| offset - s.offset + s.vaddr)
}

/// The executable loadable segments of an ELF file (none when it is not
/// one).
pub fn exec_segments(data: &[u8]) -> Vec<ExecSegment> {
    use object::{Object, ObjectSegment, SegmentFlags};
    const PF_X: u32 = 1;
    let Ok(file) = object::File::parse(data) else {
        return Vec::new();
    };
    file.segments()
        .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & PF_X != 0))
        .map(|s| {
            let (offset, size) = s.file_range();
            ExecSegment {
                offset,
                size,
                vaddr: s.address(),
            }
        })
        .collect()
}

/// runtime address - ELF virtual address for code mapped from file offset
/// `offset` at `start`: from the executable loadable segment holding that
/// offset. A segment need not start on a page: the mapping then starts at
/// the page below it (ld.bfd lays out debug builds so), and the mapping's
/// offset lies below the segment's.
pub fn bias_in(segments: &[ExecSegment], start: u64, offset: u64) -> Option<u64> {
    const PAGE: u64 = 4096;
    let seg = segments
        .iter()
        .find(|s| s.offset & !(PAGE - 1) <= offset && offset < s.offset.saturating_add(s.size.max(1)))?;
    // vaddr = runtime - start + offset - seg_off + seg_vaddr
    Some(start.wrapping_sub(offset).wrapping_add(seg.offset).wrapping_sub(seg.vaddr))
}

/// [`bias_in`] the segments of the ELF file `data`.
pub fn load_bias(data: &[u8], start: u64, offset: u64) -> Option<u64> {
    bias_in(&exec_segments(data), start, offset)
}

/// A section's bytes, inflated when the linker compressed it (zlib:
/// `SHF_COMPRESSED`, or the `.zdebug_*` sections Go wrote before 1.21);
/// `None` for a section that cannot be read or inflated (larger than 1
/// GB, or another compression).
pub fn section_bytes<'a>(section: &impl object::ObjectSection<'a>) -> Option<std::borrow::Cow<'a, [u8]>> {
    use std::io::Read;
    const MAX: u64 = 1 << 30;
    let c = section.compressed_data().ok()?;
    match c.format {
        object::CompressionFormat::None => Some(std::borrow::Cow::Borrowed(c.data)),
        object::CompressionFormat::Zlib if c.uncompressed_size <= MAX => {
            let mut out = Vec::with_capacity(c.uncompressed_size as usize);
            let mut z = flate2::read::ZlibDecoder::new(c.data).take(c.uncompressed_size);
            z.read_to_end(&mut out).ok()?;
            (out.len() as u64 == c.uncompressed_size).then_some(std::borrow::Cow::Owned(out))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procs::maps;

    #[test]
    fn own_binary_reads_as_elf_with_build_id_and_symbols() {
        let exe = File::open("/proc/self/exe").unwrap();
        let info = ElfInfo::read(&exe).unwrap();
        assert!(info.has_symtab);
        assert!(info.build_id.as_ref().is_some_and(|b| b.len() >= 8));
        let addr = own_function_marker as *const () as usize as u64;
        // The file offset of a function maps back to its link-time address.
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let m = text
            .lines()
            .filter_map(maps::parse_line)
            .find(|m| m.start <= addr && addr < m.end)
            .unwrap();
        let off = addr - m.start + m.offset;
        let virt = info.virt(off).unwrap();
        assert_eq!(virt & 0xfff, addr & 0xfff);
        assert_eq!(info.file_offset(virt), Some(off));
        // The function is one of those .eh_frame_hdr lists, or lies past one.
        let starts = info.function_starts(&exe);
        assert!(starts.len() > 100, "{} function starts", starts.len());
        assert!(starts.iter().any(|&s| s <= virt));
    }

    #[inline(never)]
    fn own_function_marker() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn crc32_matches_the_reference_value() {
        let path = std::env::temp_dir().join(format!("fgbpf-crc-{}", std::process::id()));
        std::fs::write(&path, b"123456789").unwrap();
        let crc = crc32(&File::open(&path).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert_eq!(crc, Some(0xCBF4_3926));
    }
}
