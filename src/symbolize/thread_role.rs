//! How threads a runtime leaves named as their process are named: the
//! entries the runtimes list (runtimes::THREAD_ROLES), which the
//! symbolizer carries to the profile's naming of threads.

/// A thread a runtime leaves named as its process (the kernel knows all of
/// Node.js's threads as `node`), named by the function it runs: the first
/// frame of one of its stacks, root first, that starts with `entry` (that
/// is `entry` and comes right after `under`, when given).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadRole {
    pub entry: &'static str,
    pub under: Option<&'static str>,
    pub role: &'static str,
}
