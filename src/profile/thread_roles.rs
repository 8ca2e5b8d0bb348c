//! Threads a runtime leaves named as their process (Node.js's own: the
//! kernel knows them all as `node`), named by what they run: the entry
//! function found in a stack of theirs, root first, as the runtimes list
//! them (symbolize::ThreadRole).

use crate::symbolize::ThreadRole;

/// The role `roles` give a thread from the frames of one of its stacks,
/// root first (the first eight looked at).
pub fn thread_role<'a>(roles: &[&[ThreadRole]], frames: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    let mut previous = "";
    for f in frames.take(8) {
        let found = roles.iter().flat_map(|r| r.iter()).find(|r| match r.under {
            Some(under) => previous == under && f == r.entry,
            None => f.starts_with(r.entry),
        });
        if let Some(r) = found {
            return Some(r.role);
        }
        previous = f;
    }
    None
}
