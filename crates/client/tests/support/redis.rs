//! A real Redis for tests: the OS `redis-server`, on a free loopback port, no persistence,
//! in a directory of its own, stopped by PID on drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

pub struct Redis {
    child: Child,
    pub port: u16,
    pub address: String,
    /// The TLS listener's port, when started with [`Redis::start_tls`].
    pub tls_port: Option<u16>,
    pub dir: PathBuf,
}

/// True when the plain port answers a RESP `PING` (`+PONG`, or `-NOAUTH` with a password).
pub fn answers(address: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(address) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut first = [0u8; 1];
    matches!(s.read(&mut first), Ok(1) if first[0] == b'+' || first[0] == b'-')
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// With extra `--option value` arguments (`--requirepass`, `--user`, …).
    pub fn start_with(extra: &[&str]) -> Redis {
        Redis::launch(extra, None)
    }

    /// With a TLS listener too, from a certificate and key; clients are not asked for one.
    pub fn start_tls(cert: &str, key: &str, ca: &str) -> Redis {
        Redis::launch(&[], Some((cert, key, ca)))
    }

    fn launch(extra: &[&str], tls: Option<(&str, &str, &str)>) -> Redis {
        let bin = std::env::var("CACHELAB_REDIS").unwrap_or_else(|_| "redis-server".into());
        for _attempt in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("cachelab-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut cmd = Command::new(&bin);
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--logfile", ""])
                .arg("--dir")
                .arg(&dir);
            let tls_port = tls.map(|(cert, key, ca)| {
                let p = free_port();
                cmd.args(["--tls-port", &p.to_string()])
                    .args(["--tls-cert-file", cert, "--tls-key-file", key])
                    .args(["--tls-ca-cert-file", ca, "--tls-auth-clients", "no"]);
                p
            });
            cmd.args(extra);
            let child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed (apt-get install -y redis-server)");
            let mut r = Redis {
                child,
                port,
                address: format!("127.0.0.1:{port}"),
                tls_port,
                dir,
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if answers(&r.address) {
                    return r;
                }
                if let Ok(Some(_)) = r.child.try_wait() {
                    break; // lost the port race; try another
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            r.kill();
        }
        panic!("could not start redis-server");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill {sig} of our redis-server failed");
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing until [`Redis::resume`].
    /// Returns once every thread of it is stopped.
    pub fn stop(&self) {
        self.signal("-STOP");
        super::wait_stopped(self.child.id());
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// What `redis-cli -p <port> <args>` prints (no password, plain TCP).
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed with redis-server");
        assert!(out.status.success(), "redis-cli {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
