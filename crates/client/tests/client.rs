//! The client against a real memcached (the OS package, started per test on a free port).

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use cachelab_client::proto::{Command, Key, KeyError, MetaFlags, MetaStatus, Response, Store};
use cachelab_client::{Address, BlockingConnection, Connection, Error, ErrorKind, Options};
use support::Memcached;

fn connect(mc: &Memcached) -> BlockingConnection {
    BlockingConnection::connect(&mc.address.parse().unwrap(), Options::default()).unwrap()
}

fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn exercise_text_protocol(c: &mut BlockingConnection) {
    let (a, b, n) = (key("t:a"), key("t:b"), key("t:n"));
    assert!(c.set(&a, Bytes::from_static(b"alpha"), 7, 0).unwrap());
    let v = c.get(&a).unwrap().expect("hit");
    assert_eq!(
        (&v.key[..], v.flags, &v.data[..]),
        (&b"t:a"[..], 7, &b"alpha"[..])
    );
    assert!(c.get(&b).unwrap().is_none());
    assert!(c.add(&b, Bytes::from_static(b"beta"), 0, 0).unwrap());
    assert!(
        !c.add(&b, Bytes::from_static(b"again"), 0, 0).unwrap(),
        "add of an existing key"
    );
    let found = c
        .get_multi(&[a.clone(), key("t:missing"), b.clone()])
        .unwrap();
    let keys: Vec<&[u8]> = found.iter().map(|v| &v.key[..]).collect();
    assert_eq!(keys, vec![&b"t:a"[..], &b"t:b"[..]]);
    let with_cas = c.gets(std::slice::from_ref(&a)).unwrap();
    assert!(with_cas[0].cas.is_some());
    assert!(c.touch(&a, 100).unwrap());
    assert!(!c.touch(&key("t:missing"), 100).unwrap());
    assert!(c.set(&n, Bytes::from_static(b"10"), 0, 0).unwrap());
    assert_eq!(c.incr(&n, 5).unwrap(), Some(15));
    assert_eq!(c.decr(&n, 20).unwrap(), Some(0), "decr stops at zero");
    assert_eq!(c.incr(&key("t:missing"), 1).unwrap(), None);
    assert!(c.delete(&a).unwrap());
    assert!(!c.delete(&a).unwrap());
    assert!(c.version().unwrap().starts_with("1."));
    let stats = c.stats(None).unwrap();
    assert!(stats.iter().any(|(k, _)| k == "curr_connections"));
    let settings = c.stats(Some("settings")).unwrap();
    assert!(settings.iter().any(|(k, v)| k == "num_threads" && v == "2"));
}

#[test]
fn text_protocol_over_tcp() {
    let mc = Memcached::start();
    exercise_text_protocol(&mut connect(&mc));
}

#[test]
fn text_protocol_over_a_unix_socket() {
    let mc = Memcached::start_unix();
    assert!(mc.address.starts_with("unix:"));
    exercise_text_protocol(&mut connect(&mc));
}

#[test]
fn meta_protocol() {
    let mc = Memcached::start();
    let mut c = connect(&mc);
    let k = key("m:a");
    let f = |s: &str| MetaFlags::new(s).unwrap();
    let r = c
        .meta_set(&k, Bytes::from_static(b"hello"), &f("F9 T0"))
        .unwrap();
    assert_eq!(r.status, MetaStatus::Hd);
    let r = c.meta_get(&k, &f("v f s")).unwrap();
    assert_eq!(r.status, MetaStatus::Va);
    assert_eq!(r.data.as_deref(), Some(&b"hello"[..]));
    assert_eq!(r.flag(b'f'), Some(&b"9"[..]));
    assert_eq!(r.flag(b's'), Some(&b"5"[..]));
    assert_eq!(
        c.meta_get(&key("m:none"), &f("v")).unwrap().status,
        MetaStatus::En
    );
    assert_eq!(c.meta_delete(&k, &f("")).unwrap().status, MetaStatus::Hd);
    assert_eq!(c.meta_delete(&k, &f("")).unwrap().status, MetaStatus::Nf);
    c.meta_noop().unwrap();
}

#[test]
fn pipelined_commands_get_their_own_replies_in_order() {
    let mc = Memcached::start();
    let mut c = connect(&mc);
    let mut cmds = Vec::new();
    for i in 0..200 {
        let data = Bytes::from(format!("value-{i}").repeat(i % 7 + 1));
        cmds.push(Command::Set(Store {
            key: key(&format!("p:{i}")),
            flags: i as u32,
            exptime: 0,
            data,
        }));
    }
    cmds.push(Command::Get(
        (0..200).map(|i| key(&format!("p:{i}"))).collect(),
    ));
    cmds.push(Command::MetaNoop);
    let replies = c.pipeline(&cmds).unwrap();
    assert_eq!(replies.len(), 202);
    assert!(replies[..200].iter().all(|r| *r == Response::Stored));
    let Response::Values(values) = &replies[200] else {
        panic!("{:?}", replies[200])
    };
    assert_eq!(values.len(), 200);
    for (i, v) in values.iter().enumerate() {
        assert_eq!(v.flags, i as u32);
        assert_eq!(
            &v.data[..],
            format!("value-{i}").repeat(i % 7 + 1).as_bytes()
        );
    }
}

#[test]
fn a_one_megabyte_value_round_trips() {
    let mc = Memcached::start_with(&["-I", "2m"]);
    let mut c = connect(&mc);
    let data: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let k = key("big");
    assert!(c.set(&k, Bytes::from(data.clone()), 0, 0).unwrap());
    assert_eq!(c.get(&k).unwrap().unwrap().data, data);
}

#[test]
fn server_errors_are_reported_not_hidden() {
    let mc = Memcached::start_with(&["-I", "1m"]);
    let mut c = connect(&mc);
    let too_big = Bytes::from(vec![0u8; 2 * 1024 * 1024]);
    match c.set(&key("huge"), too_big, 0, 0) {
        Err(e @ Error::ServerError(_)) => assert_eq!(e.kind(), ErrorKind::ServerError),
        other => panic!("expected SERVER_ERROR, got {other:?}"),
    }
    // The connection stays in step after an error reply.
    assert!(c.version().is_ok());
}

#[test]
fn invalid_keys_never_reach_the_wire() {
    assert_eq!(
        Key::new("a b"),
        Err(KeyError::BadByte { pos: 1, byte: b' ' })
    );
    assert_eq!(
        Key::new("x\r\nflush_all"),
        Err(KeyError::BadByte {
            pos: 1,
            byte: b'\r'
        })
    );
    assert!(matches!(
        Key::new("k".repeat(251)),
        Err(KeyError::TooLong { len: 251 })
    ));
    let mc = Memcached::start();
    let mut c = connect(&mc);
    // A stats group is validated like a key.
    assert!(matches!(
        c.stats(Some("items\r\nflush_all")),
        Err(Error::Key(_))
    ));
    // A 250-byte key is fine end to end.
    let long = key(&"k".repeat(250));
    assert!(c.set(&long, Bytes::from_static(b"v"), 0, 0).unwrap());
    assert!(c.get(&long).unwrap().is_some());
}

#[test]
fn a_server_that_never_answers_times_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address: Address = listener.local_addr().unwrap().to_string().parse().unwrap();
    let hold = std::thread::spawn(move || {
        let (sock, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(2));
        drop(sock);
    });
    let opts = Options {
        request_timeout: Duration::from_millis(200),
        ..Options::default()
    };
    let mut c = BlockingConnection::connect(&address, opts).unwrap();
    let start = Instant::now();
    let err = c.version().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "took {:?}",
        start.elapsed()
    );
    // After a timeout the connection is out of step, so it refuses further use.
    assert_eq!(c.version().unwrap_err().kind(), ErrorKind::Broken);
    hold.join().unwrap();
}

#[test]
fn a_refused_connection_is_reported_by_kind() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address: Address = format!("127.0.0.1:{port}").parse().unwrap();
    let err = BlockingConnection::connect(&address, Options::default())
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::ConnectRefused);
    assert!(err.to_string().contains(&port.to_string()));
}

#[test]
fn a_killed_server_gives_a_connection_error_not_a_hang() {
    let mut mc = Memcached::start();
    let mut c = connect(&mc);
    c.version().unwrap();
    mc.kill();
    let err = c.version().unwrap_err();
    assert!(err.kind().is_connection(), "{err:?}");
}

#[test]
fn garbage_from_the_server_is_a_protocol_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address: Address = listener.local_addr().unwrap().to_string().parse().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut sock, _) = listener.accept().unwrap();
        let mut buf = [0u8; 64];
        let _ = sock.read(&mut buf);
        let _ = sock.write_all(b"HELLO there\r\n");
        std::thread::sleep(Duration::from_millis(500));
    });
    let mut c = BlockingConnection::connect(&address, Options::default()).unwrap();
    assert_eq!(c.version().unwrap_err().kind(), ErrorKind::Protocol);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_connections_work_concurrently() {
    let mc = Memcached::start();
    let address: Address = mc.address.parse().unwrap();
    let mut tasks = Vec::new();
    for t in 0..8 {
        let address = address.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = Connection::connect(&address, Options::default())
                .await
                .unwrap();
            for i in 0..50 {
                let k = key(&format!("a:{t}:{i}"));
                assert!(c
                    .set(&k, Bytes::from(format!("{t}-{i}")), 0, 0)
                    .await
                    .unwrap());
                assert_eq!(
                    c.get(&k).await.unwrap().unwrap().data,
                    format!("{t}-{i}").as_bytes()
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}
