//! The edge between Rust errors and Python's: every error becomes a class of
//! `cachelab.errors`, so Python code catches one hierarchy; addresses are parsed here too.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt};

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

/// Field `name` of a spec dict built by Python (`what` names the spec in the message):
/// a missing field or one of the wrong type is a UsageError naming it, and an integer that
/// does not fit the field's Rust type (a TOML `seed = -1`) says the range it takes.
pub(crate) fn field<'py, T: for<'a> FromPyObject<'a, 'py>>(
    d: &Bound<'py, PyDict>,
    what: &str,
    name: &str,
) -> PyResult<T> {
    let py = d.py();
    let v = d
        .get_item(name)?
        .ok_or_else(|| raise(py, "UsageError", format!("{what} spec is missing {name:?}")))?;
    v.extract::<T>().map_err(|_| {
        let msg = match int_range(std::any::type_name::<T>()) {
            Some((lo, hi)) if v.is_instance_of::<PyInt>() => format!(
                "{what} spec field {name:?} is {v}, which does not fit: \
                 it takes an integer from {lo} to {hi}"
            ),
            _ => format!("{what} spec field {name:?} has the wrong type"),
        };
        raise(py, "UsageError", msg)
    })
}

/// The range of the one integer type in a Rust type's name (`u32`,
/// `core::option::Option<usize>`), or None when it names none or several.
fn int_range(type_name: &str) -> Option<(String, String)> {
    macro_rules! range_of {
        ($token:expr; $($int:ident),*) => {
            match $token {
                $(stringify!($int) => Some((<$int>::MIN.to_string(), <$int>::MAX.to_string())),)*
                _ => None,
            }
        };
    }
    let mut found = type_name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(|t| range_of!(t; u8, u16, u32, u64, usize, i8, i16, i32, i64, isize));
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::int_range;

    #[test]
    fn the_range_of_the_one_integer_type_in_a_name() {
        let u32_range = Some(("0".to_string(), "4294967295".to_string()));
        assert_eq!(int_range(std::any::type_name::<u32>()), u32_range);
        assert_eq!(int_range(std::any::type_name::<Option<u32>>()), u32_range);
        assert_eq!(
            int_range("i64"),
            Some((i64::MIN.to_string(), i64::MAX.to_string()))
        );
        assert_eq!(int_range(std::any::type_name::<(String, Vec<f64>)>()), None);
        assert_eq!(int_range(std::any::type_name::<(u8, u64)>()), None);
    }
}
