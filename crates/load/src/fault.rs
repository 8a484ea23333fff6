//! What can go wrong with a request or a connection, counted by kind.

use std::collections::BTreeMap;
use std::io;

use cachelab_client::ErrorKind;

/// What went wrong, counted by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    ConnectRefused,
    ConnectFailed,
    ConnectTimeout,
    /// No reply within the request timeout; the connection is dropped and reopened.
    Timeout,
    /// The server closed the connection.
    Closed,
    /// Connection reset or broken pipe.
    Reset,
    Io,
    /// Bytes that are not a valid reply.
    Protocol,
    /// `SERVER_ERROR` (e.g. out of memory); the connection stays.
    ServerError,
    ClientError,
    UnknownCommand,
    /// A request for a pool member that is marked down: failed at once, never sent.
    MemberDown,
    /// A Redis Cluster's redirection not followed: to a node that is not one of the masters
    /// read before the run, past the bound, or for a multi-get part of several keys.
    Redirected,
}

pub(crate) const FAULTS: usize = 13;

impl Fault {
    pub const ALL: [Fault; FAULTS] = [
        Fault::ConnectRefused,
        Fault::ConnectFailed,
        Fault::ConnectTimeout,
        Fault::Timeout,
        Fault::Closed,
        Fault::Reset,
        Fault::Io,
        Fault::Protocol,
        Fault::ServerError,
        Fault::ClientError,
        Fault::UnknownCommand,
        Fault::MemberDown,
        Fault::Redirected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::ConnectRefused => "connect_refused",
            Fault::ConnectFailed => "connect_failed",
            Fault::ConnectTimeout => "connect_timeout",
            Fault::Timeout => "timeout",
            Fault::Closed => "closed",
            Fault::Reset => "reset",
            Fault::Io => "io",
            Fault::Protocol => "protocol",
            Fault::ServerError => "server_error",
            Fault::ClientError => "client_error",
            Fault::UnknownCommand => "unknown_command",
            Fault::MemberDown => "member_down",
            Fault::Redirected => "redirect_unfollowed",
        }
    }

    pub(crate) fn from_kind(k: ErrorKind) -> Fault {
        match k {
            ErrorKind::ConnectRefused => Fault::ConnectRefused,
            ErrorKind::ConnectTimeout => Fault::ConnectTimeout,
            ErrorKind::ConnectFailed | ErrorKind::Tls => Fault::ConnectFailed,
            ErrorKind::Timeout => Fault::Timeout,
            ErrorKind::Closed => Fault::Closed,
            ErrorKind::Reset => Fault::Reset,
            ErrorKind::Protocol => Fault::Protocol,
            ErrorKind::ServerError => Fault::ServerError,
            ErrorKind::ClientError => Fault::ClientError,
            ErrorKind::UnknownCommand => Fault::UnknownCommand,
            _ => Fault::Io,
        }
    }

    /// A failed read or write on a connection.
    pub(crate) fn from_io(e: &io::Error) -> Fault {
        use io::ErrorKind as K;
        match e.kind() {
            K::ConnectionReset | K::BrokenPipe | K::ConnectionAborted => Fault::Reset,
            _ => Fault::Io,
        }
    }

    /// Its place in [`Fault::ALL`] and in every per-fault array.
    pub(crate) fn index(self) -> usize {
        Fault::ALL.iter().position(|&f| f == self).expect("listed")
    }
}

/// Per-fault counts by name, leaving out the faults that did not happen.
pub(crate) fn named(counts: &[u64; FAULTS]) -> BTreeMap<&'static str, u64> {
    Fault::ALL
        .iter()
        .zip(counts)
        .filter(|(_, &n)| n > 0)
        .map(|(f, &n)| (f.as_str(), n))
        .collect()
}
