//! The one way results cross into Python: [`to_py`] turns any [`serde::Serialize`] value into
//! plain Python objects.
//!
//! The core crates say what a result looks like once, as Rust types that implement
//! `Serialize` (`cachelab_load::Outcome`, `cachelab_profile::Outcome`,
//! `cachelab_usl::FitRecord`, …); the bindings build no dicts by hand. The mapping is JSON's,
//! so the objects Python receives are those it would get from `json.loads` of the same value,
//! save that floats keep their infinities and NaNs:
//!
//! | serde                                   | Python                             |
//! |-----------------------------------------|------------------------------------|
//! | bool                                    | `bool`                             |
//! | integers                                | `int`                              |
//! | `f32`, `f64`                            | `float` (`inf` and `nan` kept)     |
//! | `char`, `str`, unit variant             | `str` (a variant by its name)      |
//! | bytes                                   | `bytes`                            |
//! | `None`, `()`, unit struct               | `None`                             |
//! | `Some(v)`, newtype struct               | `v`                                |
//! | sequence, tuple, array, tuple struct    | `list`                             |
//! | map, struct                             | `dict`, keys in serialization order |
//! | newtype, tuple and struct variants      | `{variant: value}` (serde's default) |
//!
//! A struct's `#[serde(rename)]`, `#[serde(flatten)]` and `skip` attributes apply as usual.

use std::fmt;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use pyo3::IntoPyObjectExt;
use serde::ser::{self, Serialize};

/// `value` as Python objects (see the module docs for the mapping).
pub(crate) fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    value.serialize(ToPy(py)).map_err(|e| e.0)
}

/// A Python exception raised while converting, or a serializer's own complaint.
#[derive(Debug)]
struct Error(PyErr);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error(PyValueError::new_err(msg.to_string()))
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Error {
        Error(e)
    }
}

type Out<'py> = Result<Bound<'py, PyAny>, Error>;

/// The serializer: each call makes one Python object.
#[derive(Clone, Copy)]
struct ToPy<'py>(Python<'py>);

impl<'py> ToPy<'py> {
    fn scalar<T: IntoPyObject<'py>>(self, v: T) -> Out<'py> {
        Ok(v.into_bound_py_any(self.0)?)
    }

    fn none(self) -> Out<'py> {
        Ok(self.0.None().into_bound(self.0))
    }

    /// `{variant: value}`.
    fn tagged(self, variant: &'static str, value: Bound<'py, PyAny>) -> Out<'py> {
        let d = PyDict::new(self.0);
        d.set_item(variant, value)?;
        Ok(d.into_any())
    }
}

impl<'py> ser::Serializer for ToPy<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = List<'py>;
    type SerializeTuple = List<'py>;
    type SerializeTupleStruct = List<'py>;
    type SerializeTupleVariant = Tagged<List<'py>>;
    type SerializeMap = Dict<'py>;
    type SerializeStruct = Dict<'py>;
    type SerializeStructVariant = Tagged<Dict<'py>>;

    fn serialize_bool(self, v: bool) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_i8(self, v: i8) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_i16(self, v: i16) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_i32(self, v: i32) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_i64(self, v: i64) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_i128(self, v: i128) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_u8(self, v: u8) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_u16(self, v: u16) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_u32(self, v: u32) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_u64(self, v: u64) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_u128(self, v: u128) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_f32(self, v: f32) -> Out<'py> {
        self.scalar(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_char(self, v: char) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_str(self, v: &str) -> Out<'py> {
        self.scalar(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Out<'py> {
        Ok(PyBytes::new(self.0, v).into_any())
    }
    fn serialize_none(self) -> Out<'py> {
        self.none()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Out<'py> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Out<'py> {
        self.none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Out<'py> {
        self.none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
    ) -> Out<'py> {
        self.scalar(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Out<'py> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        value: &T,
    ) -> Out<'py> {
        self.tagged(variant, value.serialize(self)?)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<List<'py>, Error> {
        Ok(List {
            to: self,
            items: Vec::with_capacity(len.unwrap_or(0)),
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<List<'py>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<List<'py>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Tagged<List<'py>>, Error> {
        Ok(Tagged {
            variant,
            inner: self.serialize_seq(Some(len))?,
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Dict<'py>, Error> {
        Ok(Dict {
            to: self,
            dict: PyDict::new(self.0),
            key: None,
        })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Dict<'py>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Tagged<Dict<'py>>, Error> {
        Ok(Tagged {
            variant,
            inner: self.serialize_map(Some(len))?,
        })
    }
}

/// A sequence on its way to a `list`.
struct List<'py> {
    to: ToPy<'py>,
    items: Vec<Bound<'py, PyAny>>,
}

impl<'py> List<'py> {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.items.push(value.serialize(self.to)?);
        Ok(())
    }

    fn done(self) -> Out<'py> {
        Ok(PyList::new(self.to.0, self.items)?.into_any())
    }
}

/// A sequence, a tuple and a tuple struct all become a `list`, element by element.
macro_rules! into_list {
    ($trait:ident, $method:ident) => {
        impl<'py> ser::$trait for List<'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.push(value)
            }
            fn end(self) -> Out<'py> {
                self.done()
            }
        }
    };
}

into_list!(SerializeSeq, serialize_element);
into_list!(SerializeTuple, serialize_element);
into_list!(SerializeTupleStruct, serialize_field);

/// A map or a struct on its way to a `dict`.
struct Dict<'py> {
    to: ToPy<'py>,
    dict: Bound<'py, PyDict>,
    /// A key given by `serialize_key`, waiting for its value.
    key: Option<Bound<'py, PyAny>>,
}

impl<'py> Dict<'py> {
    fn done(self) -> Out<'py> {
        Ok(self.dict.into_any())
    }
}

impl<'py> ser::SerializeMap for Dict<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(key.serialize(self.to)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| <Error as ser::Error>::custom("a map value without its key"))?;
        self.dict.set_item(key, value.serialize(self.to)?)?;
        Ok(())
    }
    fn end(self) -> Out<'py> {
        self.done()
    }
}

impl<'py> ser::SerializeStruct for Dict<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.dict.set_item(name, value.serialize(self.to)?)?;
        Ok(())
    }
    fn end(self) -> Out<'py> {
        self.done()
    }
}

/// A variant with contents: `{variant: contents}`.
struct Tagged<T> {
    variant: &'static str,
    inner: T,
}

impl<'py> ser::SerializeTupleVariant for Tagged<List<'py>> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.inner.push(value)
    }
    fn end(self) -> Out<'py> {
        let to = self.inner.to;
        to.tagged(self.variant, self.inner.done()?)
    }
}

impl<'py> ser::SerializeStructVariant for Tagged<Dict<'py>> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(&mut self.inner, name, value)
    }
    fn end(self) -> Out<'py> {
        let to = self.inner.to;
        to.tagged(self.variant, self.inner.done()?)
    }
}
