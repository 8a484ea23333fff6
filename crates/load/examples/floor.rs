//! The floor under a load client's CPU per request: the least a client that sends each request
//! with its own system call can spend, for `benches/load_vs_memtier.py` to set beside
//! cachelab's engine and memtier_benchmark.
//!
//! `cargo run --release -p cachelab-load --example floor -- ADDRESS CONNS SECONDS`
//!
//! One thread, `CONNS` connections at pipeline 1, text `get`s of 100-byte values over 10,000
//! keys it sets first (and deletes at the end), chosen by a linear congruential generator. Per
//! request it does what any such client must: an `epoll_wait` share, one `read`, one `write`;
//! and nothing else — no latency histogram, no reply parsing beyond its `END`, no timers. It
//! prints one JSON line: the requests answered, the seconds, and the thread's CPU time while
//! sending (`getrusage(RUSAGE_THREAD)`), set-up and clean-up left out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::resource::{getrusage, UsageWho};

const KEYS: u32 = 10_000;
const SIZE: usize = 100;

fn cpu_s() -> f64 {
    let u = getrusage(UsageWho::RUSAGE_THREAD).expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 * 1e-6;
    t(u.user_time()) + t(u.system_time())
}

/// Writes `lines` (commands sent with `noreply`), then waits for a `version` round trip: the
/// server has read them all.
fn quietly(s: &mut TcpStream, lines: impl Iterator<Item = Vec<u8>>) {
    for l in lines {
        s.write_all(&l).expect("write");
    }
    s.write_all(b"version\r\n").expect("write");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    while !buf.ends_with(b"\r\n") {
        let k = s.read(&mut chunk).expect("read");
        assert!(k > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..k]);
    }
    assert!(
        buf.starts_with(b"VERSION"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 3 {
        eprintln!("usage: floor ADDRESS CONNS SECONDS");
        std::process::exit(2);
    }
    let conns: usize = a[1].parse().expect("connections");
    let secs: f64 = a[2].parse().expect("seconds");
    let prefix = format!("floor-{}", std::process::id());
    let connect = || {
        let s = TcpStream::connect(&a[0]).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s
    };
    let value = vec![b'x'; SIZE];
    let mut setup = connect();
    quietly(
        &mut setup,
        (0..KEYS).map(|i| {
            let mut l = format!("set {prefix}:{i} 0 0 {SIZE} noreply\r\n").into_bytes();
            l.extend_from_slice(&value);
            l.extend_from_slice(b"\r\n");
            l
        }),
    );

    let mut streams: Vec<TcpStream> = (0..conns).map(|_| connect()).collect();
    for s in &streams {
        s.set_nonblocking(true).expect("nonblocking");
    }
    let epoll = Epoll::new(EpollCreateFlags::empty()).expect("epoll");
    for (i, s) in streams.iter().enumerate() {
        epoll
            .add(s.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, i as u64))
            .expect("epoll add");
    }
    let mut seed: u32 = 1;
    let mut request = |out: &mut Vec<u8>| {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        out.clear();
        write!(out, "get {prefix}:{}\r\n", (seed >> 8) % KEYS).expect("format");
    };
    let mut bufs = vec![Vec::with_capacity(512); conns];
    let mut out = Vec::with_capacity(64);
    let (t0, c0) = (Instant::now(), cpu_s());
    let end = t0 + Duration::from_secs_f64(secs);
    for s in &mut streams {
        request(&mut out);
        s.write_all(&out).expect("write");
    }
    let mut events = vec![EpollEvent::empty(); conns];
    let mut chunk = [0u8; 4096];
    let mut ops: u64 = 0;
    'run: loop {
        let n = epoll
            .wait(&mut events, EpollTimeout::from(1000u16))
            .expect("epoll_wait");
        for e in &events[..n] {
            let i = e.data() as usize;
            let k = match streams[i].read(&mut chunk) {
                Ok(0) => panic!("the server closed the connection"),
                Ok(k) => k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("read: {e}"),
            };
            bufs[i].extend_from_slice(&chunk[..k]);
            if bufs[i].ends_with(b"END\r\n") {
                bufs[i].clear();
                ops += 1;
                if ops.is_multiple_of(1024) && Instant::now() >= end {
                    break 'run;
                }
                request(&mut out);
                streams[i].write_all(&out).expect("write");
            }
        }
    }
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
    println!(
        "{{\"ops\": {ops}, \"seconds\": {wall:.3}, \"cpu_s\": {cpu:.4}, \"cpu_us_per_op\": {:.3}}}",
        cpu / ops as f64 * 1e6
    );
    drop(streams);
    quietly(
        &mut setup,
        (0..KEYS).map(|i| format!("delete {prefix}:{i} noreply\r\n").into_bytes()),
    );
}
