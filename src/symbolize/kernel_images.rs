//! Which kernel image a kernel address lies in, for its frame's mapping
//! (OTLP, pprof): the kernel's own text, `[kernel.kallsyms]` as perf names
//! it, with the build ID of /sys/kernel/notes; or a loaded module,
//! `[NAME]` (/proc/modules), with the build ID of its
//! /sys/module/NAME/notes. An address in neither (a BPF program, a
//! trampoline) gets none. The text's bounds: `_text` from the head of
//! /proc/kallsyms, its length from /proc/iomem's "Kernel code" (`_etext`
//! is near the end of kallsyms: reading it whole costs ~50 ms). Read once,
//! bounded, as root; what cannot be read is left without a mapping.

use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

use object::elf::{FileHeader64, NT_GNU_BUILD_ID};
use object::read::elf::NoteIterator;
use object::Endianness;

use super::Module;

pub struct Images {
    text: Option<(Range<u64>, Arc<Module>)>,
    modules: Vec<(Range<u64>, Arc<Module>)>,
}

impl Images {
    pub fn read() -> Images {
        let text = kernel_text().map(|r| {
            let build_id = read_bounded("/sys/kernel/notes", 64 << 10).and_then(|b| build_id(&b));
            (r, Arc::new(Module::named("[kernel.kallsyms]", build_id)))
        });
        let modules = read_bounded("/proc/modules", 1 << 20)
            .map(|b| parse_modules(&String::from_utf8_lossy(&b)))
            .unwrap_or_default()
            .into_iter()
            .map(|(name, r)| {
                let notes = format!("/sys/module/{name}/notes/.note.gnu.build-id");
                let build_id = read_bounded(&notes, 4096).and_then(|b| build_id(&b));
                (r, Arc::new(Module::named(format!("[{name}]"), build_id)))
            })
            .collect();
        Images { text, modules }
    }

    /// The kernel's image (`None`), or the module of that name.
    pub fn named(&self, module: Option<&str>) -> Option<Arc<Module>> {
        match module {
            None => self.text.as_ref().map(|(_, m)| m.clone()),
            Some(name) => self.modules.iter().find(|(_, m)| m.name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) == Some(name)).map(|(_, m)| m.clone()),
        }
    }

    /// The image `addr` lies in, if it lies in one.
    pub fn of(&self, addr: u64) -> Option<Arc<Module>> {
        std::iter::once(&self.text)
            .flatten()
            .chain(&self.modules)
            .find(|(r, _)| r.contains(&addr))
            .map(|(_, m)| m.clone())
    }
}

fn read_bounded(path: &str, limit: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(limit).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// `_text` to `_etext`.
fn kernel_text() -> Option<Range<u64>> {
    let head = read_bounded("/proc/kallsyms", 16 << 10)?;
    let start = symbol(&String::from_utf8_lossy(&head), "_text")?;
    let iomem = read_bounded("/proc/iomem", 256 << 10)?;
    let len = code_length(&String::from_utf8_lossy(&iomem))?;
    // Addresses hidden (kptr_restrict) read as 0.
    (start != 0).then(|| start..start.saturating_add(len))
}

/// The address of `name` in kallsyms' text.
fn symbol(kallsyms: &str, name: &str) -> Option<u64> {
    kallsyms.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (addr, _, sym) = (f.next()?, f.next()?, f.next()?);
        (sym == name).then(|| u64::from_str_radix(addr, 16).ok()).flatten()
    })
}

/// The length of the kernel's code, from /proc/iomem's "Kernel code"
/// line (physical addresses; the length is the virtual one's).
fn code_length(iomem: &str) -> Option<u64> {
    let line = iomem.lines().find(|l| l.trim_end().ends_with(": Kernel code"))?;
    let (lo, hi) = line.split(':').next()?.trim().split_once('-')?;
    let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
    (hi > lo).then(|| hi - lo + 1)
}

/// `<name> <size> <instances> <dependencies> <state> <address> ...`.
fn parse_modules(text: &str) -> Vec<(String, Range<u64>)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (name, size, addr) = (f.first()?, f.get(1)?.parse::<u64>().ok()?, f.get(5)?);
            let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).ok().filter(|&a| a != 0)?;
            let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            ok.then(|| (name.to_string(), addr..addr.saturating_add(size)))
        })
        .collect()
}

/// The GNU build ID in a notes section.
fn build_id(notes: &[u8]) -> Option<Vec<u8>> {
    let mut it = NoteIterator::<FileHeader64<Endianness>>::new(Endianness::default(), 4, notes).ok()?;
    while let Ok(Some(note)) = it.next() {
        if note.name() == b"GNU" && note.n_type(Endianness::default()) == NT_GNU_BUILD_ID {
            return Some(note.desc().to_vec());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_text_and_modules_are_read_from_their_lines() {
        let kallsyms = "ffffffff81000000 T srso_alias_untrain_ret\nffffffff81000000 T _stext\nffffffff81000000 T _text\n";
        assert_eq!(symbol(kallsyms, "_text"), Some(0xffffffff81000000));
        let iomem = "00100000-bffd9fff : System RAM\n  01000000-02209987 : Kernel code\n  03000000-0327c0ff : Kernel data\n";
        assert_eq!(code_length(iomem), Some(0x1209988));
        let modules = "ext4 1011712 1 - Live 0xffffffffc0a00000\nbad name 1 0 - Live 0x0\n";
        assert_eq!(parse_modules(modules), [("ext4".to_string(), 0xffffffffc0a00000..0xffffffffc0a00000 + 1011712)]);
    }

    /// As root (kallsyms and iomem show addresses to root only).
    #[test]
    fn this_kernel_s_text_has_its_build_id() {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "this test reads kernel addresses: run it as root (sudo scripts/test.sh)");
        let images = Images::read();
        let (text, module) = images.text.as_ref().expect("the kernel's text bounds are read");
        assert!(text.end > text.start);
        assert!(module.build_id.as_ref().is_some_and(|b| b.len() >= 16), "{module:?}");
        assert_eq!(images.of(text.start).as_deref(), Some(&**module));
        assert_eq!(images.of(text.end), None, "past _etext");
        assert_eq!(images.named(None).as_deref(), Some(&**module));
        assert_eq!(images.named(Some("no_such_module")), None);
    }
}
