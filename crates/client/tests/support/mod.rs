//! A real memcached for tests: the OS package, on a free loopback port, killed on drop; a real
//! Redis in [`redis`], a 3-master Redis Cluster in [`cluster`].
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod cluster;
pub mod redis;

pub struct Memcached {
    child: Child,
    pub address: String,
    pub socket: Option<PathBuf>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn answers(address: &str, socket: &Option<PathBuf>) -> bool {
    let probe = |mut w: Box<dyn ReadWrite>| -> bool {
        if w.write_all(b"version\r\n").is_err() {
            return false;
        }
        let mut line = String::new();
        BufReader::new(w).read_line(&mut line).is_ok() && line.starts_with("VERSION ")
    };
    match socket {
        Some(path) => std::os::unix::net::UnixStream::connect(path)
            .map(|s| {
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                probe(Box::new(s))
            })
            .unwrap_or(false),
        None => TcpStream::connect(address)
            .map(|s| {
                s.set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                probe(Box::new(s))
            })
            .unwrap_or(false),
    }
}

trait ReadWrite: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> ReadWrite for T {}

impl Memcached {
    pub fn start() -> Memcached {
        Self::launch(false, &[])
    }

    pub fn start_unix() -> Memcached {
        Self::launch(true, &[])
    }

    pub fn start_with(args: &[&str]) -> Memcached {
        Self::launch(false, args)
    }

    fn launch(unix: bool, extra: &[&str]) -> Memcached {
        let bin = std::env::var("CACHELAB_MEMCACHED").unwrap_or_else(|_| "memcached".into());
        for _attempt in 0..5 {
            let mut cmd = Command::new(&bin);
            let (address, socket) = if unix {
                let dir = std::env::temp_dir().join(format!(
                    "cachelab-test-{}-{}",
                    std::process::id(),
                    free_port()
                ));
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join("mc.sock");
                cmd.arg("-s").arg(&path);
                (format!("unix:{}", path.display()), Some(path))
            } else {
                let port = free_port();
                cmd.args(["-l", "127.0.0.1", "-p", &port.to_string()]);
                (format!("127.0.0.1:{port}"), None)
            };
            cmd.args(["-U", "0", "-m", "64", "-t", "2"]).args(extra);
            // SAFETY-free check for root: memcached refuses to run as root without -u.
            if std::env::var("USER").as_deref() == Ok("root") || is_root() {
                cmd.args(["-u", "root"]);
            }
            let child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("memcached must be installed (apt-get install -y memcached)");
            let mut mc = Memcached {
                child,
                address,
                socket,
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if answers(&mc.address, &mc.socket) {
                    return mc;
                }
                if let Ok(Some(_)) = mc.child.try_wait() {
                    break; // lost the port race; try another
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = mc.child.kill();
        }
        panic!("could not start memcached");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing until [`Memcached::resume`].
    /// Returns once every thread of it is stopped.
    pub fn stop(&self) {
        self.signal("-STOP");
        wait_stopped(self.child.id());
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill {sig} of our memcached failed");
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (5 s at most) until the kernel has stopped every thread of `pid` (state `T`):
/// `kill -STOP` returns before that, and a request that reaches a thread still running in
/// between is answered.
pub fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if all_threads_stopped(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("process {pid} did not stop within 5 s of SIGSTOP");
}

fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            // The state follows the command's closing parenthesis.
            .map(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .is_some_and(|state| state == "T" || state == "t")
            })
            .unwrap_or(true) // a thread that ended is not running
    })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
        if let Some(p) = &self.socket {
            let _ = std::fs::remove_dir_all(p.parent().unwrap());
        }
    }
}
