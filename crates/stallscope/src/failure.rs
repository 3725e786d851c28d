//! Exit codes, and the error type that carries one to `main`.
//!
//! Invariant: each kind of bad input has its own documented exit code, so scripts can tell
//! "nothing to analyse" from "this is not a log" from a real failure.

use std::fmt;

pub const EXIT_OK: i32 = 0;
/// Any other failure: I/O, a bad recording, an internal error.
pub const EXIT_FAILURE: i32 = 1;
/// The command line was wrong: clap exits with it for every usage error; a command returns it
/// for the few checks that need more than one option (a variant of a scenario not chosen).
pub const EXIT_USAGE: i32 = 2;
/// Every input was empty.
pub const EXIT_EMPTY: i32 = 3;
/// An input is binary data, not a text log.
pub const EXIT_BINARY: i32 = 4;
/// The inputs are text but hold no safepoint records.
pub const EXIT_NO_RECORDS: i32 = 5;

/// An error that ends the program with a specific exit code and a one-line message.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn error(code: i32, message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Failure { code, message: message.into() })
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The exit code an error should end the program with: its own where it carries one
/// ([`Failure`], or a library's typed refusal), else [`EXIT_FAILURE`].
pub fn exit_code(e: &anyhow::Error) -> i32 {
    e.chain()
        .find_map(|c| {
            if let Some(f) = c.downcast_ref::<Failure>() {
                return Some(f.code);
            }
            if c.downcast_ref::<lab::UnknownVariant>().is_some() {
                return Some(EXIT_USAGE);
            }
            c.downcast_ref::<logs::Nothing>().map(|n| match n {
                logs::Nothing::Binary(_) => EXIT_BINARY,
                logs::Nothing::Empty(_) => EXIT_EMPTY,
                logs::Nothing::NoRecords(_) => EXIT_NO_RECORDS,
            })
        })
        .unwrap_or(EXIT_FAILURE)
}
