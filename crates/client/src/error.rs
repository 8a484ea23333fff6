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
    /// A request to `address` took longer than the request timeout. The connection is now
    /// broken.
    Timeout { address: String, after: Duration },
    /// The server closed the connection.
    Closed,
    /// A plain TCP connection to `address` was closed (or reset) before its first reply:
    /// what a TLS-only listener (memcached `-Z`) does to a client that does not speak TLS.
    /// Counted as `reset` or `closed`, as it happened.
    ClosedAtOnce { address: String, reset: bool },
    /// Reading or writing failed (e.g. connection reset).
    Io(std::io::Error),
    /// The server at `address` sent bytes that are not a valid reply; `head` is how the
    /// reply began (printable, cut short) and `first` whether it was the connection's first
    /// reply (then the server is most likely not a memcached at all).
    Protocol {
        address: String,
        error: DecodeError,
        head: String,
        first: bool,
    },
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
    /// A RESP server's error reply, its text as sent (`ERR unknown command ...`,
    /// `WRONGPASS ...`, `NOAUTH ...`). Counted as `server_error`.
    Redis(String),
    /// The RESP server at `address` sent bytes that are not RESP; as [`Error::Protocol`].
    RespProtocol {
        address: String,
        error: DecodeError,
        head: String,
        first: bool,
    },
    /// RESP3 was required but the server at `address` refused `HELLO 3` (a Redis before 6):
    /// `reply` is its error text. Counted as `server_error`.
    NoResp3 { address: String, reply: String },
    /// A Redis Cluster kept redirecting a command (`-MOVED`, `-ASK`) past the client's bound:
    /// `count` redirections for `slot`, the last one `last`. Counted as `server_error`.
    Redirections {
        command: String,
        slot: u16,
        count: u32,
        last: String,
    },
    /// `-TRYAGAIN …` from `address`: the keys of a multi-key command are split between two
    /// nodes by a slot migration in progress; retry later. Counted as `server_error`.
    TryAgain { address: String, message: String },
    /// `-CLUSTERDOWN …` from `address`: the cluster cannot serve (a slot without a master, a
    /// lost majority). Counted as `server_error`.
    ClusterDown { address: String, message: String },
    /// No master is known for `slot`: the cluster does not cover it, or announced no endpoint
    /// for its master. Counted as `server_error`.
    NoSlotOwner { slot: u16 },
    /// `address` is not a Redis Cluster node: `reply` is what it answered for its slot map.
    /// Counted as `server_error`.
    NotCluster { address: String, reply: String },
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
            Error::Closed | Error::ClosedAtOnce { reset: false, .. } => ErrorKind::Closed,
            Error::ClosedAtOnce { reset: true, .. } => ErrorKind::Reset,
            Error::Io(e)
                if matches!(
                    e.kind(),
                    Io::ConnectionReset | Io::BrokenPipe | Io::ConnectionAborted
                ) =>
            {
                ErrorKind::Reset
            }
            Error::Io(_) => ErrorKind::Io,
            Error::Protocol { .. } | Error::Unexpected { .. } | Error::RespProtocol { .. } => {
                ErrorKind::Protocol
            }
            Error::Key(_) => ErrorKind::Key,
            Error::UnknownCommand => ErrorKind::UnknownCommand,
            Error::ClientError(_) => ErrorKind::ClientError,
            Error::ServerError(_)
            | Error::Redis(_)
            | Error::NoResp3 { .. }
            | Error::Redirections { .. }
            | Error::TryAgain { .. }
            | Error::ClusterDown { .. }
            | Error::NoSlotOwner { .. }
            | Error::NotCluster { .. } => ErrorKind::ServerError,
            Error::Broken(_) => ErrorKind::Broken,
        }
    }

    /// What a plain TCP connection's first exchange with `address` failed with: a
    /// connection closed or reset before any reply becomes [`Error::ClosedAtOnce`] (which
    /// names the address and the likely cause); anything else stays as it is.
    pub fn at_first_reply(self, address: &str) -> Error {
        let reset = match &self {
            Error::Closed => false,
            Error::Io(_) if self.kind() == ErrorKind::Reset => true,
            _ => return self,
        };
        Error::ClosedAtOnce {
            address: address.to_string(),
            reset,
        }
    }

    /// A protocol error from `address`, whose reply began with `bytes`.
    pub fn protocol(address: &str, error: DecodeError, bytes: &[u8], first: bool) -> Error {
        Error::Protocol {
            address: address.to_string(),
            error,
            head: reply_head(bytes),
            first,
        }
    }

    pub(crate) fn unexpected(command: &'static str, reply: &Response) -> Error {
        Error::unexpected_reply(command, reply)
    }

    /// A valid reply that `command` cannot get (any protocol's reply, shown by `Debug`).
    /// Formats at most 120 characters: a reply may hold megabytes.
    pub(crate) fn unexpected_reply(command: &'static str, reply: &impl fmt::Debug) -> Error {
        let mut shown = Bounded(String::new(), 120);
        let _ = fmt::write(&mut shown, format_args!("{reply:?}"));
        Error::Unexpected {
            command,
            reply: shown.0,
        }
    }

    /// A RESP protocol error from `address`, whose reply began with `bytes`.
    pub fn resp_protocol(address: &str, error: DecodeError, bytes: &[u8], first: bool) -> Error {
        Error::RespProtocol {
            address: address.to_string(),
            error,
            head: reply_head(bytes),
            first,
        }
    }
}

/// A `String` that takes at most `.1` characters, then fails the formatting that fills it.
struct Bounded(String, usize);

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            if self.1 == 0 {
                return Err(fmt::Error);
            }
            self.0.push(c);
            self.1 -= 1;
        }
        Ok(())
    }
}

/// The first line of a reply (at most 60 characters), with anything unprintable escaped: what
/// a user needs to recognise the service that answered (`HTTP/1.0 400 Bad Request`).
pub fn reply_head(bytes: &[u8]) -> String {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut out = String::new();
    for &b in line.iter().take(60) {
        if b.is_ascii_graphic() || b == b' ' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if line.len() > 60 {
        out.push('…');
    }
    out
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
            Error::Timeout { address, after } => {
                write!(f, "{address}: no reply within {after:?}")
            }
            Error::Closed => write!(f, "the server closed the connection"),
            Error::ClosedAtOnce { address, .. } => write!(
                f,
                "{address} closed the connection at once: a TLS listener? try --tls"
            ),
            Error::Io(e) => write!(f, "connection error: {e}"),
            Error::Protocol {
                address,
                head,
                first: true,
                ..
            } => write!(
                f,
                "{address} is not a memcached: it answered '{head}' (memcached's text \
                 protocol was expected)"
            ),
            Error::Protocol {
                address,
                error,
                head,
                ..
            } => write!(
                f,
                "{address}: protocol error: {error} (the reply began '{head}')"
            ),
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
            Error::Redis(m) => write!(f, "the server answered: {m}"),
            Error::RespProtocol {
                address,
                error,
                head,
                first: true,
            } => write!(
                f,
                "{address} is not a Redis or Valkey: it answered '{head}' (RESP was expected; \
                 {error})"
            ),
            Error::RespProtocol {
                address,
                error,
                head,
                ..
            } => write!(
                f,
                "{address}: RESP protocol error: {error} (the reply began '{head}')"
            ),
            Error::NoResp3 { address, reply } => write!(
                f,
                "{address} does not speak RESP3: HELLO 3 was answered '{reply}' (it needs \
                 Redis 6 or later, or Valkey; RESP2 works with any)"
            ),
            Error::Redirections {
                command,
                slot,
                count,
                last,
            } => write!(
                f,
                "{command} (slot {slot}): still redirected after {count} redirections, the \
                 last '{last}': the cluster's nodes disagree on the slot's owner (a migration \
                 left half done?)"
            ),
            Error::TryAgain { address, message } => write!(
                f,
                "{address} answered '{message}': a slot migration in progress splits the \
                 command's keys between two nodes; retry later"
            ),
            Error::ClusterDown { address, message } => write!(
                f,
                "{address} answered '{message}': the cluster cannot serve (a slot without a \
                 master, or a lost majority)"
            ),
            Error::NoSlotOwner { slot } => write!(
                f,
                "no master is known for hash slot {slot}: the cluster does not cover it, or \
                 announced no endpoint for its master"
            ),
            Error::NotCluster { address, reply } => write!(
                f,
                "{address} is not a Redis Cluster node: asked for its slot map, it answered \
                 '{reply}'"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect { source, .. } => Some(source),
            Error::Io(e) => Some(e),
            Error::Protocol { error, .. } | Error::RespProtocol { error, .. } => Some(error),
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

#[cfg(test)]
mod tests {
    use super::*;
    use cachelab_proto::{Invalid, InvalidKind};

    fn invalid() -> DecodeError {
        DecodeError::Invalid(Invalid {
            kind: InvalidKind::BareNewline,
            offset: 15,
        })
    }

    #[test]
    fn reply_head_is_the_first_line_printable_and_short() {
        assert_eq!(
            reply_head(b"HTTP/1.0 400 Bad Request\r\nServer: x\r\n"),
            "HTTP/1.0 400 Bad Request"
        );
        assert_eq!(reply_head(b"\x00\xffab\n"), "\\x00\\xffab");
        let long = [b'a'; 100];
        assert_eq!(reply_head(&long), format!("{}…", "a".repeat(60)));
    }

    #[test]
    fn a_connection_closed_before_its_first_reply_names_the_address_and_tls() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let e = Error::Io(reset).at_first_reply("127.0.0.1:11211");
        assert_eq!(
            e.to_string(),
            "127.0.0.1:11211 closed the connection at once: a TLS listener? try --tls"
        );
        assert_eq!(e.kind(), ErrorKind::Reset);
        assert_eq!(
            Error::Closed.at_first_reply("h:1").kind(),
            ErrorKind::Closed
        );
        // Other failures are left as they are.
        let e = Error::Timeout {
            address: "h:1".into(),
            after: Duration::from_secs(1),
        };
        assert_eq!(e.at_first_reply("h:1").kind(), ErrorKind::Timeout);
    }

    #[test]
    fn an_unexpected_reply_is_shown_cut_short() {
        let big = vec![7u8; 1 << 20];
        let Error::Unexpected { command, reply } = Error::unexpected_reply("GET", &big) else {
            panic!()
        };
        assert_eq!(command, "GET");
        assert_eq!(reply.chars().count(), 120);
        assert!(reply.starts_with("[7, 7, "), "{reply}");
    }

    #[test]
    fn a_resp_reply_that_is_not_resp_names_the_address_and_why() {
        let later = Error::resp_protocol("h:6379", invalid(), b"+OK\n", false);
        assert_eq!(
            later.to_string(),
            format!(
                "h:6379: RESP protocol error: {} (the reply began '+OK')",
                invalid()
            )
        );
        assert_eq!(later.kind(), ErrorKind::Protocol);
        let e = Error::Redis("WRONGPASS invalid username-password pair".into());
        assert_eq!(
            e.to_string(),
            "the server answered: WRONGPASS invalid username-password pair"
        );
        assert_eq!(e.kind(), ErrorKind::ServerError);
    }

    #[test]
    fn a_first_reply_that_is_not_memcached_names_the_address_and_what_it_said() {
        let e = Error::protocol("127.0.0.1:8080", invalid(), b"HTTP/1.0 400 Bad\n", true);
        assert_eq!(
            e.to_string(),
            "127.0.0.1:8080 is not a memcached: it answered 'HTTP/1.0 400 Bad' (memcached's \
             text protocol was expected)"
        );
        assert_eq!(e.kind(), ErrorKind::Protocol);
        let later = Error::protocol("127.0.0.1:8080", invalid(), b"VALUE k\n", false);
        assert_eq!(
            later.to_string(),
            format!(
                "127.0.0.1:8080: protocol error: {} (the reply began 'VALUE k')",
                invalid()
            )
        );
    }
}
