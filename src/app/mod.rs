//! One thin module per subcommand; `main.rs` dispatches here. `oncpu`,
//! `offcpu` and `wall` are one recorder ([`record`]) with different views,
//! their arguments checked once into a [`recording::Recording`];
//! [`capture`] holds the steps every capture takes (checks, window),
//! [`summary`] its end, and [`session`] the window itself, Ctrl-C and the held
//! `-- COMMAND`. [`top`] is the live view of the same recorder, [`flight`]
//! its flight recorder.

pub mod capture;
pub mod convert;
pub mod demo;
pub mod docs;
pub mod diff;
pub mod dump;
pub mod alloc;
pub mod events;
pub mod flamegraph;
pub mod flight;
pub mod offcpu;
pub mod oncpu;
pub mod otlp;
pub mod post;
pub mod record;
pub mod recording;
pub mod session;
pub mod stages;
pub mod report;
pub mod summary;
pub mod top;
pub mod views;
pub mod wall;

use std::fmt;

/// An error that ends the program with one line on stderr.
#[derive(Debug)]
pub struct CliError {
    /// 2 for bad input (nothing was captured), 1 for failures after that.
    pub code: i32,
    pub message: String,
    /// A verdict rather than a failure (`diff --fail-above`): printed
    /// without "error:".
    pub verdict: bool,
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: 2,
            message: message.into(),
            verdict: false,
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        CliError {
            code: 1,
            message: message.into(),
            verdict: false,
        }
    }

    /// Exit 1 with `message` as the verdict of a check that ran.
    pub fn verdict(message: impl Into<String>) -> Self {
        CliError {
            verdict: true,
            ..CliError::failed(message)
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<crate::probe::CaptureError> for CliError {
    fn from(e: crate::probe::CaptureError) -> Self {
        CliError::failed(e.message)
    }
}
