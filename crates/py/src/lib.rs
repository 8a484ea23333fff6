//! `cachelab._core`: thin Python bindings over the core crates.
//!
//! Inputs are copied into Rust values before the GIL is released; long work (a profile run,
//! any network wait) runs detached from the interpreter. Errors become the classes in
//! `cachelab.errors`, so Python code catches one hierarchy (`errors.rs`). Results come back
//! through one conversion (`convert.rs`: serde-derived field names become dict keys), so a
//! field is named once, in the core crate's type; specs go the other way through one too
//! (`spec.rs`: a dict deserialized into the engine's `Spec`).
//!
//! One file per core crate or area, each registering its own names: `client.rs` (the blocking
//! client), `aio.rs` (the asyncio client), `hist.rs` (histograms), `profile.rs`, `load.rs`,
//! `request.rs` (request-level simulation), `flat.rs` (miss-ratio simulation), `usl.rs`,
//! `pool.rs` (key -> server distributions), `capture.rs` (the capture reader); `tls.rs` reads
//! TLS settings.

use pyo3::prelude::*;

mod aio;
mod capture;
mod client;
mod convert;
mod errors;
mod flat;
mod hist;
mod load;
mod pool;
mod profile;
mod request;
mod resp;
mod spec;
mod tls;
mod usl;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    client::register(m)?;
    aio::register(m)?;
    capture::register(m)?;
    profile::register(m)?;
    hist::register(m)?;
    flat::register(m)?;
    load::register(m)?;
    request::register(m)?;
    usl::register(m)?;
    pool::register(m)?;
    resp::register(m)?;
    Ok(())
}
