//! The loopback floor's request: the smallest request/response the server knows. The profile
//! sends it on the measuring connection, through the same client as every sample
//! ([`FloorRequest::command`]); the raw blocking socket here ([`Floor`]) finds which request
//! that is ([`probe`]) and times new connections ([`connection_cost`]).
//!
//! Through a proxy (twemproxy) the floor is a `get` of a key never written: the proxy closes
//! the connection on `mn`, and answers `version` from one server, but a get crosses the proxy
//! to the server its key hashes to and back, as every sample does ([`FloorRequest::miss`]).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use cachelab_client::rustls::{ClientConnection, StreamOwned};
use cachelab_client::tls::handshake_reason;
use cachelab_client::{Address, Error, Options, Tls};
use cachelab_metrics::Latency;
use cachelab_proto::{Command, Key, MetaStatus, Response};

enum Raw {
    Tcp(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
    Unix(UnixStream),
}

/// The TLS handshake on a blocking socket, each wait bounded by the connect timeout.
fn shake_hands(
    tls: &Tls,
    address: &Address,
    mut tcp: TcpStream,
    options: &Options,
) -> Result<Raw, Error> {
    let fail = |reason: String| Error::Tls {
        address: address.to_string(),
        reason,
    };
    let mut session = ClientConnection::new(tls.config(), tls.server_name(address)?)
        .map_err(|e| fail(e.to_string()))?;
    tcp.set_read_timeout(Some(options.connect_timeout))
        .map_err(Error::Io)?;
    tcp.set_write_timeout(Some(options.connect_timeout))
        .map_err(Error::Io)?;
    let deadline = Instant::now() + options.connect_timeout;
    while session.is_handshaking() {
        if Instant::now() >= deadline {
            return Err(fail(format!(
                "no answer within {:?} (is the server a TLS listener, memcached -Z?)",
                options.connect_timeout
            )));
        }
        match session.complete_io(&mut tcp) {
            Ok((0, 0)) if session.is_handshaking() => {
                return Err(fail(
                    "the server closed the connection during the handshake".into(),
                ))
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(fail(format!(
                    "no answer within {:?} (is the server a TLS listener, memcached -Z?)",
                    options.connect_timeout
                )))
            }
            Err(e) => return Err(fail(handshake_reason(&e))),
        }
    }
    tcp.set_read_timeout(Some(options.request_timeout))
        .map_err(Error::Io)?;
    tcp.set_write_timeout(Some(options.request_timeout))
        .map_err(Error::Io)?;
    Ok(Raw::Tls(Box::new(StreamOwned::new(session, tcp))))
}

/// The floor's request: its bytes, and its name in the record (`floor_command`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloorRequest {
    /// `"mn"`, `"version"`, `"get-miss"` or, over RESP, `"PING"` (`"GET-miss"` through a
    /// proxy).
    pub name: &'static str,
    bytes: Vec<u8>,
    /// The memcached command (None for RESP's `PING`, which the RESP client sends).
    command: Option<Command>,
}

impl FloorRequest {
    /// The meta no-op, `mn` (answered `MN`).
    pub fn mn() -> FloorRequest {
        FloorRequest {
            name: "mn",
            bytes: b"mn\r\n".to_vec(),
            command: Some(Command::MetaNoop),
        }
    }

    /// `version`, for a server without the meta protocol.
    pub fn version() -> FloorRequest {
        FloorRequest {
            name: "version",
            bytes: b"version\r\n".to_vec(),
            command: Some(Command::Version),
        }
    }

    /// `get <prefix>:floor`, a key the run never writes (answered `END`): through a proxy,
    /// the smallest request that reaches a server behind it.
    pub fn miss(prefix: &str) -> FloorRequest {
        let key = Key::new(miss_key(prefix)).expect("prefix validated");
        FloorRequest {
            name: "get-miss",
            bytes: format!("get {}\r\n", miss_key(prefix)).into_bytes(),
            command: Some(Command::Get(vec![key])),
        }
    }

    /// RESP's `GET <prefix>:floor`, a key the run never writes (answered with a null):
    /// through twemproxy in redis mode, which answers `PING` itself, the smallest request
    /// that reaches a server behind it. Sent by the RESP client (`bytes` are for the record).
    pub fn resp_miss(prefix: &str) -> FloorRequest {
        let key = Key::new(miss_key(prefix)).expect("prefix validated");
        let k = miss_key(prefix);
        FloorRequest {
            name: "GET-miss",
            bytes: format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len()).into_bytes(),
            command: Some(Command::Get(vec![key])),
        }
    }

    /// RESP's `PING` (answered `+PONG`): a round trip that does nothing on the server.
    pub fn ping() -> FloorRequest {
        FloorRequest {
            name: "PING",
            bytes: b"*1\r\n$4\r\nPING\r\n".to_vec(),
            command: None,
        }
    }

    /// The memcached request as the client sends it, on the measuring connection (None for
    /// RESP's `PING`).
    pub fn command(&self) -> Option<&Command> {
        self.command.as_ref()
    }

    /// Whether `reply` is this request's answer: `MN`, `VERSION …`, or `END` (no value).
    pub fn answered(&self, reply: &Response) -> bool {
        match (&self.command, reply) {
            (Some(Command::MetaNoop), Response::Meta { status, .. }) => *status == MetaStatus::Mn,
            (Some(Command::Version), Response::Version(_)) => true,
            (Some(Command::Get(_)), Response::Values(values)) => values.is_empty(),
            _ => false,
        }
    }
}

/// The key the run never writes, `<prefix>:floor`: the floor's `get-miss` reads it, and so
/// does every other read meant to miss (the multi-get rounds' untimed primer), so that
/// through a proxy every miss of the run lands on the one server behind it that this key
/// maps to (docs/pools.md).
pub fn miss_key(prefix: &str) -> String {
    format!("{prefix}:floor")
}

/// A raw connection that times one minimal round trip.
pub struct Floor {
    raw: Raw,
    request: Vec<u8>,
    buf: Vec<u8>,
    /// The address and request timeout, for errors that name them.
    at: At,
}

/// Where a floor connection goes and how long a reply may take, for its errors.
struct At {
    address: String,
    timeout: Duration,
}

impl Floor {
    pub fn connect(
        address: &Address,
        options: &Options,
        request: &FloorRequest,
    ) -> Result<Floor, Error> {
        let err = |source| Error::Connect {
            address: address.to_string(),
            source,
        };
        let raw = match address {
            Address::Tcp(hp) => {
                let addr = std::net::ToSocketAddrs::to_socket_addrs(hp.as_str())
                    .map_err(err)?
                    .next()
                    .ok_or_else(|| err(std::io::Error::other("no address")))?;
                if let Some(tls) = &options.tls {
                    tls.server_name(address)?;
                }
                let s = TcpStream::connect_timeout(&addr, options.connect_timeout).map_err(err)?;
                s.set_nodelay(true).map_err(Error::Io)?;
                match &options.tls {
                    Some(tls) => shake_hands(tls, address, s, options)?,
                    None => {
                        s.set_read_timeout(Some(options.request_timeout))
                            .map_err(Error::Io)?;
                        s.set_write_timeout(Some(options.request_timeout))
                            .map_err(Error::Io)?;
                        Raw::Tcp(s)
                    }
                }
            }
            Address::Unix(_) if options.tls.is_some() => {
                return Err(Error::Tls {
                    address: address.to_string(),
                    reason: "TLS over a Unix socket is not supported".into(),
                })
            }
            Address::Unix(p) => {
                let s = UnixStream::connect(p).map_err(err)?;
                s.set_read_timeout(Some(options.request_timeout))
                    .map_err(Error::Io)?;
                s.set_write_timeout(Some(options.request_timeout))
                    .map_err(Error::Io)?;
                Raw::Unix(s)
            }
        };
        Ok(Floor {
            raw,
            request: request.bytes.clone(),
            buf: Vec::with_capacity(256),
            at: At {
                address: address.to_string(),
                timeout: options.request_timeout,
            },
        })
    }

    /// One round trip; returns the reply line (without `\r\n`) and the time it took.
    pub fn round_trip(&mut self) -> Result<(Vec<u8>, Duration), Error> {
        let took = self.measure()?;
        Ok((self.buf[..self.buf.len() - 2].to_vec(), took))
    }

    /// One timed round trip.
    pub fn measure(&mut self) -> Result<Duration, Error> {
        let t0 = Instant::now();
        match &mut self.raw {
            Raw::Tcp(s) => exchange(s, &self.request, &mut self.buf, &self.at)?,
            Raw::Tls(s) => exchange(s.as_mut(), &self.request, &mut self.buf, &self.at)?,
            Raw::Unix(s) => exchange(s, &self.request, &mut self.buf, &self.at)?,
        }
        Ok(t0.elapsed())
    }
}

fn io_error(e: std::io::Error, at: &At) -> Error {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Error::Timeout {
            address: at.address.clone(),
            after: at.timeout,
        },
        _ => Error::Io(e),
    }
}

/// Writes `request` and reads one `\r\n`-terminated line into `buf`.
fn exchange<S: Read + Write>(
    s: &mut S,
    request: &[u8],
    buf: &mut Vec<u8>,
    at: &At,
) -> Result<(), Error> {
    let io_error = |e| io_error(e, at);
    s.write_all(request).map_err(io_error)?;
    s.flush().map_err(io_error)?;
    buf.clear();
    let mut chunk = [0u8; 256];
    loop {
        let n = match s.read(&mut chunk) {
            // A signal (Ctrl-C, handled by Python) landing on this thread: read again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.map_err(io_error)?,
        };
        if n == 0 {
            return Err(Error::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.ends_with(b"\r\n") {
            return Ok(());
        }
        if buf.len() > 1024 {
            return Err(Error::Unexpected {
                command: "floor",
                reply: String::from_utf8_lossy(buf).into(),
            });
        }
    }
}

/// Finds the minimal command this server answers: `mn` if it speaks the meta protocol,
/// else `version`; through a proxy (`miss`: the run's key prefix), a get of a key never
/// written, which must be answered `END`.
pub fn probe(
    address: &Address,
    options: &Options,
    miss: Option<&str>,
) -> Result<FloorRequest, Error> {
    if let Some(prefix) = miss {
        let request = FloorRequest::miss(prefix);
        let (reply, _) = Floor::connect(address, options, &request)?.round_trip()?;
        return if reply == b"END" {
            Ok(request)
        } else {
            Err(unknown_reply(address, &reply))
        };
    }
    let mut f = Floor::connect(address, options, &FloorRequest::mn())?;
    let (reply, _) = f.round_trip()?;
    match &reply[..] {
        b"MN" => Ok(FloorRequest::mn()),
        _ => {
            let request = FloorRequest::version();
            let mut f = Floor::connect(address, options, &request)?;
            let (reply, _) = f.round_trip()?;
            if !reply.starts_with(b"VERSION ") {
                return Err(unknown_reply(address, &reply));
            }
            Ok(request)
        }
    }
}

/// A floor reply that is not the one expected.
fn unknown_reply(address: &Address, reply: &[u8]) -> Error {
    let invalid = cachelab_proto::Invalid {
        kind: cachelab_proto::InvalidKind::UnknownReply,
        offset: 0,
    };
    Error::protocol(
        &address.to_string(),
        cachelab_proto::DecodeError::Invalid(invalid),
        reply,
        true,
    )
}

/// The cost of a new connection: for each of `n` connections, the time from connecting to
/// the first reply of `request` (TCP connect, the TLS handshake when `options` has TLS, and
/// one round trip), in ns. Each connection is closed before the next is opened.
pub fn connection_cost(
    address: &Address,
    options: &Options,
    request: &FloorRequest,
    n: u64,
) -> Result<Latency, Error> {
    let mut hist = cachelab_metrics::latency();
    for _ in 0..n {
        let t0 = Instant::now();
        let mut f = Floor::connect(address, options, request)?;
        f.measure()?;
        cachelab_metrics::record(&mut hist, t0.elapsed().as_nanos() as u64);
    }
    Ok(hist)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resp_miss_is_a_get_of_the_key_never_written_as_resp_encodes_it() {
        let r = FloorRequest::resp_miss("{cachelab:ab-0}r0");
        let mut want = Vec::new();
        cachelab_proto::resp::encode_command(&["GET", "{cachelab:ab-0}r0:floor"], &mut want);
        assert_eq!(r.bytes, want);
        assert_eq!(r.name, "GET-miss");
        assert!(
            matches!(r.command(), Some(Command::Get(k)) if k[0].as_bytes() == b"{cachelab:ab-0}r0:floor")
        );
    }
}
