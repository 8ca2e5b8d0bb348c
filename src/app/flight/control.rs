//! `fgbpf dump`'s way to a running recorder: a Unix socket in the dumps
//! directory (`flight.sock`), made readable and writable by root only and
//! answered only to root (the peer's credentials are checked as well). The
//! asker writes `dump`; once the dump is written the recorder answers
//! `ok DIR` or `error WHY`.

use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::sys::stat::{umask, Mode};

use super::super::CliError;

/// The socket's name in the dumps directory.
pub const SOCKET: &str = "flight.sock";

/// How often the recorder looks for askers: its loop turns at each batch
/// of process announcements, hundreds of times a second on a busy host.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// How long the recorder waits for an asker's request once connected.
const REQUEST_WAIT: Duration = Duration::from_secs(1);
/// How long `fgbpf dump` waits for the dump: a whole host's 10-minute
/// window takes seconds to name and write.
const ANSWER_WAIT: Duration = Duration::from_secs(600);

/// The recorder's end: listening, without blocking its loop.
pub(super) struct Control {
    listener: UnixListener,
    path: PathBuf,
    /// The socket file this recorder made (device, inode): removed at the
    /// end only while it is still that one.
    made: (u64, u64),
    looked: Instant,
}

/// A root process that asked for a dump and waits for the answer.
pub(super) struct Asker {
    stream: UnixStream,
    pub pid: i32,
}

impl Control {
    /// Listens at `dumps/flight.sock`. A socket left there by a recorder
    /// that is gone (nothing answers it, and it is root's) is replaced; a
    /// live recorder's, or any other file, is refused.
    pub fn open(dumps: &Path) -> Result<Control, CliError> {
        let path = dumps.join(SOCKET);
        match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(CliError::failed(format!("{}: {e}", path.display()))),
            Ok(m) if !m.file_type().is_socket() || m.uid() != 0 => {
                return Err(CliError::usage(format!(
                    "{} is there and is not a recorder's socket: remove it, or give another --dumps",
                    path.display()
                )))
            }
            Ok(_) => match UnixStream::connect(&path) {
                Ok(_) => {
                    return Err(CliError::usage(format!(
                        "another fgbpf flight listens at {}: stop it, or give this one another --dumps",
                        path.display()
                    )))
                }
                Err(_) => fs::remove_file(&path)
                    .map_err(|e| CliError::failed(format!("removing the stale {}: {e}", path.display())))?,
            },
        }
        // Made root's only from the start: umask is the process's, and
        // only narrows what other threads create meanwhile.
        let old = umask(Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(&path);
        umask(old);
        let listener = bound.map_err(|e| CliError::failed(format!("listening at {}: {e}", path.display())))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| CliError::failed(format!("{}: {e}", path.display())))?;
        let m = fs::symlink_metadata(&path).map_err(|e| CliError::failed(format!("{}: {e}", path.display())))?;
        Ok(Control {
            listener,
            path,
            made: (m.dev(), m.ino()),
            looked: Instant::now(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A root process that asked for a dump since the last call, if any.
    /// Others are answered that they may not, and dropped.
    pub fn take(&mut self) -> Option<Asker> {
        if self.looked.elapsed() < LOOK_EVERY {
            return None;
        }
        loop {
            let (stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.looked = Instant::now();
                    return None;
                }
            };
            if let Some(asker) = Self::request(stream) {
                return Some(asker);
            }
        }
    }

    /// The request on a new connection: `dump`, from root.
    fn request(mut stream: UnixStream) -> Option<Asker> {
        stream.set_nonblocking(false).ok()?;
        stream.set_read_timeout(Some(REQUEST_WAIT)).ok()?;
        stream.set_write_timeout(Some(REQUEST_WAIT)).ok()?;
        let cred = getsockopt(&stream, PeerCredentials).ok()?;
        if cred.uid() != 0 {
            let _ = stream.write_all(b"error only root may ask this recorder for a dump\n");
            return None;
        }
        // One short line; more is not read.
        let mut line = String::new();
        BufReader::new((&stream).take(64)).read_line(&mut line).ok()?;
        if line.trim_end() != "dump" {
            let _ = stream.write_all(b"error unknown request: fgbpf dump asks with `dump`\n");
            return None;
        }
        Some(Asker {
            stream,
            pid: cred.pid(),
        })
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        if fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.made) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl Asker {
    /// Tells the asker where the dump went, or why there is none.
    pub fn answer(mut self, written: &Result<PathBuf, String>) {
        let line = match written {
            Ok(dir) => format!("ok {}\n", dir.display()),
            Err(e) => format!("error {}\n", e.replace('\n', " ")),
        };
        let _ = self.stream.write_all(line.as_bytes());
    }
}

/// `fgbpf dump`: asks the recorder listening in `dumps` for a dump and
/// waits for it; the dump's directory.
pub fn ask(dumps: &Path) -> Result<PathBuf, CliError> {
    let path = dumps.join(SOCKET);
    let not_there = || {
        CliError::usage(format!(
            "no fgbpf flight listens at {}: start one (sudo fgbpf flight --dumps {}), or give the --dumps it runs with",
            path.display(),
            dumps.display()
        ))
    };
    match fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_socket() => {}
        Ok(_) => {
            return Err(CliError::usage(format!("{} is not a recorder's socket", path.display())))
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            return Err(CliError::usage(format!("{}: {e}: the recorder answers root only (sudo)", path.display())))
        }
        Err(_) => return Err(not_there()),
    }
    let mut stream = UnixStream::connect(&path).map_err(|e| match e.kind() {
        ErrorKind::PermissionDenied => {
            CliError::usage(format!("{}: {e}: the recorder answers root only (sudo)", path.display()))
        }
        _ => not_there(),
    })?;
    let fail = |e: std::io::Error| CliError::failed(format!("asking the recorder at {}: {e}", path.display()));
    stream.set_read_timeout(Some(ANSWER_WAIT)).map_err(fail)?;
    stream.write_all(b"dump\n").map_err(fail)?;
    let mut answer = String::new();
    BufReader::new((&stream).take(64 * 1024)).read_line(&mut answer).map_err(fail)?;
    match answer.trim_end().split_once(' ') {
        Some(("ok", dir)) => Ok(PathBuf::from(dir)),
        Some(("error", why)) => Err(CliError::failed(format!("the recorder could not dump: {why}"))),
        _ => Err(CliError::failed(format!(
            "the recorder at {} gave no answer (it may have stopped)",
            path.display()
        ))),
    }
}
