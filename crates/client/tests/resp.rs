//! The RESP client against a real Redis (the OS `redis-server`, started per test on a free
//! port), with redis-cli as the third party where it prints the same thing.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use cachelab_client::proto::resp::{Command, RespKey, Value};
use cachelab_client::resp::{
    subfields, Auth, Expire, Protocol, RespClient, RespOptions, RespUrl, SetOptions,
};
use cachelab_client::{Error, ErrorKind, Options};
use support::redis::Redis;
use support::Memcached;

fn connect(r: &Redis, resp: RespOptions) -> Result<RespClient, Error> {
    RespClient::connect(&r.address.parse().unwrap(), Options::default(), &resp)
}

fn resp2(r: &Redis) -> RespClient {
    connect(r, RespOptions::default()).unwrap()
}

fn resp3(r: &Redis) -> RespClient {
    let c = connect(
        r,
        RespOptions {
            protocol: Protocol::Resp3,
            ..RespOptions::default()
        },
    )
    .unwrap();
    assert_eq!(c.protocol(), 3);
    c
}

fn key(s: &str) -> RespKey {
    RespKey::new(s.to_string()).unwrap()
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

/// An integer reply to a raw command.
fn int(c: &mut RespClient, cmd: Command) -> i64 {
    match c.call(&cmd).unwrap() {
        Value::Integer(n) => n,
        v => panic!("{v:?}"),
    }
}

fn exercise_commands(c: &mut RespClient) {
    c.ping().unwrap();
    let (a, m) = (key("t:a"), key("t:missing"));
    assert!(c.set(&a, b("alpha"), SetOptions::default()).unwrap());
    assert_eq!(c.get(&a).unwrap(), Some(b("alpha")));
    assert_eq!(c.get(&m).unwrap(), None);
    // NX: refused on an existing key, taken on a new one.
    let nx = SetOptions {
        nx: true,
        ..SetOptions::default()
    };
    assert!(!c.set(&a, b("again"), nx).unwrap());
    assert_eq!(c.get(&a).unwrap(), Some(b("alpha")));
    let (ex, px) = (key("t:ex"), key("t:px"));
    let with = |expire| SetOptions {
        expire: Some(expire),
        nx: true,
    };
    assert!(c.set(&ex, b("e"), with(Expire::Seconds(100))).unwrap());
    assert!(c.set(&px, b("p"), with(Expire::Millis(50_000))).unwrap());
    let ttl = int(c, Command::new("TTL").key(&ex));
    assert!((90..=100).contains(&ttl), "TTL {ttl}");
    let pttl = int(c, Command::new("PTTL").key(&px));
    assert!((40_000..=50_000).contains(&pttl), "PTTL {pttl}");
    // Binary-safe keys and values, and a value read in many pieces.
    let odd = RespKey::new(&b"k \r\n\0\xff*1\r\n"[..]).unwrap();
    let big = Bytes::from((0..2_000_000u32).map(|i| i as u8).collect::<Vec<u8>>());
    assert!(c.set(&odd, big.clone(), SetOptions::default()).unwrap());
    assert_eq!(c.get(&odd).unwrap(), Some(big));
    let got = c.mget(&[a.clone(), m.clone(), ex.clone()]).unwrap();
    assert_eq!(got, vec![Some(b("alpha")), None, Some(b("e"))]);
    assert_eq!(c.mget(&[]).unwrap(), Vec::<Option<Bytes>>::new());
    assert_eq!(c.del(&[a.clone(), m.clone()]).unwrap(), 1);
    assert_eq!(c.unlink(&[ex, px, odd, m]).unwrap(), 3);
    assert_eq!(c.del(&[]).unwrap(), 0);
    assert_eq!(c.get(&a).unwrap(), None);
}

#[test]
fn every_command_against_a_real_redis_in_resp2_and_resp3() {
    let r = Redis::start();
    let mut c = resp2(&r);
    assert_eq!(c.protocol(), 2);
    exercise_commands(&mut c);
    exercise_commands(&mut resp3(&r));
}

#[test]
fn over_a_unix_socket() {
    let sock = std::env::temp_dir().join(format!(
        "cachelab-redis-{}-{}.sock",
        std::process::id(),
        support::free_port()
    ));
    let path = sock.to_str().unwrap();
    let r = Redis::start_with(&["--unixsocket", path, "--unixsocketperm", "700"]);
    let address = format!("unix:{path}").parse().unwrap();
    let mut c = RespClient::connect(&address, Options::default(), &RespOptions::default()).unwrap();
    assert!(c
        .set(&key("u"), b("over unix"), SetOptions::default())
        .unwrap());
    assert_eq!(r.cli(&["GET", "u"]).trim(), "over unix");
    drop(r);
    let _ = std::fs::remove_file(&sock);
}

#[test]
fn a_pipeline_gets_every_reply_in_order_and_an_error_stays_in_its_slot() {
    let r = Redis::start();
    let mut c = resp2(&r);
    let mut cmds = Vec::new();
    for i in 0..200 {
        cmds.push(Command::new("SET").key(&key(&format!("p:{i}"))).int(i));
    }
    cmds.push(Command::new("LPUSH").key(&key("p:list")).arg("x"));
    cmds.push(Command::new("INCR").key(&key("p:list"))); // WRONGTYPE
    for i in 0..200 {
        cmds.push(Command::new("GET").key(&key(&format!("p:{i}"))));
    }
    let replies = c.pipeline(&cmds).unwrap();
    assert_eq!(replies.len(), 402);
    assert!(replies[..200].iter().all(|v| v == &Value::Simple(b("OK"))));
    assert_eq!(replies[200], Value::Integer(1));
    let err = replies[201].error().expect("an error reply");
    assert!(err.starts_with(b"WRONGTYPE"), "{err:?}");
    for (i, v) in replies[202..].iter().enumerate() {
        assert_eq!(v, &Value::Bulk(Bytes::from(i.to_string())));
    }
    // The connection is still good, and a checked call names the server's error.
    let e = c
        .call(&Command::new("INCR").key(&key("p:list")))
        .unwrap_err();
    assert!(
        matches!(&e, Error::Redis(m) if m.starts_with("WRONGTYPE")),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::ServerError);
    assert!(
        e.to_string().starts_with("the server answered: WRONGTYPE"),
        "{e}"
    );
    assert!(c.broken().is_none());
    c.ping().unwrap();
}

#[test]
fn info_and_config_get_match_what_redis_cli_prints() {
    let r = Redis::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let mut c = resp2(&r);
    c.set(&key("i:1"), b("x"), SetOptions::default()).unwrap();
    let info = c.info(Some("server")).unwrap();
    let cli = r.cli(&["INFO", "server"]);
    let mut checked = 0;
    for line in cli.lines().map(str::trim_end) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        // Fields that change between two calls.
        if [
            "uptime_in_seconds",
            "uptime_in_days",
            "lru_clock",
            "server_time_usec",
            "hz",
        ]
        .contains(&k)
        {
            continue;
        }
        assert_eq!(info.get(k), Some(v), "INFO server field {k}");
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} fields");
    assert_eq!(info.int("tcp_port"), Some(i64::from(r.port)));
    assert_eq!(info.int("process_id"), Some(i64::from(r.pid())));
    // Every section, in RESP3 too (a verbatim string there).
    let all = resp3(&r).info(Some("all")).unwrap();
    let names: Vec<&str> = all.sections.iter().map(|s| s.name.as_str()).collect();
    for want in ["Server", "Clients", "Memory", "Stats", "Keyspace"] {
        assert!(names.contains(&want), "{names:?}");
    }
    let db0 = all.get("db0").expect("a keyspace line");
    assert!(subfields(db0).contains(&("keys", "1")), "{db0}");
    assert_eq!(all.get("redis_version"), info.get("redis_version"));
    // CONFIG GET: RESP2's flat array and RESP3's map give the same pairs as redis-cli.
    let config = c.config_get("maxmemory*").unwrap();
    assert_eq!(resp3(&r).config_get("maxmemory*").unwrap(), config);
    let cli = r.cli(&["CONFIG", "GET", "maxmemory*"]);
    let lines: Vec<&str> = cli.lines().collect();
    let mut from_cli: Vec<(String, String)> = lines
        .chunks(2)
        .map(|p| (p[0].to_string(), p[1].to_string()))
        .collect();
    from_cli.sort();
    assert_eq!(config, from_cli);
    assert!(config.contains(&("maxmemory-policy".into(), "allkeys-lru".into())));
}

#[test]
fn resp3_hello_names_the_server_and_replies_in_resp3_types() {
    let r = Redis::start();
    let mut c = resp3(&r);
    let Some(Value::Map(hello)) = c.hello() else {
        panic!("{:?}", c.hello())
    };
    let field = |name: &str| {
        hello
            .iter()
            .find(|(k, _)| k.as_bytes().map(|b| &b[..]) == Some(name.as_bytes()))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field("proto"), Some(Value::Integer(3)));
    let version = field("version").unwrap();
    let version = String::from_utf8(version.as_bytes().unwrap().to_vec()).unwrap();
    assert!(r
        .cli(&["INFO", "server"])
        .contains(&format!("redis_version:{version}\r")));
    // A miss is RESP3's null; a map and a double are RESP3's own types.
    assert_eq!(
        c.call(&Command::new("GET").key(&key("none"))).unwrap(),
        Value::Null
    );
    c.call(&Command::new("HSET").key(&key("h")).arg("f").arg("v"))
        .unwrap();
    let map = c.call(&Command::new("HGETALL").key(&key("h"))).unwrap();
    assert_eq!(
        map,
        Value::Map(vec![(Value::Bulk(b("f")), Value::Bulk(b("v")))])
    );
    c.call(&Command::new("ZADD").key(&key("z")).arg("1.5").arg("m"))
        .unwrap();
    let score = c
        .call(&Command::new("ZSCORE").key(&key("z")).arg("m"))
        .unwrap();
    assert_eq!(score, Value::Double(1.5));
    // The same GET miss over RESP2 is its null bulk string.
    let mut old = resp2(&r);
    assert_eq!(
        old.call(&Command::new("GET").key(&key("none"))).unwrap(),
        Value::NullBulk
    );
}

#[test]
fn a_server_without_hello_falls_back_or_is_named() {
    // HELLO renamed away: what a Redis before 6 answers.
    let r = Redis::start_with(&["--rename-command", "HELLO", ""]);
    let prefer = RespOptions {
        protocol: Protocol::PreferResp3,
        ..RespOptions::default()
    };
    let mut c = connect(&r, prefer).unwrap();
    assert_eq!(c.protocol(), 2);
    assert!(c.hello().is_none());
    c.ping().unwrap();
    let need = RespOptions {
        protocol: Protocol::Resp3,
        ..RespOptions::default()
    };
    let e = connect(&r, need).err().expect("RESP3 required");
    assert!(matches!(e, Error::NoResp3 { .. }), "{e:?}");
    let line = e.to_string();
    assert!(
        line.starts_with(&format!(
            "{} does not speak RESP3: HELLO 3 was answered 'ERR unknown command",
            r.address
        )),
        "{line}"
    );
    // A Redis with HELLO, asked to prefer RESP3, speaks it.
    let r = Redis::start();
    let c = connect(
        &r,
        RespOptions {
            protocol: Protocol::PreferResp3,
            ..RespOptions::default()
        },
    )
    .unwrap();
    assert_eq!(c.protocol(), 3);
}

/// An ACL user with every right, its rules as separate arguments (`--user "a on …"` in one
/// argument is taken as a user name with spaces).
const ACL_USER: [&str; 7] = ["--user", "alice", "on", ">alice-pw", "~*", "&*", "+@all"];

#[test]
fn auth_with_a_password_or_an_acl_user_and_no_secret_in_any_error() {
    let r = Redis::start_with(&[&["--requirepass", "s3cret-pw"][..], &ACL_USER].concat());
    // No password: the server's NOAUTH, named.
    let mut c = resp2(&r);
    let e = c.get(&key("a")).unwrap_err();
    assert!(
        matches!(&e, Error::Redis(m) if m.starts_with("NOAUTH")),
        "{e}"
    );
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let with = |auth| RespOptions {
            auth: Some(auth),
            protocol,
            ..RespOptions::default()
        };
        // Wrong password: WRONGPASS, and the password in no text the error gives.
        for bad in [
            Auth::password("wrong-pw-1"),
            Auth::user("alice", "wrong-pw-1"),
        ] {
            let e = connect(&r, with(bad)).err().expect("refused");
            assert!(
                matches!(&e, Error::Redis(m) if m.starts_with("WRONGPASS")),
                "{e}"
            );
            assert!(!format!("{e} {e:?}").contains("wrong-pw-1"), "{e:?}");
        }
        let mut c = connect(&r, with(Auth::password("s3cret-pw"))).unwrap();
        c.set(&key("a"), b("1"), SetOptions::default()).unwrap();
        let mut c = connect(&r, with(Auth::user("alice", "alice-pw"))).unwrap();
        assert_eq!(c.get(&key("a")).unwrap(), Some(b("1")));
        let who = c.call(&Command::new("ACL").arg("WHOAMI")).unwrap();
        assert_eq!(who.as_bytes().map(|b| &b[..]), Some(&b"alice"[..]));
    }
    // The options' Debug, as a log line would print them, hides the password too.
    let shown = format!(
        "{:?}",
        RespOptions {
            auth: Some(Auth::user("alice", "alice-pw")),
            ..RespOptions::default()
        }
    );
    assert!(
        !shown.contains("alice-pw") && shown.contains("alice"),
        "{shown}"
    );
}

#[test]
fn a_url_gives_the_address_credentials_and_database() {
    let r = Redis::start_with(&ACL_USER);
    let url: RespUrl = format!("redis://alice:alice%2Dpw@127.0.0.1:{}/2", r.port)
        .parse()
        .unwrap();
    let mut c = RespClient::connect_url(&url, Options::default(), &RespOptions::default()).unwrap();
    c.set(&key("in-db-2"), b("x"), SetOptions::default())
        .unwrap();
    // SELECT took effect: the key is in database 2, not 0.
    assert_eq!(r.cli(&["-n", "2", "EXISTS", "in-db-2"]).trim(), "1");
    assert_eq!(r.cli(&["-n", "0", "EXISTS", "in-db-2"]).trim(), "0");
    let mut zero = resp2(&r);
    assert_eq!(zero.get(&key("in-db-2")).unwrap(), None);
    zero.select(2).unwrap();
    assert_eq!(zero.get(&key("in-db-2")).unwrap(), Some(b("x")));
    let e = zero.select(100_000).unwrap_err();
    assert!(
        matches!(&e, Error::Redis(m) if m.contains("DB index")),
        "{e}"
    );
}

#[test]
fn a_stopped_server_times_out_and_the_connection_is_broken() {
    let r = Redis::start();
    let options = Options {
        request_timeout: Duration::from_millis(300),
        ..Options::default()
    };
    let mut c = RespClient::connect(
        &r.address.parse().unwrap(),
        options,
        &RespOptions::default(),
    )
    .unwrap();
    c.ping().unwrap();
    r.stop();
    let start = Instant::now();
    let e = c.get(&key("k")).unwrap_err();
    let took = start.elapsed();
    r.resume();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(c.broken(), Some(ErrorKind::Timeout));
    assert!(matches!(
        c.ping().unwrap_err(),
        Error::Broken(ErrorKind::Timeout)
    ));
    // A new connection works once the server runs again.
    resp2(&r).ping().unwrap();
}

#[test]
fn a_memcached_is_named_as_not_a_redis() {
    let mc = Memcached::start();
    let mut c = RespClient::connect(
        &mc.address.parse().unwrap(),
        Options::default(),
        &RespOptions::default(),
    )
    .unwrap();
    let e = c.ping().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Protocol);
    assert_eq!(
        e.to_string(),
        format!(
            "{} is not a Redis or Valkey: it answered 'ERROR' (RESP was expected; invalid \
             frame: unknown RESP type byte at byte 0)",
            mc.address
        )
    );
}

#[test]
fn nothing_listening_is_a_connect_error_naming_the_address() {
    let port = support::free_port();
    let address = format!("127.0.0.1:{port}");
    let e = RespClient::connect(
        &address.parse().unwrap(),
        Options::default(),
        &RespOptions::default(),
    )
    .err()
    .unwrap();
    assert_eq!(e.kind(), ErrorKind::ConnectRefused);
    assert!(
        e.to_string()
            .starts_with(&format!("cannot connect to {address}")),
        "{e}"
    );
}

#[test]
fn push_messages_between_replies_are_set_aside_not_taken_for_replies() {
    let r = Redis::start();
    let mut c = resp3(&r);
    let k = key("tracked");
    let on = c.call(&Command::new("CLIENT").arg("TRACKING").arg("ON"));
    assert_eq!(on.unwrap(), Value::Simple(b("OK")));
    assert_eq!(c.get(&k).unwrap(), None); // now tracked
                                          // Another client's write: the server queues an invalidation push to `c` before it reads
                                          // c's next command, so the push arrives ahead of that command's reply.
    resp2(&r).set(&k, b("v"), SetOptions::default()).unwrap();
    assert_eq!(c.get(&k).unwrap(), Some(b("v")));
    let (pushes, dropped) = c.take_pushes();
    assert_eq!(dropped, 0);
    assert_eq!(
        pushes,
        vec![Value::Push(vec![
            Value::Bulk(b("invalidate")),
            Value::Array(vec![Value::Bulk(b("tracked"))])
        ])]
    );
    assert!(c.take_pushes().0.is_empty());
}

#[test]
fn an_absurd_length_is_refused_at_once_not_waited_for() {
    // A fault no real server produces: a fake that announces a 100 GB bulk string.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = l.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 256];
        let _ = s.read(&mut buf);
        s.write_all(b"$100000000000\r\nabc").unwrap();
        std::thread::sleep(Duration::from_millis(500));
    });
    let options = Options {
        request_timeout: Duration::from_secs(10),
        ..Options::default()
    };
    let mut c =
        RespClient::connect(&address.parse().unwrap(), options, &RespOptions::default()).unwrap();
    let start = Instant::now();
    let e = c.get(&key("k")).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5), "waited for it");
    assert_eq!(e.kind(), ErrorKind::Protocol);
    assert_eq!(
        e.to_string(),
        format!(
            "{address} is not a Redis or Valkey: it answered '$100000000000' (RESP was \
             expected; invalid frame: value too large at byte 1)"
        )
    );
    assert_eq!(c.broken(), Some(ErrorKind::Protocol));
    server.join().unwrap();
}

/// A raw socket to the server, its replies cut by the codec.
struct Raw {
    s: std::net::TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    /// Sends `command` (may be empty) and returns the next whole reply's bytes.
    fn reply(&mut self, command: &str) -> Vec<u8> {
        use cachelab_client::proto::resp::{complete_len, Limits};
        use std::io::{Read, Write};
        self.s.write_all(command.as_bytes()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(n) = complete_len(&self.buf, &Limits::default()) {
                return self.buf.drain(..n).collect();
            }
            assert!(Instant::now() < deadline, "no whole reply to {command:?}");
            let mut chunk = [0u8; 4096];
            let n = self.s.read(&mut chunk).unwrap();
            assert!(n > 0, "closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[test]
fn every_resp3_type_a_real_redis_sends_decodes_and_re_encodes_to_its_bytes() {
    use cachelab_client::proto::resp::{parse, Limits};
    // DEBUG PROTOCOL <type> answers with one reply of each RESP3 type.
    let r = Redis::start_with(&["--enable-debug-command", "yes"]);
    let s = std::net::TcpStream::connect(&r.address).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut raw = Raw { s, buf: Vec::new() };
    raw.reply("HELLO 3\r\n");
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false",
    ];
    let mut kinds = Vec::new();
    for t in types {
        let wire = raw.reply(&format!("DEBUG PROTOCOL {t}\r\n"));
        let (v, n) = parse(&Bytes::from(wire.clone()), &Limits::default()).unwrap();
        assert_eq!(n, wire.len());
        let mut again = Vec::new();
        v.encode(&mut again);
        assert_eq!(again, wire, "{t}");
        kinds.push(match v {
            Value::Bulk(_) => "bulk",
            Value::Integer(_) => "integer",
            Value::Double(_) => "double",
            Value::BigNumber(_) => "bignum",
            Value::Null => "null",
            Value::Array(_) => "array",
            Value::Set(_) => "set",
            Value::Map(_) => "map",
            Value::Attributed { .. } => "attrib",
            Value::Push(_) => "push",
            Value::Verbatim { .. } => "verbatim",
            Value::Boolean(true) => "true",
            Value::Boolean(false) => "false",
            _ => "other",
        });
        if t == "push" {
            // The reply that follows the push message.
            let wire = raw.reply("");
            assert!(
                wire.starts_with(b"$"),
                "{:?}",
                String::from_utf8_lossy(&wire)
            );
        }
    }
    let mut want = types.to_vec();
    want[0] = "bulk";
    assert_eq!(kinds, want);
    // Through the client: the attribute is dropped by a typed command, kept by `call`; the
    // push is set aside and the reply after it returned.
    let mut c = resp3(&r);
    let attrib = Command::new("DEBUG").arg("PROTOCOL").arg("attrib");
    assert!(matches!(c.call(&attrib).unwrap(), Value::Attributed { .. }));
    let push = Command::new("DEBUG").arg("PROTOCOL").arg("push");
    let after = c.call(&push).unwrap();
    assert!(
        matches!(&after, Value::Bulk(b) if b.starts_with(b"Some real reply")),
        "{after:?}"
    );
    let (pushes, _) = c.take_pushes();
    assert_eq!(pushes.len(), 1);
}
