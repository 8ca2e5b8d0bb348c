//! Reading a process's view of itself from /proc: its memory map, its
//! root, its size and its PID inside its namespace. Names and paths come
//! from the target and are untrusted: they are only ever used as data.

use std::fs::{self, File};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;

/// One line of /proc/PID/maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    pub offset: u64,
    /// Device as `major << 32 | minor`.
    pub dev: u64,
    pub inode: u64,
    pub path: &'a str,
}

/// The text of /proc/PID/maps; `None` once the process is gone.
pub fn read(pid: u32) -> Option<String> {
    read_proc(&format!("/proc/{pid}/maps"), 8192)
}

/// A /proc file's text, read in `room`-sized steps: /proc gives no size,
/// and `read_to_end` would ask for one (`statx` and `lseek`) and probe
/// with a 32-byte read, three system calls more per file on a host
/// starting hundreds of processes a second. Lossy: the text is the
/// target's.
fn read_proc(path: &str, room: usize) -> Option<String> {
    use std::io::{ErrorKind, Read};
    let mut file = File::open(path).ok()?;
    let mut bytes = vec![0u8; room];
    let mut len = 0;
    loop {
        if len == bytes.len() {
            bytes.resize(len * 2, 0);
        }
        match file.read(&mut bytes[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    bytes.truncate(len);
    Some(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Parses one line of /proc/PID/maps; paths may hold spaces.
pub fn parse_line(line: &str) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start();
        let end = t.find(' ').unwrap_or(t.len());
        let (f, r) = t.split_at(end);
        rest = r;
        f
    };
    let (range, perms, offset, dev, inode) = (field(), field(), field(), field(), field());
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        exec: perms.as_bytes().get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev: (u64::from_str_radix(major, 16).ok()? << 32) | u64::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
        path: rest.trim_start(),
    })
}

/// The lines of maps `text` that map executable code: all the walkers'
/// readers look at (a process maps ten times more lines than code).
pub fn exec_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len() / 4);
    for line in text.lines() {
        let perms = line.split_once(' ').map_or("", |(_, rest)| rest.trim_start());
        if perms.as_bytes().get(2) == Some(&b'x') {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Mappings JIT compilers put code in: anonymous memory, named or not,
/// and memory-backed files.
pub fn is_anon(path: &str) -> bool {
    path.is_empty()
        || path.starts_with("[anon")
        || path == "[heap]"
        || path.starts_with("/memfd:")
        || path.starts_with("/dev/zero")
}

/// The namespace-independent identity of a process's root: its mount
/// namespace and root directory.
pub fn root_key(pid: &str) -> Option<(String, u64, u64)> {
    let ns = fs::read_link(format!("/proc/{pid}/ns/mnt")).ok()?;
    let m = fs::metadata(format!("/proc/{pid}/root/")).ok()?;
    Some((ns.to_string_lossy().into_owned(), m.dev(), m.ino()))
}

/// Virtual memory size, from /proc/PID/stat: far cheaper to read than the
/// memory map.
pub fn vsize(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.vsize)
}

/// What /proc/PID/stat says of who a process is and how large.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// When it started, in clock ticks since boot (`starttime`), its low
    /// 32 bits as the BPF side keeps them (struct fg_key's `start`): with
    /// its PID, which process it is.
    pub start: u32,
    /// Virtual memory size in bytes.
    pub vsize: u64,
}

pub fn stat(pid: u32) -> Option<Stat> {
    let stat = read_proc(&format!("/proc/{pid}/stat"), 1024)?;
    // The name, in parentheses, may hold spaces: count fields after it
    // (the state is the first, starttime the 20th, vsize the 21st).
    let mut after = stat[stat.rfind(')')? + 1..].split_whitespace().skip(19);
    Some(Stat {
        start: after.next()?.parse::<u64>().ok()? as u32,
        vsize: after.next()?.parse().ok()?,
    })
}

/// Nanoseconds in one of /proc's clock ticks (USER_HZ), for the BPF side
/// to count a process's start as /proc/PID/stat does.
pub fn tick_ns() -> u64 {
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// The PID the process sees itself as (innermost PID namespace). One in
/// fgbpf's PID namespace is asked by its namespace's link alone: the
/// kernel writes the whole status file to answer the rest, which a host
/// starting hundreds of processes a second feels.
pub fn ns_pid(pid: u32) -> Option<u32> {
    static OWN: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let own = OWN.get_or_init(|| fs::read_link("/proc/self/ns/pid").ok());
    if own.is_some() && fs::read_link(format!("/proc/{pid}/ns/pid")).ok() == *own {
        return Some(pid);
    }
    let status = read_proc(&format!("/proc/{pid}/status"), 2048)?;
    let line = status.lines().find_map(|l| l.strip_prefix("NStgid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// This process's vDSO: every process of a kernel maps the same one. Read
/// once: it stays where it is for the process's life.
pub fn own_vdso() -> Option<Range<u64>> {
    static OWN: std::sync::OnceLock<Option<Range<u64>>> = std::sync::OnceLock::new();
    OWN.get_or_init(|| {
        let maps = fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines()
            .filter_map(parse_line)
            .find(|m| m.path == "[vdso]")
            .map(|m| m.start..m.end)
    })
    .clone()
}

/// Binaries are held open for the whole capture, one descriptor each (two
/// once parsed): a busy host maps more distinct files than the usual soft
/// limit of 1024.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid, initialized struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// A path that reopens a file held open, wherever it lives.
pub fn fd_path(file: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_file_longer_than_its_room_is_read_whole_and_lossily() {
        // A path with a byte that is not UTF-8 made the old reading fail,
        // and the process look gone.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("maps");
        let mut text = b"7f00-7f80 r-xp 00000000 fd:01 1 /opt/a\xffb\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 20_000));
        std::fs::write(&path, &text).unwrap();
        let read = read_proc(path.to_str().unwrap(), 64).unwrap();
        assert_eq!(read, String::from_utf8_lossy(&text));
        assert_eq!(read_proc(dir.path().join("gone").to_str().unwrap(), 64), None);
    }

    #[test]
    fn maps_lines_parse_with_spaces_and_deleted_files() {
        let m = parse_line("7f00-7f80 r-xp 00001000 fd:01 1234   /opt/my app/bin (deleted)")
            .unwrap();
        assert_eq!(
            (m.start, m.end, m.offset, m.inode),
            (0x7f00, 0x7f80, 0x1000, 1234)
        );
        assert!(m.exec);
        assert_eq!(m.dev, (0xfd << 32) | 1);
        assert_eq!(m.path, "/opt/my app/bin (deleted)");
        let anon = parse_line("7f00-7f80 rw-p 00000000 00:00 0").unwrap();
        assert!(!anon.exec && is_anon(anon.path));
        assert!(!is_anon("[stack]") && is_anon("[anon:v8]"));
    }

    #[test]
    fn exec_lines_keep_the_code_mappings_as_parse_line_reads_them() {
        let own = std::fs::read_to_string("/proc/self/maps").unwrap();
        let code = exec_lines(&own);
        let parsed = |t: &str| -> Vec<(u64, u64)> {
            t.lines().filter_map(parse_line).filter(|m| m.exec).map(|m| (m.start, m.inode)).collect()
        };
        assert!(!code.is_empty());
        assert!(code.lines().filter_map(parse_line).all(|m| m.exec), "only code");
        assert_eq!(parsed(&code), parsed(&own), "all of it");
    }
}
