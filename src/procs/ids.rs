//! The index by which the registry holds a binary, shared with the
//! build-id index ([`super::builds`]) so that neither imports the other.

/// A binary held by [`super::registry::Registry`]: its index there.
pub type BinaryId = usize;
