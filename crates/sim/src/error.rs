//! The one error a malformed trace produces: which file, where in it, and what was wrong.

use std::fmt;

/// Where in a trace file the problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// 1-based line number of a text trace.
    Line(u64),
    /// Byte offset of a binary record.
    Offset(u64),
    /// The file as a whole (unreadable, empty, missing header).
    File,
}

/// A malformed or unreadable trace. `Display` gives `path:line: message`,
/// `path: byte N: message` or `path: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub path: String,
    pub location: Location,
    pub message: String,
}

impl TraceError {
    pub fn new(path: impl Into<String>, location: Location, message: impl Into<String>) -> Self {
        TraceError {
            path: path.into(),
            location,
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Location::Line(n) => write!(f, "{}:{}: {}", self.path, n, self.message),
            Location::Offset(n) => write!(f, "{}: byte {}: {}", self.path, n, self.message),
            Location::File => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for TraceError {}
