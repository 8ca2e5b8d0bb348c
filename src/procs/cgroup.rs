//! Cgroups as scopes of a capture (`--cgroup`, `--unit`, `--container`):
//! which hierarchies are mounted (cgroup v2 at /sys/fs/cgroup or beside v1
//! controllers at /sys/fs/cgroup/unified, taken from /proc/mounts), a
//! cgroup directory's kernel ID (its inode, the kernfs node ID the BPF
//! side compares), the v1 controller's subsystem index, and the lookups
//! from a systemd unit or a container ID to its cgroup. Every refusal is a
//! sentence for the user.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A cgroup a capture is limited to: its processes and its descendants'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// The cgroup's directory.
    pub dir: PathBuf,
    /// Its path inside its hierarchy, as /proc/PID/cgroup shows it.
    pub path: String,
    /// The kernfs node ID of the directory (its inode number).
    pub id: u64,
    /// `None` for cgroup v2; for a v1 hierarchy, the subsystem index of
    /// one of its controllers (its line in /proc/cgroups).
    pub v1_subsys: Option<u32>,
}

impl Scope {
    /// The processes in the cgroup and its descendants now.
    pub fn pids(&self) -> BTreeSet<u32> {
        let mut out = BTreeSet::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(dir) = dirs.pop() {
            let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            out.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(e.path());
                }
            }
        }
        out
    }
}

/// One mounted cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub dir: PathBuf,
    pub v2: bool,
    /// v1: the controllers (and `name=` of a named hierarchy) it carries.
    pub options: Vec<String>,
}

impl Mount {
    /// Whether a /proc/PID/cgroup line whose controller field is `ctrls`
    /// (empty for cgroup v2) is this hierarchy's.
    pub fn holds(&self, ctrls: &str) -> bool {
        match ctrls {
            "" => self.v2,
            c => !self.v2 && c.split(',').any(|c| self.options.iter().any(|o| o == c)),
        }
    }
}

/// The cgroup hierarchies of /proc/mounts.
pub fn mounts() -> Vec<Mount> {
    parse_mounts(&fs::read_to_string("/proc/mounts").unwrap_or_default())
}

fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (dir, kind, opts) = (*f.get(1)?, *f.get(2)?, *f.get(3)?);
            let v2 = match kind {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                dir: PathBuf::from(unescape(dir)),
                v2,
                options: opts.split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

/// /proc/mounts escapes spaces and the like as octal `\040`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b.get(i + 1..i + 4).and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (b[i], oct) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `--cgroup PATH`: a cgroup directory (v2, or a v1 controller's), or a
/// path inside the cgroup v2 hierarchy as /proc/PID/cgroup shows it
/// (`/system.slice/nginx.service`).
pub fn resolve(path: &str) -> Result<Scope, String> {
    let mounts = mounts();
    let v2 = mounts.iter().find(|m| m.v2);
    let given = Path::new(path);
    let dir = match (given.is_dir(), v2) {
        (true, _) if given.is_absolute() => given.to_path_buf(),
        (_, Some(m)) => m.dir.join(path.trim_start_matches('/')),
        (_, None) => {
            return Err(format!(
                "no cgroup {path}: it is not a directory, and no cgroup v2 hierarchy is mounted to look it up in"
            ))
        }
    };
    let dir = fs::canonicalize(&dir).map_err(|_| match v2 {
        Some(m) => format!(
            "no cgroup {path}: neither a directory nor under the cgroup v2 hierarchy at {}",
            m.dir.display()
        ),
        None => format!("no cgroup {path}"),
    })?;
    scope_of(&dir, &mounts, path)
}

fn scope_of(dir: &Path, mounts: &[Mount], given: &str) -> Result<Scope, String> {
    let mount = mounts
        .iter()
        .filter(|m| dir.starts_with(&m.dir))
        .max_by_key(|m| m.dir.as_os_str().len())
        .ok_or_else(|| format!("{given} is not in a cgroup hierarchy (none of /proc/mounts' cgroup mounts holds it)"))?;
    if !dir.join("cgroup.procs").exists() {
        return Err(format!("{given} is not a cgroup directory (it has no cgroup.procs)"));
    }
    let v1_subsys = match mount.v2 {
        true => None,
        false => Some(subsys_index(&mount.options).ok_or_else(|| {
            let name = mount.options.iter().find_map(|o| o.strip_prefix("name=")).unwrap_or("?");
            let v2 = mounts.iter().find(|m| m.v2).map_or_else(
                || "a controller's hierarchy (/sys/fs/cgroup/cpu/...)".to_string(),
                |m| format!("its cgroup v2 twin under {}", m.dir.display()),
            );
            format!(
                "{given} is in the named v1 hierarchy '{name}', which has no controller the kernel can be asked about; give {v2}"
            )
        })?),
    };
    let id = fs::metadata(dir).map_err(|e| format!("{given}: {e}"))?.ino();
    let rel = dir.strip_prefix(&mount.dir).unwrap_or(dir);
    Ok(Scope {
        dir: dir.to_path_buf(),
        path: format!("/{}", rel.display()),
        id,
        v1_subsys,
    })
}

/// The subsystem index (the line of /proc/cgroups, which lists them in
/// the kernel's order) of the first enabled controller among `options`.
fn subsys_index(options: &[String]) -> Option<u32> {
    let table = fs::read_to_string("/proc/cgroups").ok()?;
    let names: Vec<&str> = table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    options
        .iter()
        .find_map(|o| names.iter().position(|n| n == o))
        .map(|i| i as u32)
}

/// `--unit NAME`: a systemd unit's cgroup (`.service` added to a bare
/// name), found in the cgroup v2 hierarchy, else in a v1 controller's.
pub fn of_unit(name: &str) -> Result<Scope, String> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(format!("'{name}' is not a systemd unit name"));
    }
    let unit = match name.contains('.') {
        true => name.to_string(),
        false => format!("{name}.service"),
    };
    let mounts = mounts();
    let mut order: Vec<&Mount> = mounts.iter().filter(|m| m.v2).collect();
    order.extend(mounts.iter().filter(|m| !m.v2 && subsys_index(&m.options).is_some()));
    for m in &order {
        if let Some(dir) = find_dir(&m.dir, &unit, 5) {
            return scope_of(&dir, &mounts, &unit);
        }
    }
    let looked: Vec<String> = order.iter().map(|m| m.dir.display().to_string()).collect();
    Err(format!(
        "no systemd unit {unit} has a cgroup (looked under {})",
        if looked.is_empty() { "no mounted cgroup hierarchy".to_string() } else { looked.join(", ") }
    ))
}

/// A directory named `name` under `root`, breadth first, `depth` levels
/// down at most.
fn find_dir(root: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let mut level = vec![root.to_path_buf()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for dir in level {
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if e.file_name() == name {
                    return Some(e.path());
                }
                next.push(e.path());
            }
        }
        level = next;
    }
    None
}

/// The container ID in a cgroup path's last component, as Docker,
/// containerd, CRI-O and Podman name them (`docker-ID.scope`,
/// `/docker/ID`, `cri-containerd-ID.scope`, `crio-ID.scope`,
/// `libpod-ID.scope`, `/kubepods/.../ID`).
pub fn container_id(cgroup_path: &str) -> Option<&str> {
    let last = cgroup_path.rsplit('/').next()?;
    let last = last.strip_suffix(".scope").unwrap_or(last);
    let id = ["docker-", "cri-containerd-", "crio-", "libpod-", "containerd-"]
        .iter()
        .find_map(|p| last.strip_prefix(p))
        .unwrap_or(last);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The Kubernetes pod UID in a cgroup path, as the kubelet names pods'
/// cgroups (`kubepods-burstable-pod<UID, _ for ->.slice` under systemd,
/// `/kubepods/burstable/pod<UID>` under cgroupfs), with its dashes.
pub fn pod_uid(cgroup_path: &str) -> Option<String> {
    cgroup_path.split('/').rev().find_map(|part| {
        let part = part.strip_suffix(".slice").unwrap_or(part);
        let at = part.rfind("pod")?;
        let uid = part[at + 3..].replace('_', "-");
        let dashes = uid.char_indices().filter(|&(_, c)| c == '-').map(|(i, _)| i).collect::<Vec<_>>();
        let ok = uid.len() == 36 && dashes == [8, 13, 18, 23] && uid.chars().all(|c| c == '-' || c.is_ascii_hexdigit());
        (part.starts_with("pod") || part[..at].ends_with('-')).then_some(()).filter(|_| ok).map(|_| uid)
    })
}

/// A process's cgroup path (its unified hierarchy's, else the first that
/// names a container), read boundedly; `None` once it is gone.
pub fn of_process(pid: u32) -> Option<String> {
    use std::io::Read;
    let mut text = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/cgroup")).ok()?.take(64 << 10).read_to_end(&mut text).ok()?;
    let text = String::from_utf8_lossy(&text);
    let paths: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once(':').and_then(|(_, r)| r.split_once(':'))).collect();
    paths
        .iter()
        .find(|(ctrls, p)| ctrls.is_empty() && *p != "/")
        .or_else(|| paths.iter().find(|(_, p)| container_id(p).is_some() || pod_uid(p).is_some()))
        .map(|(_, p)| p.to_string())
}

/// `--container ID`: the cgroup of the running container whose ID starts
/// with `prefix`, found in /proc/*/cgroup.
pub fn of_container(prefix: &str) -> Result<Scope, String> {
    if prefix.len() < 4 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "'{prefix}' is not a container ID: give at least 4 of its hex digits, as `docker ps` shows them"
        ));
    }
    let prefix = prefix.to_ascii_lowercase();
    let mounts = mounts();
    // (ID, the hierarchy line's controllers, cgroup path)
    let mut found: BTreeSet<(String, String, String)> = BTreeSet::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        if !e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        let text = fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        for line in text.lines() {
            let mut f = line.splitn(3, ':');
            let (_, ctrl, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
            if let Some(id) = container_id(path).filter(|id| id.starts_with(&prefix)) {
                found.insert((id.to_string(), ctrl.to_string(), path.to_string()));
            }
        }
    }
    let ids: BTreeSet<&str> = found.iter().map(|(id, _, _)| id.as_str()).collect();
    match ids.len() {
        0 => return Err(format!("no running container's cgroup has an ID starting with {prefix}")),
        1 => {}
        _ => {
            let list: Vec<&str> = ids.iter().take(4).map(|id| &id[..12]).collect();
            return Err(format!(
                "{prefix} names {} containers ({}): give more of the ID",
                ids.len(),
                list.join(", ")
            ));
        }
    }
    // Its v2 cgroup if there is one, else a v1 controller's.
    let mut candidates: Vec<PathBuf> = Vec::new();
    for (_, ctrl, path) in &found {
        let rel = path.trim_start_matches('/');
        for m in mounts.iter().filter(|m| m.holds(ctrl)) {
            candidates.push(m.dir.join(rel));
        }
    }
    candidates.sort_by_key(|d| !mounts.iter().any(|m| m.v2 && d.starts_with(&m.dir)));
    let mut last_err = format!("the cgroup of container {prefix} is in no mounted hierarchy");
    for dir in candidates.iter().filter(|d| d.is_dir()) {
        match scope_of(dir, &mounts, &dir.display().to_string()) {
            Ok(s) => return Ok(s),
            Err(e) => last_err = e,
        }
    }
    Err(last_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_are_found_under_systemd_and_cgroupfs_names() {
        let uid = "1234abcd-5678-90ab-cdef-1234567890ab";
        let systemd = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234abcd_5678_90ab_cdef_1234567890ab.slice/cri-containerd-aa.scope";
        assert_eq!(pod_uid(systemd).as_deref(), Some(uid));
        assert_eq!(pod_uid(&format!("/kubepods/besteffort/pod{uid}/{}", "f".repeat(64))).as_deref(), Some(uid));
        for not in ["/kubepods.slice", "/system.slice/podman.service", "/user.slice/pod12", "/"] {
            assert_eq!(pod_uid(not), None, "{not}");
        }
    }

    #[test]
    fn hybrid_mounts_are_told_apart() {
        let m = parse_mounts(
            "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
             cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
             cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0\n\
             cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n\
             cgroup2 /mnt/with\\040space cgroup2 rw 0 0\n",
        );
        assert_eq!(m.len(), 4);
        assert!(!m[0].v2 && m[0].options.contains(&"cpu".to_string()));
        assert!(m[2].v2 && m[2].dir == Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(m[3].dir, Path::new("/mnt/with space"));
    }

    #[test]
    fn container_ids_are_read_from_every_runtime_s_naming() {
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for path in [
            format!("/system.slice/docker-{id}.scope"),
            format!("/docker/{id}"),
            format!("/kubepods.slice/kubepods-pod1.slice/cri-containerd-{id}.scope"),
            format!("/machine.slice/libpod-{id}.scope"),
            format!("/kubepods/besteffort/pod1/{id}"),
        ] {
            assert_eq!(container_id(&path), Some(id), "{path}");
        }
        assert_eq!(container_id("/system.slice/nginx.service"), None);
        assert_eq!(container_id("/docker/abc"), None);
    }
}
