use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Where a server listens: `host:port` (TCP) or a Unix socket path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    Tcp(String),
    Unix(PathBuf),
}

impl FromStr for Address {
    type Err = String;

    /// Parses `host:port`, `[v6]:port`, `unix:/path` or an absolute path.
    fn from_str(s: &str) -> Result<Address, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            return Ok(Address::Unix(PathBuf::from(path)));
        }
        if s.starts_with('/') {
            return Ok(Address::Unix(PathBuf::from(s)));
        }
        let Some((host, port)) = s.rsplit_once(':') else {
            return Err(format!(
                "server address {s:?} is not HOST:PORT or a socket path"
            ));
        };
        if host.is_empty() {
            return Err(format!("server address {s:?} has no host"));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => Ok(Address::Tcp(s.to_string())),
            _ => Err(format!("server address {s:?} has no valid port (1-65535)")),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(hp) => f.write_str(hp),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_and_unix() {
        assert_eq!(
            "127.0.0.1:11211".parse(),
            Ok(Address::Tcp("127.0.0.1:11211".into()))
        );
        assert_eq!(
            "[::1]:11211".parse(),
            Ok(Address::Tcp("[::1]:11211".into()))
        );
        assert_eq!(
            "unix:/tmp/mc.sock".parse(),
            Ok(Address::Unix("/tmp/mc.sock".into()))
        );
        assert_eq!(
            "/tmp/mc.sock".parse(),
            Ok(Address::Unix("/tmp/mc.sock".into()))
        );
        assert!("localhost".parse::<Address>().is_err());
        assert!("localhost:0".parse::<Address>().is_err());
        assert!("localhost:99999".parse::<Address>().is_err());
        assert!(":11211".parse::<Address>().is_err());
    }
}
