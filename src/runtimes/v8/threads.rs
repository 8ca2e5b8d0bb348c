//! Node.js's own threads, which the kernel knows by the process's name
//! (`node`), named by the function they run (profile::thread_roles finds
//! it in a stack of theirs, root first).

use crate::symbolize::ThreadRole;

const fn role(entry: &'static str, role: &'static str) -> ThreadRole {
    ThreadRole { entry, under: None, role }
}

pub const ROLES: &[ThreadRole] = &[
    // libuv's pool runs `worker` right under `start_thread` (its
    // `uv__thread_start` inlined away).
    ThreadRole { entry: "worker", under: Some("start_thread"), role: "libuv-worker" },
    role("uv__thread_start", "libuv-worker"),
    role("node::(anonymous namespace)::PlatformWorkerThread(", "V8Worker"),
    role("node::WorkerThreadsTaskRunner::DelayedTaskScheduler", "V8DelayedTasks"),
    role("node::worker::Worker::StartThread(", "WorkerThread"),
    role("node::inspector::", "inspector"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::thread_roles::thread_role;

    fn of(frames: &[&str]) -> Option<&'static str> {
        thread_role(&[ROLES], frames.iter().copied())
    }

    #[test]
    fn node_threads_are_named_by_what_they_run() {
        assert_eq!(of(&["clone3", "start_thread", "worker", "uv_cond_wait"]), Some("libuv-worker"));
        assert_eq!(of(&["clone3", "start_thread", "my_worker", "worker"]), None);
        let v8 = ["clone3", "start_thread", "node::(anonymous namespace)::PlatformWorkerThread(void*)"];
        assert_eq!(of(&v8), Some("V8Worker"));
        assert_eq!(of(&["_start", "main"]), None);
    }
}
