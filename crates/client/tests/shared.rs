//! `SharedConnection` against a real memcached: many concurrent callers on one socket.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cachelab_client::proto::Key;
use cachelab_client::{Address, Error, ErrorKind, Options, SharedConnection};
use support::Memcached;

fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn stat(pairs: &[(String, String)], name: &str) -> u64 {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .unwrap()
        .1
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_callers_share_one_socket_and_get_their_own_replies() {
    let mc = Memcached::start();
    let address: Address = mc.address.parse().unwrap();
    let mut probe = cachelab_client::Connection::connect(&address, Options::default())
        .await
        .unwrap();
    let before = stat(&probe.stats(None).await.unwrap(), "total_connections");
    let conn = Arc::new(
        SharedConnection::connect(&address, Options::default())
            .await
            .unwrap(),
    );
    for i in 0..300 {
        let v = Bytes::from(format!("value-{i}"));
        assert!(conn.set(&key(&format!("s:{i}")), v, 0, 0).await.unwrap());
    }
    let tasks: Vec<_> = (0..100)
        .map(|t| {
            let conn = Arc::clone(&conn);
            tokio::spawn(async move {
                // Each task asks for its own three keys and one that is missing.
                let keys: Vec<Key> = (0..3)
                    .map(|j| key(&format!("s:{}", t * 3 + j)))
                    .chain([key(&format!("s:missing:{t}"))])
                    .collect();
                let found = conn.get_multi(&keys).await.unwrap();
                let got: Vec<(Vec<u8>, Vec<u8>)> = found
                    .into_iter()
                    .map(|v| (v.key.to_vec(), v.data.to_vec()))
                    .collect();
                let want: Vec<(Vec<u8>, Vec<u8>)> = (0..3)
                    .map(|j| {
                        let n = t * 3 + j;
                        (
                            format!("s:{n}").into_bytes(),
                            format!("value-{n}").into_bytes(),
                        )
                    })
                    .collect();
                assert_eq!(got, want, "task {t}");
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let after = stat(&probe.stats(None).await.unwrap(), "total_connections");
    assert_eq!(
        after - before,
        1,
        "one socket for every caller (besides the probe's)"
    );
    let deleted = conn
        .delete_many(&[key("s:0"), key("s:missing:0")])
        .await
        .unwrap();
    assert_eq!(deleted, vec![true, false]);
    let open = stat(&probe.stats(None).await.unwrap(), "curr_connections");
    conn.close(Duration::from_secs(5)).await;
    assert_eq!(conn.broken(), Some(ErrorKind::Closed));
    match conn.get_multi(&[key("s:1")]).await {
        Err(Error::Broken(ErrorKind::Closed)) => {}
        r => panic!("a closed connection answered {r:?}"),
    }
    // The server sees the socket go (it notices within a moment).
    let mut left = open;
    for _ in 0..100 {
        left = stat(&probe.stats(None).await.unwrap(), "curr_connections");
        if left < open {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(left, open - 1, "close() closed the socket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_times_every_caller_out_within_the_timeout() {
    let mc = Memcached::start();
    let address: Address = mc.address.parse().unwrap();
    let options = Options {
        request_timeout: Duration::from_millis(200),
        ..Options::default()
    };
    let conn = Arc::new(SharedConnection::connect(&address, options).await.unwrap());
    conn.get_multi(&[key("x")]).await.unwrap();
    mc.stop();
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let conn = Arc::clone(&conn);
            tokio::spawn(async move { conn.get_multi(&[key("x")]).await })
        })
        .collect();
    for t in tasks {
        let e = t.await.unwrap().unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Timeout | ErrorKind::Broken),
            "{e}"
        );
    }
    // Generous: the timeout is 0.2 s; a loaded machine may add a little.
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(conn.broken().is_some());
    mc.resume();
}
