//! What a RESP connection sends before its requests, as an engine's spec gives it
//! ([`RespLogin`]: `AUTH [user] password`, `SELECT db`). From Python: `{"user", "password",
//! "db"}`, each optional; the load and profile engines' specs both take it.

use serde::Deserialize;

use cachelab_proto::resp::encode_command;

use super::{Auth, Secret};

/// What a RESP connection sends before its requests: `AUTH [user] password`, `SELECT db`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RespLogin {
    pub user: Option<String>,
    pub password: Option<Password>,
    pub db: Option<u32>,
}

/// A password that never shows (`Debug` prints `<secret>`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub struct Password(pub Secret);

impl From<String> for Password {
    fn from(s: String) -> Password {
        Password(Secret::new(s))
    }
}

impl RespLogin {
    /// The client's credentials, when a password is given.
    pub fn auth(&self) -> Option<Auth> {
        self.password.as_ref().map(|p| Auth {
            user: self.user.clone(),
            password: p.0.clone(),
        })
    }

    /// The handshake's commands, encoded (`AUTH`, `SELECT`), and how many replies they get:
    /// for an engine that writes its own requests.
    pub fn handshake(&self) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut n = 0;
        if let Some(a) = self.auth() {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(u) = &a.user {
                args.push(u.as_bytes());
            }
            args.push(a.password.expose().as_bytes());
            encode_command(&args, &mut out);
            n += 1;
        }
        if let Some(db) = self.db {
            encode_command(&[b"SELECT".as_slice(), db.to_string().as_bytes()], &mut out);
            n += 1;
        }
        (out, n)
    }
}
