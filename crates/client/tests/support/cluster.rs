//! A real 3-master Redis Cluster for tests: three OS `redis-server`s on 127.0.0.21-23 (the Ray
//! tests use 127.0.0.2-5), free ports, no persistence, joined by `redis-cli --cluster create`.
//!
//! One cluster per test binary, shared by its tests ([`shared`]); tests that change it hold
//! its lock. A static is never dropped, so a watchdog shell started with it stops the three
//! servers by PID (and removes their directory) once the test process has exited.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::redis::answers;

pub struct Node {
    child: Child,
    pub host: String,
    pub port: u16,
    pub address: String,
    pub id: String,
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    pub dir: PathBuf,
    _watchdog: Child,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static LOCK: Mutex<()> = Mutex::new(());

/// The binary's cluster (started by the first test to ask), and its lock: held for the
/// whole test, as tests move slots.
pub fn shared() -> (MutexGuard<'static, ()>, &'static Cluster) {
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    (guard, CLUSTER.get_or_init(Cluster::start))
}

/// A port free on `host` whose cluster bus port (port + 10000) is free too.
fn free_pair(host: &str) -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind((host, 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        if port < 55_000 && TcpListener::bind((host, port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair on {host}");
}

fn wait_until(what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not within {within:?}");
}

impl Node {
    /// What `redis-cli -h host -p port <args>` prints (no `-c`: redirections are shown, not
    /// followed). Panics if it fails.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", &self.host, "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed with redis-server");
        assert!(out.status.success(), "redis-cli {args:?} failed");
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    }

    /// `redis-cli` reading `lines` (one command each) from its standard input: one reply
    /// line for each.
    pub fn cli_batch(&self, lines: &[String]) -> Vec<String> {
        use std::io::Write;
        let mut child = Command::new("redis-cli")
            .args(["-h", &self.host, "-p", &self.port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-cli is installed with redis-server");
        let mut input = child.stdin.take().unwrap();
        input.write_all(lines.join("\n").as_bytes()).unwrap();
        input.write_all(b"\n").unwrap();
        drop(input);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "redis-cli failed");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let replies: Vec<String> = text.lines().map(str::to_string).collect();
        assert_eq!(replies.len(), lines.len(), "{text}");
        replies
    }
}

impl Cluster {
    fn start() -> Cluster {
        let bin = std::env::var("CACHELAB_REDIS").unwrap_or_else(|_| "redis-server".into());
        let dir = std::env::temp_dir().join(format!("cachelab-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut nodes = Vec::new();
        for n in 1..=3 {
            let host = format!("127.0.0.{}", 20 + n);
            let mut node = None;
            for _attempt in 0..5 {
                let port = free_pair(&host);
                let conf = dir.join(format!("nodes-{port}.conf"));
                let child = Command::new(&bin)
                    .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                    .arg(&conf)
                    .args(["--port", &port.to_string(), "--bind", &host])
                    // The cluster bus connects from this address, so peers can call back.
                    .args(["--bind-source-addr", &host])
                    .args(["--save", "", "--appendonly", "no", "--logfile", ""])
                    .arg("--dir")
                    .arg(&dir)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("redis-server must be installed (apt-get install -y redis-server)");
                let mut candidate = Node {
                    child,
                    address: format!("{host}:{port}"),
                    host: host.clone(),
                    port,
                    id: String::new(),
                };
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline && !answers(&candidate.address) {
                    if let Ok(Some(_)) = candidate.child.try_wait() {
                        break; // lost the port race
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                if answers(&candidate.address) {
                    node = Some(candidate);
                    break;
                }
                let _ = candidate.child.kill();
                let _ = candidate.child.wait();
            }
            nodes.push(node.expect("could not start a cluster node"));
        }
        // Stops the servers by PID once this process is gone (a static is never dropped).
        let pids: Vec<String> = nodes.iter().map(|n| n.child.id().to_string()).collect();
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 1; done; kill {pids} 2>/dev/null; \
             sleep 1; rm -rf '{dir}'",
            me = std::process::id(),
            pids = pids.join(" "),
            dir = dir.display(),
        );
        let watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut c = Cluster {
            nodes,
            dir,
            _watchdog: watchdog,
        };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(c.nodes.iter().map(|n| n.address.clone()));
        create.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let mut child = create
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut created = None;
        wait_until(
            "redis-cli --cluster create",
            Duration::from_secs(60),
            || {
                created = child.try_wait().unwrap();
                created.is_some()
            },
        );
        assert!(
            created.unwrap().success(),
            "redis-cli --cluster create failed"
        );
        for n in &c.nodes {
            wait_until("cluster_state:ok", Duration::from_secs(30), || {
                n.cli(&["CLUSTER", "INFO"])
                    .lines()
                    .any(|l| l.trim() == "cluster_state:ok")
            });
        }
        for n in &mut c.nodes {
            n.id = n.cli(&["CLUSTER", "MYID"]);
        }
        c
    }

    pub fn seeds(&self) -> Vec<cachelab_client::Address> {
        self.nodes
            .iter()
            .map(|n| n.address.parse().unwrap())
            .collect()
    }

    pub fn node(&self, address: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.address == address)
            .unwrap_or_else(|| panic!("no node {address}"))
    }

    /// Who serves each slot, as `CLUSTER NODES` on the first node says (a slot being
    /// migrated stays with its owner: `[slot->-id]` entries are skipped).
    pub fn owners(&self) -> Vec<Option<String>> {
        let mut owner = vec![None; 16384];
        for line in self.nodes[0].cli(&["CLUSTER", "NODES"]).lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() < 8 || !f[2].contains("master") {
                continue;
            }
            let address = f[1].split('@').next().unwrap().to_string();
            for range in &f[8..] {
                if range.starts_with('[') {
                    continue;
                }
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
                for o in &mut owner[a..=b] {
                    *o = Some(address.clone());
                }
            }
        }
        owner
    }

    /// Runs `args` on every node (e.g. `CLUSTER SETSLOT s NODE id`), checking each says OK.
    pub fn on_all(&self, args: &[&str]) {
        for n in &self.nodes {
            assert_eq!(n.cli(args), "OK", "{args:?} on {}", n.address);
        }
    }
}
