//! Bounded reads of another process's memory, through `/proc/PID/mem`:
//! each read asks for exactly the bytes wanted and fails (`None`) on any
//! short read, so that nothing read from an untrusted process is taken for
//! more than it is. Used by the runtime readers ([`crate::runtimes::java`]).

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Longest string [`Mem::cstr`] reads, whatever the caller asks.
pub const MAX_STR: usize = 4096;

/// One process's memory, opened once.
#[derive(Debug)]
pub struct Mem {
    file: File,
    pid: u32,
}

impl Mem {
    /// Opens `/proc/PID/mem` for reading (needs ptrace rights over the
    /// process: root, or the same user with a permissive Yama scope).
    pub fn open(pid: u32) -> std::io::Result<Mem> {
        Ok(Mem {
            file: File::open(format!("/proc/{pid}/mem"))?,
            pid,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Fills `buf` from `addr`; false on a fault or a short read.
    pub fn read_into(&self, addr: u64, buf: &mut [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        // Addresses above 2^63 do not pread (negative offsets), and no user
        // address is there.
        if addr == 0 || addr.checked_add(buf.len() as u64).is_none_or(|e| e > i64::MAX as u64) {
            return false;
        }
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], addr + done as u64) {
                Ok(0) => return false,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// `len` bytes at `addr`, or `None`; `len` is the caller's bound.
    pub fn bytes(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0; len];
        self.read_into(addr, &mut buf).then_some(buf)
    }

    pub fn u8(&self, addr: u64) -> Option<u8> {
        let mut b = [0; 1];
        self.read_into(addr, &mut b).then_some(b[0])
    }

    pub fn u16(&self, addr: u64) -> Option<u16> {
        let mut b = [0; 2];
        self.read_into(addr, &mut b).then(|| u16::from_le_bytes(b))
    }

    pub fn u32(&self, addr: u64) -> Option<u32> {
        let mut b = [0; 4];
        self.read_into(addr, &mut b).then(|| u32::from_le_bytes(b))
    }

    pub fn i32(&self, addr: u64) -> Option<i32> {
        self.u32(addr).map(|v| v as i32)
    }

    pub fn u64(&self, addr: u64) -> Option<u64> {
        let mut b = [0; 8];
        self.read_into(addr, &mut b).then(|| u64::from_le_bytes(b))
    }

    /// A NUL-terminated string at `addr` of at most `max` bytes (capped at
    /// [`MAX_STR`]), lossy UTF-8; `None` when unreadable or when no NUL
    /// comes within `max` bytes. Reads in small chunks that stop at page
    /// ends, so that a string ending just before an unmapped page reads.
    pub fn cstr(&self, addr: u64, max: usize) -> Option<String> {
        let max = max.min(MAX_STR);
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            let to_page = (4096 - (at & 4095)) as usize;
            let n = to_page.min(64).min(max - out.len());
            let chunk = self.bytes(at, n)?;
            if let Some(z) = chunk.iter().position(|&b| b == 0) {
                out.extend_from_slice(&chunk[..z]);
                return Some(String::from_utf8_lossy(&out).into_owned());
            }
            out.extend_from_slice(&chunk);
            at += n as u64;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_within_bounds() {
        let mem = Mem::open(std::process::id()).unwrap();
        let data: [u8; 12] = *b"hello\0world!";
        let at = data.as_ptr() as u64;
        assert_eq!(mem.bytes(at, 5).as_deref(), Some(&b"hello"[..]));
        assert_eq!(mem.cstr(at, 100).as_deref(), Some("hello"));
        assert_eq!(mem.cstr(at, 3), None, "no NUL within the bound");
        assert_eq!(mem.u8(at + 6), Some(b'w'));
        assert_eq!(mem.u64(0), None);
        assert_eq!(mem.u64(u64::MAX - 3), None);
        assert_eq!(mem.u64(8), None, "unmapped");
    }
}
