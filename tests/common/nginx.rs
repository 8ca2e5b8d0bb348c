//! nginx as Debian ships it, for the tests that capture a real server
//! (tests/before.rs, tests/servers.rs).

use std::path::Path;
use std::process::Command;

use super::{consumers_dir, KillOnDrop};

/// An nginx master, stopped by SIGTERM, on which its worker exits too
/// (SIGKILL would leave the worker behind), at most 10 s waited for.
pub struct Nginx(pub KillOnDrop);

impl Drop for Nginx {
    fn drop(&mut self) {
        self.0.signal(libc::SIGTERM);
        let asked = std::time::Instant::now();
        while matches!(self.0 .0.try_wait(), Ok(None)) && asked.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// nginx as Debian ships it (scripts/fetch-nginx.sh), a master and
/// `workers` workers on a loopback port, its files under `dir` (its
/// document root `dir/html`, made by the caller); with its port.
pub fn master(dir: &Path, workers: usize) -> (Command, u16) {
    let bin = consumers_dir().join("nginx/nginx");
    assert!(bin.exists(), "{} is missing: scripts/fetch-nginx.sh fetches it (scripts/test.sh runs it)", bin.display());
    std::fs::create_dir_all(dir).unwrap();
    let d = dir.display();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let temps: String = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .iter()
        .map(|t| format!("{t}_temp_path {d}/{t};\n"))
        .collect();
    let conf = format!(
        "daemon off;\nmaster_process on;\nworker_processes {workers};\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\naccess_log off;\n{temps}server {{ listen 127.0.0.1:{port}; }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut cmd = Command::new(bin);
    cmd.args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf"), "-e", &format!("{d}/error.log")]);
    (cmd, port)
}
