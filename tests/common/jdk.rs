//! The JDKs the Java tests run: one on the host, or a Debian release's
//! OpenJDK in its root run by `chroot`, and their JFR's account of a JVM.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::runtime::Folded;

/// A JDK the tests run: its bin directory on the host (empty: PATH's),
/// or a Debian release's OpenJDK in its root (scripts/fetch-roots.sh),
/// run by `chroot` in a mount namespace of its own with its own /proc, as
/// a container runs it.
#[derive(Clone)]
pub struct Jdk {
    pub root: Option<PathBuf>,
    pub bin: PathBuf,
}

impl Jdk {
    /// The JDK of the `java` at this path (`java`: PATH's).
    pub fn of_java(java: &Path) -> Jdk {
        Jdk { root: None, bin: java.parent().unwrap_or(Path::new("")).to_path_buf() }
    }

    /// OpenJDK `major` of the Debian root `name`.
    pub fn debian(name: &str, major: u32) -> Jdk {
        Jdk { root: Some(super::roots::named(name)), bin: format!("/usr/lib/jvm/java-{major}-openjdk-amd64/bin").into() }
    }

    /// A command running the JDK's tool `name`.
    pub fn tool(&self, name: &str) -> Command {
        let path = if self.bin.as_os_str().is_empty() { PathBuf::from(name) } else { self.bin.join(name) };
        match &self.root {
            None => Command::new(path),
            // As a container runs it: a mount namespace of its own with
            // its /proc (the launcher finds the JDK from /proc/self/exe),
            // gone with the process.
            Some(root) => {
                let mut cmd = Command::new("unshare");
                cmd.args(["-m", "--", "sh", "-c", r#"mount -t proc proc "$0/proc" && exec chroot "$0" "$@""#])
                    .arg(root)
                    .arg(path);
                cmd
            }
        }
    }

    /// The workloads' classes (`host`, compiled there), as the JVM sees
    /// them (copied into the root).
    pub fn classes(&self, host: &Path) -> PathBuf {
        if self.root.is_none() {
            return host.to_path_buf();
        }
        let inside = Path::new("/tmp/fgbpf-versions/java-classes");
        let there = self.outside(inside);
        std::fs::create_dir_all(&there).unwrap();
        for entry in std::fs::read_dir(host).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, there.join(path.file_name().unwrap())).unwrap();
        }
        inside.to_path_buf()
    }

    /// Where a path the JVM sees is on the host.
    pub fn outside(&self, inside: &Path) -> PathBuf {
        match &self.root {
            None => inside.to_path_buf(),
            Some(root) => root.join(inside.strip_prefix("/").unwrap_or(inside)),
        }
    }

    pub fn label(&self) -> String {
        match &self.root {
            None => self.bin.join("java").display().to_string(),
            Some(root) => format!("{} in {}", self.bin.join("java").display(), root.display()),
        }
    }
}

/// The stacks of `events` in a JFR recording, by the JDK's `jfr print`.
pub fn jfr_stacks(mut jfr: Command, file: &Path, events: &str) -> Folded {
    let out = jfr
        .args(["print", "--events", events])
        .arg(file)
        .output()
        .expect("jfr is not installed: run scripts/test.sh");
    assert!(out.status.success(), "jfr print: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut stacks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("stackTrace = [") {
            current = Some(Vec::new());
        } else if t == "]" || t.starts_with("]") {
            if let Some(mut s) = current.take() {
                s.reverse();
                stacks.push((s, 1));
            }
        } else if let Some(s) = current.as_mut() {
            if t != "..." {
                s.push(t.split(" line:").next().unwrap_or(t).to_string());
            }
        }
    }
    stacks
}
