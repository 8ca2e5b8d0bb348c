//! `--group-by cgroup`: the names of the cgroups stacks ran in. The kernel
//! keys each stack by the kernfs node ID of its thread's cgroup (in the
//! scope's hierarchy, else cgroup v2); this turns IDs into the root frame a
//! flamegraph shows: `[container ID]` for a container's cgroup, else
//! `[cgroup PATH]`. IDs are looked up in the hierarchy while the capture
//! runs, as they first show up, so that a cgroup removed before the end
//! (a container that stopped) keeps its name. Cgroup names are chosen by
//! whoever made them, containers' root users too: they are untrusted text
//! (outputs sanitize frames) and the walk never follows a link.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::cgroup::{container_id, mounts, Mount, Scope};

/// How deep the walk of a hierarchy goes: deeper than any real layout
/// (Kubernetes pods sit at depth 4 or 5).
const MAX_DEPTH: usize = 32;
/// Directories one walk reads at most: a host with more cgroups than this
/// names the rest by ID.
const MAX_DIRS: usize = 200_000;

/// The name of a cgroup that could not be read.
const UNKNOWN: &str = "cgroup unknown";

/// Names of cgroup IDs in one hierarchy.
#[derive(Debug)]
pub struct Groups {
    /// The hierarchy.
    mount: Mount,
    /// Path inside the hierarchy by ID (`/` for its root).
    paths: HashMap<u64, String>,
    /// IDs a walk did not find: removed before they were looked up.
    gone: HashSet<u64>,
}

impl Groups {
    /// The hierarchy of `scope` (a v1 one for a v1 scope), else cgroup v2
    /// wherever /proc/mounts has it; refuses when there is none to read.
    pub fn new(scope: Option<&Scope>) -> Result<Groups, String> {
        let mounts = mounts();
        let mount = match scope {
            Some(s) if s.v1_subsys.is_some() => mounts
                .iter()
                .filter(|m| !m.v2 && s.dir.starts_with(&m.dir))
                .max_by_key(|m| m.dir.as_os_str().len()),
            _ => mounts.iter().find(|m| m.v2),
        };
        let Some(mount) = mount else {
            return Err("--group-by cgroup needs a cgroup v2 hierarchy, and /proc/mounts has none: give --cgroup a v1 controller's directory (/sys/fs/cgroup/cpu/...) to group by that hierarchy".into());
        };
        Ok(Groups {
            mount: mount.clone(),
            paths: HashMap::new(),
            gone: HashSet::new(),
        })
    }

    /// Looks up the IDs not named yet: one walk of the hierarchy for all
    /// of them, none when every ID is known.
    pub fn note(&mut self, ids: impl IntoIterator<Item = u64>) {
        let new: Vec<u64> = ids
            .into_iter()
            .filter(|id| *id != 0 && !self.paths.contains_key(id) && !self.gone.contains(id))
            .collect();
        if new.is_empty() {
            return;
        }
        self.paths.extend(walk(&self.mount.dir));
        self.gone.extend(new.into_iter().filter(|id| !self.paths.contains_key(id)));
    }

    /// The name of cgroup `id` for its root frame (0: the kernel could
    /// not read the thread's cgroup).
    pub fn label(&self, id: u64) -> String {
        match self.paths.get(&id) {
            Some(path) => label_of_path(path),
            None if id == 0 => UNKNOWN.to_string(),
            None => format!("cgroup #{id}, removed"),
        }
    }

    /// The root frame's text for the cgroup `pid` is in now, from
    /// /proc/PID/cgroup: for waits still open at the end of a capture,
    /// which the kernel has not keyed.
    pub fn label_of_pid(&self, pid: u32) -> String {
        let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        self.path_in(&text).map_or_else(|| UNKNOWN.to_string(), label_of_path)
    }

    /// This hierarchy's line of a /proc/PID/cgroup text.
    fn path_in<'a>(&self, text: &'a str) -> Option<&'a str> {
        text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            self.mount.holds(ctrls).then_some(path)
        })
    }
}

/// `[container ID]` with 12 hex digits, as `docker ps` shows them, for a
/// container's cgroup; `[cgroup PATH]` for any other.
fn label_of_path(path: &str) -> String {
    match container_id(path) {
        Some(id) => format!("container {}", &id[..id.len().min(12)]),
        None => format!("cgroup {path}"),
    }
}

/// Every cgroup under `root` by ID (its directory's inode number, the
/// kernfs node ID), with its path inside the hierarchy.
fn walk(root: &Path) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let mut todo = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = todo.pop() {
        if out.len() >= MAX_DIRS {
            break;
        }
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        let rel = dir.strip_prefix(root).unwrap_or(&dir);
        out.insert(meta.ino(), format!("/{}", rel.to_string_lossy()));
        if depth >= MAX_DEPTH {
            continue;
        }
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            // file_type() does not follow links: a link is not a cgroup.
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push((e.path(), depth + 1));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn containers_are_named_by_their_short_id() {
        let id = "3f2a1b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708";
        assert_eq!(
            label_of_path(&format!("/system.slice/docker-{id}.scope")),
            "container 3f2a1b4c5d6e"
        );
        assert_eq!(label_of_path("/system.slice/redis.service"), "cgroup /system.slice/redis.service");
        assert_eq!(label_of_path("/"), "cgroup /");
    }

    #[test]
    fn a_process_s_line_is_its_hierarchy_s() {
        let text = "4:memory:/mem/x\n2:cpu,cpuacct:/cpu/y\n0::/system.slice/z.service\n";
        let g = |v1: Option<&str>| Groups {
            mount: Mount {
                dir: PathBuf::from("/"),
                v2: v1.is_none(),
                options: ["rw", "nosuid"].into_iter().chain(v1).map(String::from).collect(),
            },
            paths: HashMap::new(),
            gone: HashSet::new(),
        };
        assert_eq!(g(None).path_in(text), Some("/system.slice/z.service"));
        assert_eq!(g(Some("cpu")).path_in(text), Some("/cpu/y"));
        assert_eq!(g(Some("memory")).path_in(text), Some("/mem/x"));
        assert_eq!(g(Some("pids")).path_in(text), None);
    }

    #[test]
    fn the_hierarchy_s_own_cgroups_are_found_and_removed_ones_said() {
        let mut groups = Groups::new(None).expect("the test machines mount cgroup v2");
        let root = fs::metadata(&groups.mount.dir).unwrap().ino();
        groups.note([root, u64::MAX]);
        assert_eq!(groups.label(root), "cgroup /");
        assert_eq!(groups.label(u64::MAX), format!("cgroup #{}, removed", u64::MAX));
        assert_eq!(groups.label(0), "cgroup unknown");
        assert_eq!(groups.label_of_pid(1), "cgroup /");
        assert_eq!(groups.label_of_pid(u32::MAX), "cgroup unknown");
    }
}
