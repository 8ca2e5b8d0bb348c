//! Threads a runtime leaves named as their process (Node.js's own: the
//! kernel knows them all as `node`), named by what they run: the entry
//! function found in a stack of theirs, root first.

/// Node.js's own threads, which the kernel knows by the process's name,
/// by the function they run (found in a stack of theirs, root first).
const ROLES: &[(&str, &str)] = &[
    ("uv__thread_start", "libuv-worker"),
    ("node::(anonymous namespace)::PlatformWorkerThread(", "V8Worker"),
    ("node::WorkerThreadsTaskRunner::DelayedTaskScheduler", "V8DelayedTasks"),
    ("node::worker::Worker::StartThread(", "WorkerThread"),
    ("node::inspector::", "inspector"),
];

/// The role of a Node.js thread from the frames of one of its stacks:
/// libuv's pool runs `worker` right under `start_thread` (its
/// `uv__thread_start` inlined away), the others their own entry.
pub fn thread_role<'a>(frames: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    let mut previous = "";
    for f in frames.take(8) {
        if previous == "start_thread" && f == "worker" {
            return Some("libuv-worker");
        }
        if let Some((_, role)) = ROLES.iter().find(|(entry, _)| f.starts_with(entry)) {
            return Some(role);
        }
        previous = f;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_threads_are_named_by_what_they_run() {
        let libuv = ["clone3", "start_thread", "worker", "uv_cond_wait"];
        assert_eq!(thread_role(libuv.into_iter()), Some("libuv-worker"));
        let own = ["clone3", "start_thread", "my_worker", "worker"];
        assert_eq!(thread_role(own.into_iter()), None);
        let v8 = ["clone3", "start_thread", "node::(anonymous namespace)::PlatformWorkerThread(void*)"];
        assert_eq!(thread_role(v8.into_iter()), Some("V8Worker"));
        assert_eq!(thread_role(["_start", "main"].into_iter()), None);
    }
}
