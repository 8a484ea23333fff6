//! Credentials that never show, and `redis://` / `rediss://` server URLs.
//!
//! The URL parser lives here rather than in [`crate::spec`]: that module holds the ranges and
//! deserializers the engines' specs share, and has no type for a server; an [`Address`] is
//! `host:port` or a socket path, which a URL's scheme, credentials and database do not fit.

use std::fmt;
use std::str::FromStr;

use percent_encoding::percent_decode_str;

use crate::{Address, Options, Tls, TlsConfig};

/// A password. `Debug` and `Display` show `<secret>`; only [`Secret::expose`] gives the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The password itself, to put on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// `AUTH`'s credentials: a password (the `default` user), or an ACL user and its password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub user: Option<String>,
    pub password: Secret,
}

impl Auth {
    pub fn password(password: impl Into<String>) -> Auth {
        Auth {
            user: None,
            password: Secret::new(password),
        }
    }

    pub fn user(user: impl Into<String>, password: impl Into<String>) -> Auth {
        Auth {
            user: Some(user.into()),
            password: Secret::new(password),
        }
    }
}

/// A parsed `redis://[user:password@]host[:port][/db]` (or `rediss://`, over TLS) URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RespUrl {
    pub address: Address,
    /// `rediss://`: TLS.
    pub tls: bool,
    pub auth: Option<Auth>,
    /// The database to `SELECT`; None when the URL has no path.
    pub db: Option<u32>,
}

/// Redis's port, when a URL gives none.
pub const DEFAULT_PORT: u16 = 6379;

impl RespUrl {
    /// `options` with TLS on for `rediss://`: the given TLS settings, else the defaults
    /// (verified against the Mozilla roots). A `redis://` URL leaves them as they are.
    pub fn options(&self, mut options: Options) -> Result<Options, String> {
        if self.tls && options.tls.is_none() {
            options.tls = Some(Tls::new(&TlsConfig::default())?);
        }
        Ok(options)
    }
}

/// The URL with its password, if any, replaced by `***`: what an error may show.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split_once(':').map_or("", |(u, _)| u);
            format!("{scheme}://{user}:***{}", &rest[at..])
        }
        None => url.to_string(),
    }
}

impl FromStr for RespUrl {
    type Err = String;

    fn from_str(url: &str) -> Result<RespUrl, String> {
        let refuse = |why: &str| format!("server URL {}: {why}", redact(url));
        let (tls, rest) = if let Some(r) = url.strip_prefix("redis://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("rediss://") {
            (true, r)
        } else {
            return Err(refuse("not redis://… or rediss://…"));
        };
        if rest.contains(['?', '#']) {
            return Err(refuse("query strings and fragments are not supported"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let decode = |s: &str, what: &str| {
            percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| refuse(&format!("the {what} is not UTF-8 once decoded")))
        };
        let auth = match userinfo {
            None => None,
            Some(info) => {
                let Some((user, password)) = info.split_once(':') else {
                    return Err(refuse(
                        "a user needs a password (redis://user:password@host, or \
                         redis://:password@host for the default user)",
                    ));
                };
                let password = decode(password, "password")?;
                let user = decode(user, "user")?;
                Some(Auth {
                    user: (!user.is_empty()).then_some(user),
                    password: Secret::new(password),
                })
            }
        };
        if hostport.is_empty() {
            return Err(refuse("no host"));
        }
        let bracketed = hostport.starts_with('[');
        let has_port = match hostport.rfind(':') {
            Some(i) => !bracketed || hostport[..i].ends_with(']'),
            None => false,
        };
        let hostport = if has_port {
            hostport.to_string()
        } else {
            format!("{hostport}:{DEFAULT_PORT}")
        };
        let address = Address::from_str(&hostport).map_err(|e| refuse(&e))?;
        let db = match path {
            None | Some("") => None,
            Some(p) => Some(
                p.parse::<u32>()
                    .map_err(|_| refuse(&format!("database {p:?} is not a number")))?,
            ),
        };
        Ok(RespUrl {
            address,
            tls,
            auth,
            db,
        })
    }
}

impl fmt::Display for RespUrl {
    /// The URL back, its password as `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", if self.tls { "rediss" } else { "redis" })?;
        if let Some(a) = &self.auth {
            write!(f, "{}:***@", a.user.as_deref().unwrap_or(""))?;
        }
        write!(f, "{}", self.address)?;
        if let Some(db) = self.db {
            write!(f, "/{db}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> RespUrl {
        s.parse().unwrap()
    }

    #[test]
    fn parses_the_forms_redis_cli_and_memtier_take() {
        let u = url("redis://127.0.0.1:6380");
        assert_eq!(u.address, Address::Tcp("127.0.0.1:6380".into()));
        assert_eq!((u.tls, u.auth, u.db), (false, None, None));
        let u = url("rediss://alice:p%40ss:word@cache.example:6390/3");
        assert!(u.tls);
        assert_eq!(u.auth, Some(Auth::user("alice", "p@ss:word")));
        assert_eq!(u.db, Some(3));
        assert_eq!(u.address, Address::Tcp("cache.example:6390".into()));
        let u = url("redis://:secret@localhost/0");
        assert_eq!(u.auth, Some(Auth::password("secret")));
        assert_eq!(u.address, Address::Tcp("localhost:6379".into()));
        assert_eq!(
            url("redis://[::1]").address,
            Address::Tcp("[::1]:6379".into())
        );
        assert_eq!(
            url("redis://[::1]:7000/").address,
            Address::Tcp("[::1]:7000".into())
        );
    }

    #[test]
    fn refusals_name_the_url_without_its_password() {
        for (bad, why) in [
            ("http://h:1", "not redis://"),
            ("redis://alice@h:1", "a user needs a password"),
            ("redis://:hunter2@h:1/x", "database \"x\" is not a number"),
            ("redis://:hunter2@h:0", "no valid port"),
            ("redis://:hunter2@", "no host"),
            ("redis://:hunter2@h:1?timeout=1", "query strings"),
        ] {
            let e = bad.parse::<RespUrl>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn secrets_never_show() {
        let u = url("redis://bob:hunter2@h:1/2");
        assert_eq!(u.to_string(), "redis://bob:***@h:1/2");
        assert!(!format!("{u:?}").contains("hunter2"));
        assert_eq!(u.auth.as_ref().unwrap().password.expose(), "hunter2");
        assert_eq!(redact("rediss://:pw@h:1/0"), "rediss://:***@h:1/0");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }
}
