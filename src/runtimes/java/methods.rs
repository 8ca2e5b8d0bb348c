//! The `Method*`s read from one JVM during a capture, by address, and
//! which addresses held two different methods (a class unloaded and
//! another's method allocated where its method was).
//!
//! An address is always read again when something announces it: an
//! interpreted frame (each second it is seen), a compiled method, a native
//! wrapper. A name kept from an earlier read would name a method by what
//! its address held before, which is what a JVM that unloads classes makes
//! likely: a reloaded class's methods land where the unloaded one's were.
//! A compiled method keeps the name read when it was announced (its
//! `Method*` cannot be freed while it lives); an interpreted frame names
//! its address at the capture's end, so an address that held two methods
//! names none.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::names::MethodInfo;
use super::Unnamed;

/// A method as last read: `None` when it could not be read.
pub type Method = Option<Arc<MethodInfo>>;

#[derive(Debug, Default)]
pub struct Methods {
    by_addr: HashMap<u64, Read>,
    reused: HashSet<u64>,
}

/// One address: the last method read there, and whether the last read
/// failed.
#[derive(Debug)]
struct Read {
    last: Option<Arc<MethodInfo>>,
    failed: bool,
}

impl Methods {
    /// What `addr` holds now, read with `read`; a readable method other than
    /// the one read before there marks the address reused.
    pub fn read_now(&mut self, addr: u64, read: impl FnOnce(u64) -> Option<MethodInfo>) -> Method {
        let now = read(addr).map(Arc::new);
        let at = self.by_addr.entry(addr).or_insert(Read { last: None, failed: true });
        at.failed = now.is_none();
        if let Some(b) = &now {
            if at.last.as_ref().is_some_and(|a| a != b) {
                self.reused.insert(addr);
            }
            at.last = Some(b.clone());
        }
        now
    }

    /// The method an interpreted frame at `addr` ran, as last read.
    pub fn named(&self, addr: u64) -> Result<&Arc<MethodInfo>, Unnamed> {
        if self.reused.contains(&addr) {
            return Err(Unnamed::Reused);
        }
        let at = self.by_addr.get(&addr).ok_or(Unnamed::NotAnnounced)?;
        at.last.as_ref().filter(|_| !at.failed).ok_or(Unnamed::Unreadable)
    }

    /// Addresses read.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(class: &str) -> Option<MethodInfo> {
        Some(MethodInfo::new(class, "work", "(J)J"))
    }

    #[test]
    fn a_compiled_method_gets_what_its_address_holds_now() {
        // Round 80's method read at 0x1000, its class unloaded, round 84's
        // method allocated there: round 84's compiled code is announced
        // before any of its interpreted frames.
        let mut m = Methods::default();
        let first = m.read_now(0x1000, |_| info("ChurnWork80"));
        assert_eq!(first.unwrap().class, "ChurnWork80");
        let now = m.read_now(0x1000, |_| info("ChurnWork84"));
        assert_eq!(now.unwrap().class, "ChurnWork84", "a name from what the address held before");
        assert_eq!(m.named(0x1000).unwrap_err(), Unnamed::Reused, "interpreted frames there: which ran is unknown");
    }

    #[test]
    fn the_same_method_read_again_stays_named() {
        let mut m = Methods::default();
        m.read_now(0x1000, |_| info("Busy"));
        m.read_now(0x1000, |_| info("Busy"));
        assert_eq!(m.named(0x1000).unwrap().class, "Busy");
        assert_eq!(m.named(0x2000).unwrap_err(), Unnamed::NotAnnounced);
    }

    #[test]
    fn an_unreadable_read_leaves_the_address_unreadable_not_reused() {
        let mut m = Methods::default();
        m.read_now(0x1000, |_| info("Busy"));
        assert!(m.read_now(0x1000, |_| None).is_none());
        assert_eq!(m.named(0x1000).unwrap_err(), Unnamed::Unreadable);
        m.read_now(0x1000, |_| info("Busy"));
        assert_eq!(m.named(0x1000).unwrap().class, "Busy");
        // A failed read between two methods does not hide the change.
        m.read_now(0x1000, |_| None);
        m.read_now(0x1000, |_| info("Other"));
        assert_eq!(m.named(0x1000).unwrap_err(), Unnamed::Reused);
    }
}
