//! Copies of one build (a container's copy of a program, in its own layer
//! or mount namespace) read once for all of them, when they are provably
//! the same file. A build ID alone would not do: a profiled program
//! chooses its own, and a crafted file of the same ID opened first would
//! name other processes' frames by its symbols. So a copy is read through
//! another only when both are root's and writable by root alone (no other
//! user can change either after the check), of one size, and of the same
//! bytes.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};

use super::elf::ElfInfo;
use super::ids::BinaryId;

/// Larger copies are read on their own: comparing them costs more than
/// what sharing saves.
const MAX_COMPARED: u64 = 64 << 20;

/// A build's key: its build ID and size.
pub type BuildKey = (Vec<u8>, u64);

/// The first binary opened of each build.
#[derive(Default)]
pub struct Builds {
    first: HashMap<BuildKey, BinaryId>,
}

impl Builds {
    /// The key `file` (read as `elf`) may be shared under: `None` for a
    /// file without a build ID, too large, or that another user could
    /// write.
    pub fn key(file: &File, elf: &ElfInfo) -> Option<BuildKey> {
        let m = file.metadata().ok()?;
        let sealed = m.is_file() && m.uid() == 0 && m.mode() & 0o022 == 0;
        if !sealed || m.len() > MAX_COMPARED {
            return None;
        }
        Some((elf.build_id.clone()?, m.len()))
    }

    /// The binary already open under `key` whose file (`file_of`) holds
    /// the same bytes as `file`.
    pub fn find<'a>(&self, key: &BuildKey, file: &File, file_of: impl Fn(BinaryId) -> Option<&'a File>) -> Option<BinaryId> {
        let &b = self.first.get(key)?;
        same_bytes(file_of(b)?, file, key.1).then_some(b)
    }

    /// Notes `b`, just opened, as the first of its build.
    pub fn note(&mut self, key: BuildKey, b: BinaryId) {
        self.first.entry(key).or_insert(b);
    }
}

/// Whether the first `len` bytes of `a` and `b` are the same.
fn same_bytes(a: &File, b: &File, len: u64) -> bool {
    let mut x = vec![0u8; 64 << 10];
    let mut y = vec![0u8; 64 << 10];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(x.len() as u64) as usize;
        if a.read_exact_at(&mut x[..n], at).is_err() || b.read_exact_at(&mut y[..n], at).is_err() || x[..n] != y[..n] {
            return false;
        }
        at += n as u64;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, bytes: &[u8]) -> File {
        let dir = std::env::temp_dir().join(format!("fgbpf-builds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        File::open(path).unwrap()
    }

    #[test]
    fn only_the_same_bytes_are_one_build() {
        let mut bytes = vec![7u8; 200_000];
        let a = file("a", &bytes);
        let b = file("b", &bytes);
        bytes[199_999] = 8;
        let c = file("c", &bytes);
        assert!(same_bytes(&a, &b, 200_000));
        assert!(!same_bytes(&a, &c, 200_000), "one byte apart at the end");
        assert!(!same_bytes(&a, &file("short", &bytes[..100]), 200_000), "a shorter file");
        let mut builds = Builds::default();
        let key = (vec![1, 2, 3], 200_000);
        builds.note(key.clone(), 4);
        let files = [&a, &a, &a, &a, &a];
        assert_eq!(builds.find(&key, &b, |i| files.get(i).copied()), Some(4));
        assert_eq!(builds.find(&key, &c, |i| files.get(i).copied()), None);
        assert_eq!(builds.find(&(vec![9], 200_000), &b, |i| files.get(i).copied()), None);
    }
}
