//! What the runtimes' readers looked up in a profiled process's memory (a
//! PHP function, a Ruby iseq or method entry, a Python code object), each
//! read once, when the walker announces it, and kept after the process
//! exits: what was read, or why it could not be (a runtime's own reasons,
//! counted as it counts them). A key never read is gone: the process
//! exited before its announcement was read.

use std::collections::HashMap;
use std::hash::Hash;

/// A runtime's reasons a lookup has nothing: one of them is that the
/// process was gone.
pub trait Reason: Copy {
    /// The process exited before the object was read.
    const GONE: Self;
}

/// Keys read, each with what reading it gave, failures too.
pub struct Lookup<K, V, R> {
    read: HashMap<K, Result<V, R>>,
}

impl<K: Eq + Hash, V, R: Reason> Default for Lookup<K, V, R> {
    fn default() -> Self {
        Lookup { read: HashMap::new() }
    }
}

impl<K: Eq + Hash, V, R: Reason> Lookup<K, V, R> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `key` is yet to be read: a failed read counts as read.
    pub fn unread(&self, key: &K) -> bool {
        !self.read.contains_key(key)
    }

    /// Keeps what reading `key` gave, unless it was read before (the
    /// first read stays).
    pub fn keep(&mut self, key: K, read: Result<V, R>) {
        self.read.entry(key).or_insert(read);
    }

    /// As [`Lookup::keep`], but a read that failed when the process was no
    /// longer `alive` (asked after the read) is kept as gone, whatever it
    /// said: it might have succeeded had the process lived.
    pub fn keep_unless_gone(&mut self, key: K, read: Result<V, R>, alive: bool) {
        let read = match read {
            Err(_) if !alive => Err(R::GONE),
            read => read,
        };
        self.keep(key, read);
    }

    /// What reading `key` gave; gone when it was never read.
    pub fn get(&self, key: &K) -> Result<&V, R> {
        match self.read.get(key) {
            Some(Ok(v)) => Ok(v),
            Some(Err(why)) => Err(*why),
            None => Err(R::GONE),
        }
    }

    /// How many keys were read.
    pub fn len(&self) -> usize {
        self.read.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Why {
        Gone,
        NotCode,
    }

    impl Reason for Why {
        const GONE: Self = Why::Gone;
    }

    #[test]
    fn a_key_is_read_once_and_its_failure_remembered() {
        let mut l: Lookup<u64, String, Why> = Lookup::new();
        assert!(l.is_empty());
        assert!(l.unread(&1));
        l.keep(1, Ok("main".into()));
        l.keep(2, Err(Why::NotCode));
        assert!(!l.unread(&1) && !l.unread(&2), "a failed read is read");
        assert_eq!(l.get(&1), Ok(&"main".to_string()));
        assert_eq!(l.get(&2), Err(Why::NotCode));
        // A second read keeps the first one's result.
        l.keep(1, Err(Why::NotCode));
        l.keep(2, Ok("later".into()));
        assert_eq!(l.get(&1), Ok(&"main".to_string()));
        assert_eq!(l.get(&2), Err(Why::NotCode));
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn a_key_never_read_is_gone() {
        let l: Lookup<u64, String, Why> = Lookup::new();
        assert_eq!(l.get(&7), Err(Why::Gone));
    }

    #[test]
    fn a_failure_once_the_process_is_gone_is_kept_as_gone() {
        let mut l: Lookup<u64, String, Why> = Lookup::new();
        l.keep_unless_gone(1, Err(Why::NotCode), false);
        l.keep_unless_gone(2, Err(Why::NotCode), true);
        l.keep_unless_gone(3, Ok("run".into()), false);
        assert_eq!(l.get(&1), Err(Why::Gone));
        assert_eq!(l.get(&2), Err(Why::NotCode));
        assert_eq!(l.get(&3), Ok(&"run".to_string()));
    }
}
