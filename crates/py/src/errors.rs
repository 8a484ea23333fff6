//! The edge between Rust errors and Python's: every error becomes a class of
//! `cachelab.errors`, so Python code catches one hierarchy; addresses are parsed here too.

use pyo3::prelude::*;

use cachelab_client::{Address, Error, ErrorKind, StartError};

/// Raises the `cachelab.errors` class `name` with `msg`.
pub(crate) fn raise(py: Python<'_>, name: &str, msg: String) -> PyErr {
    match py.import("cachelab.errors").and_then(|m| m.getattr(name)) {
        Ok(cls) => PyErr::from_type(cls.cast_into().expect("an exception class"), msg),
        Err(e) => e,
    }
}

/// Maps a client error to its Python class.
pub(crate) fn client_error(py: Python<'_>, e: Error) -> PyErr {
    let class = match e.kind() {
        ErrorKind::ConnectRefused | ErrorKind::ConnectFailed | ErrorKind::ConnectTimeout => {
            "ServerUnreachable"
        }
        ErrorKind::Tls => "TlsHandshakeFailed",
        ErrorKind::Timeout => "ServerTimeout",
        ErrorKind::Closed | ErrorKind::Reset | ErrorKind::Io | ErrorKind::Broken => {
            "ConnectionClosed"
        }
        ErrorKind::Protocol => "ProtocolError",
        ErrorKind::Key => "InvalidKey",
        ErrorKind::UnknownCommand | ErrorKind::ClientError | ErrorKind::ServerError => {
            "ServerReplyError"
        }
    };
    raise(py, class, e.to_string())
}

/// Why an engine (load, profile) did not start: a spec it refuses is a UsageError, a server it
/// cannot use raises that failure's class.
pub(crate) fn start_error(py: Python<'_>, e: StartError) -> PyErr {
    match e {
        StartError::Invalid(m) => raise(py, "UsageError", m),
        StartError::Server(e) => client_error(py, e),
    }
}

pub(crate) fn parse_address(py: Python<'_>, address: &str) -> PyResult<Address> {
    address
        .parse()
        .map_err(|m: String| raise(py, "UsageError", m))
}
