//! TLS failures that need no certificate: a server that does not speak TLS, one that never
//! answers, settings that cannot work. (Handshakes with a real `memcached -Z` and certificates
//! made at run time are in tests/tls/ of the Python package.)

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use cachelab_client::{Address, BlockingConnection, Error, ErrorKind, Options, Tls, TlsConfig};

fn skip_verify() -> Tls {
    Tls::new(&TlsConfig {
        skip_verify: true,
        ..TlsConfig::default()
    })
    .unwrap()
}

fn options(tls: Tls, connect_timeout: Duration) -> Options {
    Options {
        connect_timeout,
        tls: Some(tls),
        ..Options::default()
    }
}

fn listener() -> (TcpListener, Address) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = l.local_addr().unwrap().to_string().parse().unwrap();
    (l, address)
}

#[test]
fn a_plain_server_that_answers_error_is_a_clear_handshake_failure() {
    let (l, address) = listener();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut hello = [0u8; 512];
        let _ = s.read(&mut hello);
        s.write_all(b"ERROR\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(200));
    });
    let err = BlockingConnection::connect(&address, options(skip_verify(), Duration::from_secs(2)))
        .err()
        .expect("no TLS from a plain server");
    server.join().unwrap();
    assert_eq!(err.kind(), ErrorKind::Tls);
    let line = err.to_string();
    assert!(
        line.starts_with(&format!("{address}: TLS handshake failed: ")),
        "{line}"
    );
    assert!(line.contains("memcached -Z"), "{line}");
}

#[test]
fn a_server_that_never_answers_the_hello_fails_within_the_connect_timeout() {
    let (l, address) = listener();
    let server = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        drop(s);
    });
    let start = Instant::now();
    let err =
        BlockingConnection::connect(&address, options(skip_verify(), Duration::from_millis(300)))
            .err()
            .expect("no handshake");
    let took = start.elapsed();
    server.join().unwrap();
    assert!(matches!(err, Error::Tls { .. }), "{err}");
    assert!(err.to_string().contains("no answer within"), "{err}");
    assert!(took < Duration::from_millis(1200), "took {took:?}");
}

#[test]
fn settings_that_cannot_work_are_refused_before_connecting() {
    let half = TlsConfig {
        cert: Some("client.pem".into()),
        ..TlsConfig::default()
    };
    assert!(Tls::new(&half).unwrap_err().contains("--cert and --key"));
    let missing = TlsConfig {
        cacert: Some("/nonexistent/ca.pem".into()),
        ..TlsConfig::default()
    };
    let e = Tls::new(&missing).unwrap_err();
    assert!(e.starts_with("--cacert /nonexistent/ca.pem: "), "{e}");
    let unix: Address = "unix:/tmp/nothing.sock".parse().unwrap();
    let err = BlockingConnection::connect(&unix, options(skip_verify(), Duration::from_secs(1)))
        .err()
        .unwrap();
    assert!(err.to_string().contains("Unix socket"), "{err}");
}
