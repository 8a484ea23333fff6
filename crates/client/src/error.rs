use std::fmt;
use std::time::Duration;

use cachelab_proto::{DecodeError, KeyError, Response};

/// Everything that can go wrong talking to a server.
#[derive(Debug)]
pub enum Error {
    /// Connecting failed (refused, no such host, no such socket, …).
    Connect {
        address: String,
        source: std::io::Error,
    },
    /// Connecting took longer than the connect timeout.
    ConnectTimeout { address: String, after: Duration },
    /// The TLS handshake failed (bad certificate, a server that does not speak TLS, no
    /// answer within the connect timeout), or TLS could not be set up for the address.
    Tls { address: String, reason: String },
    /// A request took longer than the request timeout. The connection is now broken.
    Timeout { after: Duration },
    /// The server closed the connection.
    Closed,
    /// Reading or writing failed (e.g. connection reset).
    Io(std::io::Error),
    /// The server sent bytes that are not a valid reply.
    Protocol(DecodeError),
    /// A reply that is valid but not one this command can get.
    Unexpected {
        command: &'static str,
        reply: String,
    },
    /// A key was refused before anything was sent.
    Key(KeyError),
    /// `ERROR`: the server does not know the command.
    UnknownCommand,
    /// `CLIENT_ERROR <message>`.
    ClientError(String),
    /// `SERVER_ERROR <message>` (e.g. out of memory, object too large).
    ServerError(String),
    /// The connection failed earlier and can't be used; reconnect.
    Broken(ErrorKind),
}

/// The kind of an [`Error`], for counting errors by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    ConnectRefused,
    ConnectFailed,
    ConnectTimeout,
    Tls,
    Timeout,
    Closed,
    Reset,
    Io,
    Protocol,
    Key,
    UnknownCommand,
    ClientError,
    ServerError,
    Broken,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectFailed => "connect_failed",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Tls => "tls_handshake",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Closed => "closed",
            ErrorKind::Reset => "reset",
            ErrorKind::Io => "io",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Key => "invalid_key",
            ErrorKind::UnknownCommand => "unknown_command",
            ErrorKind::ClientError => "client_error",
            ErrorKind::ServerError => "server_error",
            ErrorKind::Broken => "broken",
        }
    }

    /// True for kinds that mean the server can't be reached or has gone away.
    pub fn is_connection(self) -> bool {
        matches!(
            self,
            ErrorKind::ConnectRefused
                | ErrorKind::ConnectFailed
                | ErrorKind::ConnectTimeout
                | ErrorKind::Tls
                | ErrorKind::Closed
                | ErrorKind::Reset
                | ErrorKind::Io
        )
    }
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        use std::io::ErrorKind as Io;
        match self {
            Error::Connect { source, .. } if source.kind() == Io::ConnectionRefused => {
                ErrorKind::ConnectRefused
            }
            Error::Connect { .. } => ErrorKind::ConnectFailed,
            Error::ConnectTimeout { .. } => ErrorKind::ConnectTimeout,
            Error::Tls { .. } => ErrorKind::Tls,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Closed => ErrorKind::Closed,
            Error::Io(e)
                if matches!(
                    e.kind(),
                    Io::ConnectionReset | Io::BrokenPipe | Io::ConnectionAborted
                ) =>
            {
                ErrorKind::Reset
            }
            Error::Io(_) => ErrorKind::Io,
            Error::Protocol(_) | Error::Unexpected { .. } => ErrorKind::Protocol,
            Error::Key(_) => ErrorKind::Key,
            Error::UnknownCommand => ErrorKind::UnknownCommand,
            Error::ClientError(_) => ErrorKind::ClientError,
            Error::ServerError(_) => ErrorKind::ServerError,
            Error::Broken(_) => ErrorKind::Broken,
        }
    }

    pub(crate) fn unexpected(command: &'static str, reply: &Response) -> Error {
        let mut reply = format!("{reply:?}");
        reply.truncate(120);
        Error::Unexpected { command, reply }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect { address, source } => {
                write!(f, "cannot connect to {address}: {source}")
            }
            Error::ConnectTimeout { address, after } => {
                write!(f, "cannot connect to {address}: no answer within {after:?}")
            }
            Error::Tls { address, reason } => {
                write!(f, "{address}: TLS handshake failed: {reason}")
            }
            Error::Timeout { after } => write!(f, "no reply within {after:?}"),
            Error::Closed => write!(f, "the server closed the connection"),
            Error::Io(e) => write!(f, "connection error: {e}"),
            Error::Protocol(e) => write!(f, "protocol error: {e}"),
            Error::Unexpected { command, reply } => {
                write!(f, "unexpected reply to {command}: {reply}")
            }
            Error::Key(e) => write!(f, "invalid key: {e}"),
            Error::UnknownCommand => write!(f, "the server does not know this command (ERROR)"),
            Error::ClientError(m) => write!(f, "CLIENT_ERROR {m}"),
            Error::ServerError(m) => write!(f, "SERVER_ERROR {m}"),
            Error::Broken(k) => write!(
                f,
                "connection unusable after an earlier {} error",
                k.as_str()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect { source, .. } => Some(source),
            Error::Io(e) => Some(e),
            Error::Protocol(e) => Some(e),
            Error::Key(e) => Some(e),
            _ => None,
        }
    }
}

impl From<KeyError> for Error {
    fn from(e: KeyError) -> Error {
        Error::Key(e)
    }
}

/// Why a run that talks to a server (a profile, a load) could not start: its spec is invalid,
/// or the server could not be reached.
#[derive(Debug)]
pub enum StartError {
    Invalid(String),
    Server(Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Invalid(m) => f.write_str(m),
            StartError::Server(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}
