//! The error a capture's set-up fails with: what went wrong and what the
//! user can do about it.

use std::fmt;

/// A failure to set up a capture, with what the user can do about it.
#[derive(Debug)]
pub struct CaptureError {
    pub message: String,
}

impl CaptureError {
    pub fn new(message: impl Into<String>) -> Self {
        CaptureError {
            message: message.into(),
        }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CaptureError {}
