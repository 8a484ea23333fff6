//! The watcher connection's tests: the drain thread against servers that stream at once,
//! and `MONITOR`'s login.

use super::*;
use crate::State;
use std::net::TcpListener;

/// A server that answers `watch` with OK, then writes `lines` item_get lines at once and
/// keeps the connection open until the test ends.
fn streamer(lines: usize) -> (String, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut buf = [0u8; 256];
        let _ = c.read(&mut buf).unwrap();
        c.write_all(b"OK\r\n").unwrap();
        let mut out = Vec::new();
        for i in 0..lines {
            out.extend_from_slice(
                format!(
                    "ts=1795596440.{:06} gid={} type=item_get key=k{i} status=found \
                     clsid=1 cfd=24 size=5\n",
                    i % 1_000_000,
                    i + 1
                )
                .as_bytes(),
            );
        }
        let _ = c.write_all(&out);
        let _ = c.read(&mut buf); // until the watch is closed
    });
    (address, t)
}

#[test]
fn the_drain_thread_reads_while_nobody_parses_and_nothing_is_lost() {
    let (address, t) = streamer(50_000);
    let mut w = Watch::open(&address, Duration::from_secs(5), 1 << 30, false).unwrap();
    // Nothing parsed: the drain thread alone empties the socket into memory.
    let until = Instant::now() + Duration::from_secs(20);
    while w.buffered() < 50_000 * 60 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(w.buffered() > 50_000 * 60, "{}", w.buffered());
    let mut state = State::new(b"s", true, 1.0, None);
    let mut out = Columns::new();
    // Every chunk read is parsed (the last get waits for its connection's next line).
    while w.buffered() > 0 && Instant::now() < until {
        let s = w
            .read(
                &mut state,
                &mut out,
                Duration::from_millis(50),
                1 << 20,
                1 << 20,
                u64::MAX,
            )
            .unwrap();
        assert_eq!(s, Status::More);
    }
    state.flush(&mut out);
    assert_eq!(out.len(), 50_000);
    assert_eq!(w.buffered(), 0);
    assert!(w.peak_buffered > 50_000 * 60);
    drop(w);
    t.join().unwrap();
}

#[test]
fn a_parser_that_falls_behind_past_the_cap_stops_the_watch() {
    let (address, t) = streamer(50_000);
    let mut w = Watch::open(&address, Duration::from_secs(5), 1 << 20, false).unwrap();
    let mut state = State::new(b"s", true, 1.0, None);
    let mut out = Columns::new();
    let until = Instant::now() + Duration::from_secs(20);
    while w.buffered() <= 1 << 20 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut status = Status::More;
    while status == Status::More && Instant::now() < until {
        status = w
            .read(
                &mut state,
                &mut out,
                Duration::from_secs(1),
                1 << 30,
                1 << 30,
                u64::MAX,
            )
            .unwrap();
    }
    assert_eq!(status, Status::MaxBuffer);
    // What was read before the cap is parsed, none of it dropped.
    assert!(out.len() > (1 << 20) / 100, "{}", out.len());
    drop(w);
    t.join().unwrap();
}

/// A Redis that answers AUTH with `auth` and MONITOR with +OK followed by two lines;
/// what it was sent comes back through the handle.
fn redis(auth: &'static [u8]) -> (String, JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        let n = c.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        c.write_all(auth).unwrap();
        if auth != b"+OK\r\n" {
            return got;
        }
        let n = c.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        c.write_all(
            b"+OK\r\n+1.000001 [0 127.0.0.1:7] \"GET\" \"a\"\r\n\
              +1.000002 [0 127.0.0.1:7] \"SET\" \"a\" \"vv\"\r\n",
        )
        .unwrap();
        let _ = c.read(&mut buf); // until the watch is closed
        got
    });
    (address, t)
}

#[test]
fn monitor_logs_in_then_streams_and_a_refused_login_hides_the_password() {
    let (address, t) = redis(b"+OK\r\n");
    let mut w = Watch::monitor(
        &address,
        Duration::from_secs(5),
        1 << 20,
        Some((Some("u"), "pw1")),
        None,
    )
    .unwrap();
    let mut m = crate::Monitor::new(b"s", true, 1.0, None, None);
    let mut out = Columns::new();
    let until = Instant::now() + Duration::from_secs(20);
    while out.len() < 2 && Instant::now() < until {
        w.read(
            &mut m,
            &mut out,
            Duration::from_millis(50),
            100,
            100,
            u64::MAX,
        )
        .unwrap();
    }
    assert_eq!(out.size, [0, 2]);
    assert!(!w.local_address().is_empty());
    drop(w);
    let sent = t.join().unwrap();
    assert_eq!(
        sent,
        b"*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$3\r\npw1\r\n*1\r\n$7\r\nMONITOR\r\n"
    );

    let (address, t) = redis(b"-WRONGPASS invalid username-password pair\r\n");
    let Err(WatchError::Refused(e)) = Watch::monitor(
        &address,
        Duration::from_secs(5),
        1 << 20,
        Some((None, "pw2")),
        None,
    ) else {
        panic!("a refused login opened the stream");
    };
    assert!(e.contains("WRONGPASS") && !e.contains("pw2"), "{e}");
    t.join().unwrap();
}
