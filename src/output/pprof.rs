//! pprof export: gzip-compressed `perftools.profiles.Profile` protobuf.

use std::io::{self, Write};

use crate::profile::Profile;

pub fn write(_profile: &Profile, _out: &mut dyn Write) -> io::Result<()> {
    Err(io::Error::other("pprof output is not implemented yet"))
}
