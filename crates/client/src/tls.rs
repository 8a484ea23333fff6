//! TLS to a memcached started with `-Z`: the settings ([`TlsConfig`], memtier_benchmark's
//! `--cacert`, `--cert`, `--key`, `--tls-skip-verify`, `--sni`), compiled once into a [`Tls`]
//! that every connection of a run shares, and the handshake with its deadline.
//!
//! rustls with the ring provider. Trust: the certificates of `--cacert` when it is given,
//! otherwise the Mozilla root set compiled in (webpki-roots), never the operating system's
//! store, so a run verifies the same way on every machine. `skip_verify` accepts any
//! certificate chain but still checks that the handshake is signed by the key of the
//! certificate the server sent (see [`AnyCertificate`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::{Address, Error};

/// What a TLS connection uses, as given on the command line (paths are read by [`Tls::new`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct TlsConfig {
    /// PEM file of the certificate authorities to trust (else the Mozilla roots).
    pub cacert: Option<PathBuf>,
    /// PEM file of the client certificate chain, for servers that ask for one.
    pub cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    pub key: Option<PathBuf>,
    /// Accept any server certificate (signatures are still checked).
    pub skip_verify: bool,
    /// The server name sent and verified; default: the host part of the address.
    pub sni: Option<String>,
}

/// A compiled [`TlsConfig`]: cheap to clone, shared by every connection of a run.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ClientConfig>,
    sni: Option<ServerName<'static>>,
    skip_verify: bool,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("sni", &self.sni)
            .field("skip_verify", &self.skip_verify)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

impl Tls {
    /// Reads the files and builds the client configuration. The error is one line naming the
    /// file or setting at fault.
    pub fn new(c: &TlsConfig) -> Result<Tls, String> {
        if c.cert.is_some() != c.key.is_some() {
            return Err("a client certificate needs both --cert and --key".into());
        }
        let sni = match &c.sni {
            None => None,
            Some(name) => Some(
                ServerName::try_from(name.clone())
                    .map_err(|_| format!("--sni {name:?} is not a valid server name"))?,
            ),
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?;
        let builder = if c.skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
        } else {
            builder.with_root_certificates(roots(c.cacert.as_deref())?)
        };
        let config = match (&c.cert, &c.key) {
            (Some(cert), Some(key)) => {
                let chain = certificates(cert, "--cert")?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("--key {}: {}", key.display(), pem_reason(&e)))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("--cert/--key: {e}"))?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Tls {
            config: Arc::new(config),
            sni,
            skip_verify: c.skip_verify,
        })
    }

    /// The name sent (SNI) and verified for `address`: `--sni`, else the address's host.
    pub fn server_name(&self, address: &Address) -> Result<ServerName<'static>, Error> {
        if let Some(n) = &self.sni {
            return Ok(n.clone());
        }
        let fail = |reason: String| Error::Tls {
            address: address.to_string(),
            reason,
        };
        match address {
            Address::Tcp(hp) => {
                let host = hp.rsplit_once(':').map_or(hp.as_str(), |(h, _)| h);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                ServerName::try_from(host.to_string())
                    .map_err(|_| fail(format!("{host:?} is not a valid server name; give --sni")))
            }
            Address::Unix(_) => Err(fail("TLS over a Unix socket is not supported".into())),
        }
    }

    /// The rustls client configuration (for blocking connections driven by hand).
    pub fn config(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.config)
    }
}

fn pem_reason(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::NoItemsFound => "no PEM item of the expected kind in the file".into(),
        E::Io(io) => io.to_string(),
        other => format!("not valid PEM ({other:?})"),
    }
}

fn certificates(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let named = |reason: String| format!("{flag} {}: {reason}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| named(pem_reason(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(pem_reason(&e)))?;
    if certs.is_empty() {
        return Err(named("no certificate in the file".into()));
    }
    Ok(certs)
}

/// The trust anchors: `--cacert`'s certificates, or the Mozilla roots.
fn roots(cacert: Option<&Path>) -> Result<RootCertStore, String> {
    let Some(path) = cacert else {
        return Ok(RootCertStore::from_iter(
            webpki_roots::TLS_SERVER_ROOTS.iter().cloned(),
        ));
    };
    let mut store = RootCertStore::empty();
    for cert in certificates(path, "--cacert")? {
        store
            .add(cert)
            .map_err(|e| format!("--cacert {}: {e}", path.display()))?;
    }
    Ok(store)
}

/// `--tls-skip-verify`: accepts any certificate chain and name — **dangerous**: it gives up
/// knowing who the server is — but still verifies the handshake signatures against the key in
/// the certificate the server presented, so a malformed or mismatched certificate fails.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Why a handshake failed, in one line, with a hint when the server did not speak TLS.
pub fn handshake_reason(e: &std::io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidMessage(_)) => {
            format!("{e} (the server did not answer in TLS: is it a TLS listener, memcached -Z?)")
        }
        Some(r) => r.to_string(),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the server closed the connection during the handshake".into()
        }
        None => e.to_string(),
    }
}

/// The TLS handshake on an open TCP stream, bounded by `within`.
pub async fn handshake(
    tls: &Tls,
    address: &Address,
    tcp: TcpStream,
    within: Duration,
) -> Result<TlsStream<TcpStream>, Error> {
    let name = tls.server_name(address)?;
    let connector = TlsConnector::from(tls.config());
    let fail = |reason: String| Error::Tls {
        address: address.to_string(),
        reason,
    };
    match tokio::time::timeout(within, connector.connect(name, tcp)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(fail(handshake_reason(&e))),
        Err(_) => Err(fail(format!(
            "no answer within {within:?} (is the server a TLS listener, memcached -Z?)"
        ))),
    }
}
