//! The RESP client over TLS to a real `redis-server --tls-port` (the OS package is built with
//! TLS), with a CA and a server certificate made here by the openssl command, as the
//! memcached TLS tests make theirs (tests/tls/test_tls.py).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use bytes::Bytes;
use cachelab_client::proto::resp::RespKey;
use cachelab_client::resp::{Protocol, RespClient, RespOptions, RespUrl, SetOptions};
use cachelab_client::{ErrorKind, Options, Tls, TlsConfig};
use support::redis::Redis;

fn openssl(args: &[&str]) {
    let ok = Process::new("openssl")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(ok, "openssl {args:?} failed");
}

/// A CA and a server certificate for 127.0.0.1 signed by it, in `dir`: (ca, cert, key).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = |name: &str| dir.join(name);
    let s = |path: &PathBuf| path.to_str().unwrap().to_string();
    let (ca, ca_key) = (p("ca.pem"), p("ca.key"));
    let (cert, key, csr, ext) = (p("server.pem"), p("server.key"), p("server.csr"), p("ext"));
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", &s(&ca_key), "-out", &s(&ca), "-days", "2"],
            &["-subj", "/CN=cachelab-test-ca"],
            &["-addext", "basicConstraints=critical,CA:TRUE"],
            &["-addext", "keyUsage=critical,keyCertSign"],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &["-keyout", &s(&key), "-out", &s(&csr), "-subj", "/CN=server"],
        ]
        .concat(),
    );
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &s(&csr),
        "-CA",
        &s(&ca),
        "-CAkey",
        &s(&ca_key),
        "-CAcreateserial",
        "-out",
        &s(&cert),
        "-days",
        "2",
        "-extfile",
        &s(&ext),
    ]);
    (ca, cert, key)
}

fn have_openssl() -> bool {
    Process::new("openssl").arg("version").output().is_ok()
}

#[test]
fn resp_over_tls_to_a_real_redis() {
    if !have_openssl() {
        eprintln!("skipped: the openssl command makes the test certificates");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cachelab-resp-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, cert, key) = certificates(&dir);
    let r = Redis::start_tls(
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        ca.to_str().unwrap(),
    );
    let tls_port = r.tls_port.unwrap();
    let trusted = Tls::new(&TlsConfig {
        cacert: Some(ca.clone()),
        ..TlsConfig::default()
    })
    .unwrap();
    let with = |tls: Option<Tls>| Options {
        tls,
        ..Options::default()
    };
    let k = RespKey::new("tls:k").unwrap();

    // rediss:// with the CA: RESP3 over TLS, every byte through rustls.
    let url: RespUrl = format!("rediss://127.0.0.1:{tls_port}/1").parse().unwrap();
    let resp3 = RespOptions {
        protocol: Protocol::Resp3,
        ..RespOptions::default()
    };
    let mut c = RespClient::connect_url(&url, with(Some(trusted.clone())), &resp3).unwrap();
    assert_eq!(c.protocol(), 3);
    let value = Bytes::from(vec![7u8; 300_000]);
    assert!(c.set(&k, value.clone(), SetOptions::default()).unwrap());
    assert_eq!(c.get(&k).unwrap(), Some(value));
    assert_eq!(r.cli(&["-n", "1", "STRLEN", "tls:k"]).trim(), "300000");

    // rediss:// with no CA given: the Mozilla roots, which do not know this CA.
    let e = RespClient::connect_url(&url, with(None), &RespOptions::default())
        .err()
        .expect("an unknown CA");
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");

    // Plain RESP to the TLS port: closed at once, with the hint.
    let tls_addr = format!("127.0.0.1:{tls_port}").parse().unwrap();
    let mut plain = RespClient::connect(&tls_addr, with(None), &RespOptions::default()).unwrap();
    let e = plain.ping().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Closed | ErrorKind::Reset),
        "{e}"
    );
    assert!(e.to_string().contains("a TLS listener?"), "{e}");

    // TLS to the plain port: a handshake failure, named.
    let plain_addr = r.address.parse().unwrap();
    let e = RespClient::connect(&plain_addr, with(Some(trusted)), &RespOptions::default())
        .err()
        .expect("no TLS on the plain port");
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}: TLS handshake failed", r.address)),
        "{e}"
    );
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}
