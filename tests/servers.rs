//! Servers from apt, under a load the test makes on loopback, captured as
//! an engineer in an incident captures them (`fgbpf wall`, whole host), and
//! checked against the server's own account of itself over the same
//! seconds: PostgreSQL (Debian's, stripped as shipped) with its sessions
//! all updating one row, beside `pg_stat_activity`'s wait events.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// Sessions updating the one row.
const CLIENTS: usize = 8;

/// Debian's PostgreSQL binaries (`/usr/lib/postgresql/VERSION/bin`).
fn pg_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (scripts/test.sh installs postgresql)")
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("postgres").is_file())
        .collect();
    dirs.sort();
    dirs.pop().expect("a PostgreSQL server under /usr/lib/postgresql")
}

/// The `postgres` user's ids: the server refuses to run as root.
fn postgres_user() -> (u32, u32) {
    let u = nix::unistd::User::from_name("postgres").unwrap().expect("the postgres user (made by the postgresql package)");
    (u.uid.as_raw(), u.gid.as_raw())
}

/// A PostgreSQL cluster of its own (data directory and socket under the
/// test's scratch), stopped (immediate shutdown) when dropped.
struct Cluster {
    server: Child,
    socket: PathBuf,
    port: u16,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.server.id() as i32), nix::sys::signal::Signal::SIGQUIT);
        let _ = self.server.wait();
    }
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let bin = pg_bin();
        let (uid, gid) = postgres_user();
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        nix::unistd::chown(dir, Some(uid.into()), Some(gid.into())).unwrap();
        let data = dir.join("data");
        let socket = dir.join("socket");
        let as_postgres = |program: &str| {
            let mut c = Command::new(bin.join(program));
            c.uid(uid).gid(gid).current_dir(dir).env_remove("PGDATA");
            c
        };
        std::fs::create_dir_all(&socket).unwrap();
        nix::unistd::chown(&socket, Some(uid.into()), Some(gid.into())).unwrap();
        let init = as_postgres("initdb")
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(init.status.success(), "initdb: {}", String::from_utf8_lossy(&init.stderr));
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = as_postgres("postgres")
            .arg("-D")
            .arg(&data)
            .args(["-c", "listen_addresses=", "-c", &format!("port={port}"), "-c"])
            .arg(format!("unix_socket_directories={}", socket.display()))
            .args(["-c", "max_connections=50"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let cluster = Cluster { server, socket, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !cluster.psql(&["-c", "SELECT 1"]).status.success() {
            assert!(Instant::now() < deadline, "PostgreSQL did not accept connections within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        cluster
    }

    fn client(&self, program: &str) -> Command {
        let mut c = Command::new(pg_bin().join(program));
        c.arg("-h").arg(&self.socket).args(["-p", &self.port.to_string(), "-U", "postgres"]);
        c
    }

    fn psql(&self, args: &[&str]) -> std::process::Output {
        self.client("psql").args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "postgres"]).args(args).output().unwrap()
    }
}

/// The server's account of its sessions while it runs: `pg_stat_activity`
/// read 20 times a second over one connection, counting the pgbench
/// sessions in the waits a test asks about.
struct Account {
    psql: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The waits counted: a condition on `pg_stat_activity`'s columns.
    waits: &'static str,
    /// Session-samples in those waits, and all.
    waiting: u64,
    all: u64,
}

impl Account {
    fn open(c: &Cluster, waits: &'static str) -> Account {
        let mut psql = c
            .client("psql")
            .args(["-X", "-q", "-A", "-t", "-d", "postgres"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = psql.stdin.take().unwrap();
        let stdout = BufReader::new(psql.stdout.take().unwrap());
        Account { psql, stdin, stdout, waits, waiting: 0, all: 0 }
    }

    fn sample(&mut self) {
        writeln!(
            self.stdin,
            "SELECT count(*) FILTER (WHERE {}), count(*) FROM pg_stat_activity WHERE application_name = 'pgbench' AND backend_type = 'client backend';",
            self.waits
        )
        .unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let (waiting, all) = line.trim().split_once('|').unwrap_or_else(|| panic!("psql said {line:?}"));
        self.waiting += waiting.parse::<u64>().unwrap();
        self.all += all.parse::<u64>().unwrap();
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let _ = self.psql.kill();
        let _ = self.psql.wait();
    }
}

/// A cluster in the test's scratch `name`, `setup` run in it, and the
/// pgbench script file holding `script`.
fn database(name: &str, setup: &str, script: &str) -> (Cluster, PathBuf) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("servers").join(name);
    let cluster = Cluster::start(&dir);
    let done = cluster.psql(&["-c", setup]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let file = dir.join("script.sql");
    std::fs::write(&file, script).unwrap();
    (cluster, file)
}

/// `fgbpf wall -F 99 -d 6` (with `extra`) of the whole host while
/// [`CLIENTS`] pgbench sessions run `script` without pause, beside the
/// database's own account of the sessions in `waits` over the same
/// seconds: the capture's output, its directory, the account.
fn under_load(cluster: &Cluster, script: &Path, waits: &'static str, name: &str, extra: &[&str]) -> (std::process::Output, PathBuf, Account) {
    let _load = KillOnDrop(
        cluster
            .client("pgbench")
            .args(["-n", "-c", &CLIENTS.to_string(), "-j", "2", "-T", "30", "-f"])
            .arg(script)
            .arg("postgres")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut account = Account::open(cluster, waits);
    // Every session connected and under way.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let before = account.all;
        account.sample();
        if account.all - before == CLIENTS as u64 {
            break;
        }
        assert!(Instant::now() < deadline, "{CLIENTS} pgbench sessions did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    account.waiting = 0;
    account.all = 0;
    let out_dir = out_dir(name);
    let done = AtomicBool::new(false);
    let (out, account) = std::thread::scope(|s| {
        let stop = &done;
        let sampler = s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                account.sample();
                std::thread::sleep(Duration::from_millis(50));
            }
            account
        });
        let out = run(fgbpf().arg("wall").args(extra).args(["-F", "99", "-d", "6", "-o"]).arg(&out_dir));
        done.store(true, Ordering::Relaxed);
        (out, sampler.join().unwrap())
    });
    assert_ok(&out);
    assert!(account.all >= 50 * CLIENTS as u64, "the database was asked too seldom: {} session-samples", account.all);
    (out, out_dir, account)
}

/// Issue 58: sessions of a database all updating one row (each holding its
/// row lock 5 ms), whole host under `fgbpf wall`. The database's own
/// account (`pg_stat_activity` over the capture's seconds) says most of
/// the sessions' time waits on the lock. fgbpf's first finding must name
/// that wait by the path that tells it from the sessions' other waits
/// (through the same `WaitEventSetWait` and `WaitLatch`: the client's
/// next query, `pg_sleep`), its share of the sessions' time within 10
/// points of the database's; with `--wakers`, the session that released
/// the lock beside it; and its pictures read at a glance
/// ([`seen_at_a_glance`]).
#[test]
fn a_database_under_lock_contention_is_named_by_its_lock_path() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (cluster, script) = database(
        "postgres",
        "CREATE TABLE t (id int PRIMARY KEY, n bigint); INSERT INTO t VALUES (1, 0);",
        "BEGIN;\nUPDATE t SET n = n + 1 WHERE id = 1;\nSELECT pg_sleep(0.005);\nEND;\n",
    );
    let (out, out_dir, account) = under_load(&cluster, &script, "wait_event_type = 'Lock'", "servers-postgres", &["--wakers", "--json"]);
    let theirs = account.waiting as f64 * 100.0 / account.all.max(1) as f64;
    let report = run(fgbpf().args(["report", "--json"]).arg(&out_dir));
    assert_ok(&report);
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let first = &findings[0];
    let site = first["site"].as_str().unwrap();
    eprintln!("findings: {:#?}", findings.iter().map(|f| f["text"].as_str().unwrap()).collect::<Vec<_>>());
    assert_eq!(first["thread"], "postgres", "{findings:#?}");
    assert_eq!(site, "waiting for events (epoll) in epoll_wait under WaitEventSetWait ← WaitLatch ← ProcSleep", "{findings:#?}");
    // With --wakers, who released the lock: another session, its commit
    // releasing its locks (LockReleaseAll → ProcLockWakeup, which signals
    // the waiter's latch), in the summary and in report.txt.
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = &summary["findings"][0];
    eprintln!("the summary's first finding: {}", said["text"]);
    assert_eq!(said["site"], site, "the summary leads with the report's finding: {said:#}");
    let holder = said["woken"]["by"].as_str().unwrap_or_default();
    assert!(
        holder.starts_with("postgres in ") && (holder.contains("LockRelease") || holder.contains("ProcLockWakeup")),
        "the lock's holder named as the session that released it: {said:#}"
    );
    assert!(said["woken"]["share"].as_f64().unwrap() >= 50.0, "{said:#}");
    let text = std::fs::read_to_string(out_dir.join("report.txt")).unwrap();
    let line = text.lines().find(|l| l.contains(site)).unwrap_or_default();
    assert!(line.contains(&format!("of it woken by {holder}")), "report.txt names the holder: {line}");
    // fgbpf report of the directory, from offwake.folded beside wall.folded.
    assert_eq!(first["woken"]["by"], said["woken"]["by"], "fgbpf report names the holder as the capture did: {first:#}");
    let shares = (first["woken"]["share"].as_f64().unwrap(), said["woken"]["share"].as_f64().unwrap());
    assert!((shares.0 - shares.1).abs() < 0.5, "the holder's share from the files {:.1}%, at capture {:.1}%", shares.0, shares.1);
    seen_at_a_glance(&out_dir);
    let window = window_us(&out_dir);
    let ours = first["weight"].as_f64().unwrap() * 100.0 / (CLIENTS as f64 * window);
    eprintln!("lock waits: {ours:.1}% of the sessions' time; pg_stat_activity: {theirs:.1}% ({} session-samples)", account.all);
    assert!((ours - theirs).abs() <= 10.0, "lock waits {ours:.1}% of the sessions' time, pg_stat_activity {theirs:.1}%");
}

/// Issue 58: what a person looks at, in headless Chromium. A whole host's
/// `wall.svg` stands on its programs, `postgres` among them, each label
/// its whole name (not eight sessions' towers cut to `..472280`); the
/// timeline's heat map opens on on-CPU time, its cells differing where
/// that time changed (a wall view's cells all hold threads × 100 ms).
fn seen_at_a_glance(dir: &Path) {
    let frames = common::browser::bottom_frames(&dir.join("wall.svg"));
    eprintln!("wall.svg's bottom frames: {frames:?}");
    assert!(frames.iter().any(|(name, _)| name == "postgres"), "{frames:?}");
    assert!(frames.iter().all(|(name, _)| !name.starts_with("postgres-")), "a session drawn as its own tower: {frames:?}");
    let (_, label) = frames.iter().find(|(name, _)| name == "postgres").unwrap();
    assert_eq!(label.trim(), "postgres", "postgres's label");
    let probe = r##"
var cells = Array.from(document.querySelectorAll("#heatmap rect.cell"));
return { measure: fgbpfTimeline.state().measure,
  weights: cells.map(function (c) { return +c.getAttribute("data-weight"); }),
  fills: cells.map(function (c) { return c.getAttribute("fill"); }) };"##;
    let r = common::in_browser(&dir.join("timeline.html"), probe);
    assert_eq!(r["measure"], "on", "{r:#}");
    let weights: Vec<f64> = r["weights"].as_array().unwrap().iter().map(|w| w.as_f64().unwrap()).collect();
    let mut fills: Vec<&str> = r["fills"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(weights.len() >= 50, "{} cells for a 6 s capture", weights.len());
    let (low, high) = weights.iter().fold((f64::MAX, f64::MIN), |(l, h), &w| (l.min(w), h.max(w)));
    fills.sort();
    fills.dedup();
    eprintln!("timeline: {} cells, on-CPU {low}..{high} us a cell, {} colours", weights.len(), fills.len());
    assert!(low < high && fills.len() >= 3, "the cells do not differ: on-CPU {low}..{high}, {} colours", fills.len());
}

/// Issue 58: sessions of a database each inserting one row a transaction,
/// every commit waiting for its WAL to reach the disk (PostgreSQL's
/// defaults: `fsync`, `synchronous_commit`; ext4 here), whole host under
/// `fgbpf wall`. The database's own account (`pg_stat_activity`'s
/// `WALSync`, `WALWrite` and `WALInsert` waits, of the disk and of the
/// WAL's locks) says most of the sessions' time waits for the WAL. fgbpf's
/// first finding must name that wait by its path (here the WAL's lock,
/// `PGSemaphoreLock ← LWLockAcquireOrWait`, which every session waits for
/// while one flushes), and the sessions' time in the commit's flush
/// (`XLogFlush`) must be within 10 points of the database's share, past
/// the waits this capture measured as cut at their leaf.
#[test]
fn a_database_committing_to_disk_is_named_by_its_flush_path() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let (cluster, script) = database(
        "postgres-commit",
        "CREATE TABLE log (id bigserial PRIMARY KEY, t text);",
        "INSERT INTO log (t) VALUES ('an event');\n",
    );
    let waits = "wait_event IN ('WALSync', 'WALWrite', 'WALInsert')";
    let (out, out_dir, account) = under_load(&cluster, &script, waits, "servers-postgres-commit", &[]);
    // The sessions' waits cut at their leaf in the C library before its
    // table was placed for them are said as that, not as code no row
    // covers (libc's .eh_frame covers its futex and epoll waits).
    let said = String::from_utf8_lossy(&out.stderr);
    for line in said.lines().filter(|l| l.contains(" (postgres): ")) {
        eprintln!("{line}");
        if let Some(at) = line.find("in code of libc.so.6 no unwind row covers: ") {
            let rest = &line[at + "in code of libc.so.6 no unwind row covers: ".len()..];
            let share: f64 = rest[..rest.find('%').unwrap()].parse().unwrap();
            assert!(share < 1.0, "a session's waits in libc said to be where no unwind row covers: {line}");
        }
    }
    let theirs = account.waiting as f64 * 100.0 / account.all.max(1) as f64;
    let report = run(fgbpf().args(["report", "--json"]).arg(&out_dir));
    assert_ok(&report);
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    eprintln!("findings: {:#?}", findings.iter().map(|f| f["text"].as_str().unwrap()).collect::<Vec<_>>());
    let first = &findings[0];
    assert_eq!(first["thread"], "postgres", "{findings:#?}");
    assert_ne!(first["state"], "on-CPU", "{findings:#?}");
    let site = first["site"].as_str().unwrap();
    assert!(
        ["XLogFlush", "LWLockAcquireOrWait", "issue_xlog_fsync"].iter().any(|f| site.contains(f)),
        "the first finding names the commit's flush: {findings:#?}"
    );
    // The sessions' time in the WAL's flush, from the folded file, in
    // every state (the database's WALWrite and WALSync waits span the
    // flush's write and fsync, on the CPU and off it, and a session woken
    // from the WAL's lock waits for a CPU inside the same wait), and their
    // waits off the CPU in its insertion (WALInsert).
    let folded = std::fs::read_to_string(out_dir.join("wall.folded")).unwrap();
    let stacks: Vec<(Vec<&str>, f64)> = folded
        .lines()
        .filter(|l| l.starts_with("postgres-"))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(stack, w)| (stack.split(';').skip(2).collect(), w.parse::<f64>().unwrap()))
        .collect();
    let off = |frames: &[&str]| matches!(frames.last(), Some(&"[sleeping]" | &"[uninterruptible]" | &"[runqueue]"));
    let wal: f64 = stacks
        .iter()
        .filter(|(f, _)| f.contains(&"XLogFlush") || (off(f) && f.iter().any(|x| x.starts_with("XLogInsert"))))
        .map(|(_, w)| w)
        .sum();
    // Waits walked no further than their leaf: the first second or so of
    // a whole-host capture, before the host's unwind tables are placed, a
    // wait in the C library (no frame pointers) is cut there, and the
    // report says so (issue 63). Their share is what this capture cannot
    // place, measured, not a tolerance.
    let cut: f64 = stacks
        .iter()
        .filter(|(f, _)| off(f) && f.iter().filter(|x| !x.ends_with("_[k]") && !x.starts_with('[')).count() == 1)
        .map(|(_, w)| w)
        .sum();
    let window = window_us(&out_dir);
    let ours = wal * 100.0 / (CLIENTS as f64 * window);
    let unplaced = cut * 100.0 / (CLIENTS as f64 * window);
    eprintln!("WAL waits: {ours:.1}% of the sessions' time, {unplaced:.1}% cut at their leaf; pg_stat_activity: {theirs:.1}% ({} session-samples)", account.all);
    assert!(
        ours <= theirs + 10.0 && ours + unplaced >= theirs - 10.0,
        "WAL waits {ours:.1}% of the sessions' time ({unplaced:.1}% cut at their leaf), pg_stat_activity {theirs:.1}%"
    );
}

/// The worker processes of the nginx master `pid`.
fn children(pid: u32) -> Vec<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    text.split_whitespace().map(|p| p.parse().unwrap()).collect()
}

/// Issue 58: nginx (Debian's, stripped) with two workers under a load this
/// test makes (three clients fetching a page over loopback without
/// pause), `fgbpf wall -p` the master and its workers. The master waits
/// for signals the whole window: it is idle, said in the idle line and in
/// no finding. The first finding is the workers': their request path, in
/// nginx's own functions.
#[test]
fn nginx_under_load_leads_with_its_workers_and_its_master_is_idle() {
    if !require_root() {
        return;
    }
    let _serial = serial();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("servers").join("nginx");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/index.html"), "fgbpf\n".repeat(700)).unwrap();
    let (mut cmd, port) = nginx::master(&dir, 2);
    let server = nginx::Nginx(KillOnDrop(cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()));
    let master = server.0 .0.id();
    let url = format!("http://127.0.0.1:{port}/");
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(agent.get(&url).call().is_ok_and(|r| r.status() == 200) && children(master).len() == 2) {
        assert!(Instant::now() < deadline, "nginx did not serve {url} with 2 workers within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let workers = children(master);
    let done = AtomicBool::new(false);
    let out_dir = out_dir("servers-nginx");
    let (out, served) = std::thread::scope(|s| {
        let stop = &done;
        let clients: Vec<_> = (0..3)
            .map(|_| {
                let (agent, url) = (agent.clone(), url.clone());
                s.spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(mut r) = agent.get(&url).call() {
                            let _ = r.body_mut().read_to_vec();
                            n += 1;
                        }
                    }
                    n
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let pids = std::iter::once(master).chain(workers.iter().copied()).map(|p| p.to_string()).collect::<Vec<_>>().join(",");
        let out = run(fgbpf().args(["wall", "-F", "99", "-d", "5", "-p", &pids, "-o"]).arg(&out_dir));
        stop.store(true, Ordering::Relaxed);
        (out, clients.into_iter().map(|c| c.join().unwrap()).sum::<u64>())
    });
    assert_ok(&out);
    assert!(served > 1000, "the clients fetched {served} pages");
    let report = run(fgbpf().args(["report", "--json"]).arg(&out_dir));
    assert_ok(&report);
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let idle = v["idle"].as_array().unwrap();
    eprintln!("findings: {findings:#?}\nidle: {idle:#?}");
    let first = &findings[0];
    assert_eq!(first["thread"], "nginx", "{findings:#?}");
    assert_eq!(first["threads"], 2, "the first finding is both workers': {findings:#?}");
    assert!(first["site"].as_str().unwrap().contains("ngx_"), "named in nginx's own functions: {findings:#?}");
    // The master: one idle thread waiting for a signal, in no finding.
    assert!(
        idle.iter().any(|g| g["name"] == "nginx" && g["threads"] == 1 && g["site"].as_str().unwrap().starts_with("waiting for a signal")),
        "{idle:#?}"
    );
    assert!(findings.iter().all(|f| f["threads"] == 2 || !f["site"].as_str().unwrap().starts_with("waiting for a signal")), "{findings:#?}");
}
