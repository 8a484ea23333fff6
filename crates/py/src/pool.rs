//! `Distribution`: which server of a pool holds a key (ketama, rendezvous, modula), and
//! `parse_server` for `host:port[:weight]`.

use pyo3::prelude::*;

use cachelab_client::pool::{Distribution as Map, Kind, PoolError, Server};

use crate::errors::raise;

fn usage(py: Python<'_>, e: PoolError) -> PyErr {
    raise(py, "UsageError", e.to_string())
}

fn key_bytes(k: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = k.extract::<String>() {
        Ok(s.into_bytes())
    } else {
        k.extract::<Vec<u8>>()
    }
}

/// Parses `host:port[:weight]` (IPv6 hosts in brackets) into `(host, port, weight)`.
/// Raises UsageError naming the spec.
#[pyfunction]
fn parse_server(py: Python<'_>, spec: &str) -> PyResult<(String, u16, u32)> {
    let s = Server::parse(spec).map_err(|e| usage(py, e))?;
    Ok((s.host, s.port, s.weight))
}

/// A pool's key -> server map: `Distribution("ketama", ["10.0.0.1:11211:2", ...])`.
#[pyclass(module = "cachelab._core", frozen)]
struct Distribution {
    map: Map,
}

#[pymethods]
impl Distribution {
    #[new]
    fn new(py: Python<'_>, kind: &str, servers: Vec<String>) -> PyResult<Self> {
        let kind = Kind::parse(kind).map_err(|e| usage(py, e))?;
        let servers = servers
            .iter()
            .map(|s| Server::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| usage(py, e))?;
        let map = Map::new(kind, servers).map_err(|e| usage(py, e))?;
        Ok(Distribution { map })
    }

    /// The distribution's name.
    #[getter]
    fn kind(&self) -> &'static str {
        self.map.kind().name()
    }

    /// The servers as `(host, port, weight)`, in the order given.
    #[getter]
    fn servers(&self) -> Vec<(String, u16, u32)> {
        self.map
            .servers()
            .iter()
            .map(|s| (s.host.clone(), s.port, s.weight))
            .collect()
    }

    /// Ketama's points on the continuum per server (empty for the other kinds).
    #[getter]
    fn points(&self) -> Vec<usize> {
        self.map.points()
    }

    /// The index of the server that holds `key` (str or bytes).
    fn server_for(&self, key: &Bound<'_, PyAny>) -> PyResult<usize> {
        Ok(self.map.server_for(&key_bytes(key)?))
    }

    /// `server_for` of each key, in one call.
    fn servers_for(&self, py: Python<'_>, keys: Vec<Bound<'_, PyAny>>) -> PyResult<Vec<usize>> {
        let keys = keys.iter().map(key_bytes).collect::<PyResult<Vec<_>>>()?;
        let map = &self.map;
        Ok(py.detach(|| keys.iter().map(|k| map.server_for(k)).collect()))
    }

    /// How many of the keys `<prefix>:0` .. `<prefix>:<n-1>` (a load run's key space) each
    /// server holds, in the servers' order. Above `sample` keys, every `n / sample`-th key is
    /// counted and the counts scaled to `n` (they still add up to `n`).
    #[pyo3(signature = (prefix, n, sample = 1_000_000))]
    fn key_counts(&self, py: Python<'_>, prefix: &str, n: u64, sample: u64) -> Vec<u64> {
        let map = &self.map;
        py.detach(|| {
            let stride = n.div_ceil(sample.max(1)).max(1);
            let mut counts = vec![0u64; map.servers().len()];
            let mut key = String::with_capacity(prefix.len() + 24);
            let mut i = 0;
            while i < n {
                key.clear();
                key.push_str(prefix);
                key.push(':');
                key.push_str(&i.to_string());
                counts[map.server_for(key.as_bytes())] += 1;
                i += stride;
            }
            if stride > 1 {
                let counted: u64 = counts.iter().sum();
                let mut scaled: Vec<u64> = counts.iter().map(|c| c * n / counted).collect();
                let short = n - scaled.iter().sum::<u64>();
                if let Some(top) = (0..scaled.len()).max_by_key(|&j| counts[j]) {
                    scaled[top] += short;
                }
                counts = scaled;
            }
            counts
        })
    }

    fn __repr__(&self) -> String {
        let names: Vec<String> = self.map.servers().iter().map(|s| s.to_string()).collect();
        format!("Distribution({:?}, {:?})", self.map.kind().name(), names)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Distribution>()?;
    m.add_function(wrap_pyfunction!(parse_server, m)?)?;
    Ok(())
}
