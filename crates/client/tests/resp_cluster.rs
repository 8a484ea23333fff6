//! The Redis Cluster client: hash slots against redis-py's (a golden file it wrote), and
//! routing, MGET, MOVED, ASK, TRYAGAIN and a redirection loop against a real 3-master cluster
//! (`support::cluster`, one per test binary), with redis-cli as the third party.

mod support;

use std::collections::BTreeSet;

use bytes::Bytes;
use cachelab_client::proto::resp::{Command, RespKey, Value};
use cachelab_client::resp::{
    key_slot, ClusterOptions, Protocol, RespClient, RespCluster, RespOptions, RespUrl, SetOptions,
    SlotMap,
};
use cachelab_client::{Address, Error, ErrorKind, Options};
use support::cluster::{shared, Cluster};
use support::redis::Redis;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn every_key_s_slot_is_redis_py_s() {
    // Written by redis-py's redis.crc.key_slot: see tests/data/key_slots.py.
    let golden = include_str!("data/key_slots.tsv");
    let mut checked = 0;
    for line in golden.lines() {
        let (hex, slot) = line.split_once('\t').unwrap();
        let key = unhex(hex);
        assert_eq!(
            key_slot(&key),
            slot.parse::<u16>().unwrap(),
            "key {:?}",
            String::from_utf8_lossy(&key)
        );
        checked += 1;
    }
    assert!(checked > 2000, "{checked} keys");
}

fn key(s: &str) -> RespKey {
    RespKey::new(s.to_string()).unwrap()
}

fn connect(c: &Cluster, protocol: Protocol) -> RespCluster {
    let options = ClusterOptions {
        resp: RespOptions {
            protocol,
            ..RespOptions::default()
        },
        ..ClusterOptions::default()
    };
    RespCluster::connect(&c.seeds(), Options::default(), &options).unwrap()
}

/// Keys of many slots, with the hash tags of the cluster spec.
fn test_keys(prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = [
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "{}",
        "a{b}c{d}",
        "{a",
        "x}y{",
    ]
    .iter()
    .map(|k| format!("{prefix}{k}"))
    .collect();
    keys.extend((0..150).map(|i| format!("{prefix}key:{i}")));
    keys.extend((0..30).map(|i| format!("{{{prefix}tag{i}}}:v")));
    keys
}

#[test]
fn routing_matches_the_cluster_key_by_key() {
    let (_lock, c) = shared();
    let mut client = connect(c, Protocol::Resp2);
    let keys = test_keys("route:");
    // The cluster's own answer: CLUSTER KEYSLOT for each key, CLUSTER NODES for the owners.
    let asked: Vec<String> = keys
        .iter()
        .map(|k| format!("CLUSTER KEYSLOT \"{k}\""))
        .collect();
    let slots = c.nodes[0].cli_batch(&asked);
    let owners = c.owners();
    let mut used = BTreeSet::new();
    for (k, slot) in keys.iter().zip(&slots) {
        let slot: u16 = slot.parse().unwrap();
        assert_eq!(key_slot(k.as_bytes()), slot, "{k}");
        let owner = owners[slot as usize].clone().unwrap();
        assert_eq!(
            client.node_for(k.as_bytes()).map(|a| a.to_string()),
            Some(owner.clone()),
            "{k}"
        );
        used.insert(owner);
    }
    assert_eq!(used.len(), 3, "the keys span the three masters");
    // Writes go straight to the owner: no redirection, and each key is on that node.
    for k in &keys {
        assert!(client
            .set(
                &key(k),
                Bytes::from(format!("v-{k}")),
                SetOptions::default()
            )
            .unwrap());
    }
    assert_eq!((client.stats().moved, client.stats().ask), (0, 0));
    for n in &c.nodes {
        let here: Vec<&String> = keys
            .iter()
            .filter(|k| client.node_for(k.as_bytes()).unwrap().to_string() == n.address)
            .collect();
        let gets: Vec<String> = here.iter().map(|k| format!("GET \"{k}\"")).collect();
        for (k, got) in here.iter().zip(n.cli_batch(&gets)) {
            assert_eq!(got, format!("v-{k}"), "{k} on {}", n.address);
        }
    }
    let all: Vec<RespKey> = keys.iter().map(|k| key(k)).collect();
    assert_eq!(client.unlink(&all).unwrap(), keys.len() as u64);
    assert_eq!(client.get(&all[0]).unwrap(), None);
}

#[test]
fn mget_over_the_three_masters_returns_values_in_key_order() {
    let (_lock, c) = shared();
    // RESP3: CLUSTER SHARDS comes as maps.
    let mut client = connect(c, Protocol::Resp3);
    assert_eq!(client.slot_map().covered(), 16384);
    assert_eq!(client.slot_map().nodes().len(), 3);
    let keys: Vec<RespKey> = (0..60).map(|i| key(&format!("mget:{i}"))).collect();
    let nodes: BTreeSet<String> = keys
        .iter()
        .map(|k| client.node_for(k.as_bytes()).unwrap().to_string())
        .collect();
    assert_eq!(nodes.len(), 3);
    // Every third key is a miss.
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 3 != 0) {
        let v = Bytes::from(format!("value-{i}"));
        client.set(k, v, SetOptions::default()).unwrap();
    }
    let got = client.mget(&keys).unwrap();
    let want: Vec<Option<Bytes>> = (0..60)
        .map(|i| (i % 3 != 0).then(|| Bytes::from(format!("value-{i}"))))
        .collect();
    assert_eq!(got, want);
    assert_eq!(client.mget(&[]).unwrap(), Vec::<Option<Bytes>>::new());
    // Each master holds its own share.
    let mut total = 0;
    let masters: Vec<Address> = client
        .slot_map()
        .nodes()
        .iter()
        .map(|n| n.address.clone())
        .collect();
    for m in &masters {
        let here = keys
            .iter()
            .enumerate()
            .filter(|(i, k)| i % 3 != 0 && client.node_for(k.as_bytes()) == Some(m))
            .count();
        let cmd = Command::new("KEYS").arg("mget:*");
        match client.call_node(m, &cmd).unwrap() {
            Value::Array(found) => assert_eq!(found.len(), here, "{m}"),
            v => panic!("{v:?}"),
        }
        total += here;
    }
    assert_eq!(total, 40);
    assert_eq!(client.del(&keys).unwrap(), 40);
    assert_eq!(client.mget(&keys[..5]).unwrap(), vec![None; 5]);
}

#[test]
fn cluster_slots_and_cluster_shards_give_the_same_map() {
    let (_lock, c) = shared();
    let seed: Address = c.nodes[0].address.parse().unwrap();
    let mut raw = RespClient::connect(&seed, Options::default(), &RespOptions::default()).unwrap();
    let slots = raw.call(&Command::new("CLUSTER").arg("SLOTS")).unwrap();
    let shards = raw.call(&Command::new("CLUSTER").arg("SHARDS")).unwrap();
    let (a, b) = (
        SlotMap::from_slots(&slots, &seed).unwrap(),
        SlotMap::from_shards(&shards, &seed, false).unwrap(),
    );
    let owners = c.owners();
    for s in 0..16384u16 {
        let want = owners[s as usize].as_deref();
        assert_eq!(a.owner(s).map(|x| x.to_string()).as_deref(), want);
        assert_eq!(b.owner(s).map(|x| x.to_string()).as_deref(), want);
    }
}

/// Another master than `of`.
fn other<'a>(c: &'a Cluster, of: &str) -> &'a support::cluster::Node {
    c.nodes.iter().find(|n| n.address != of).unwrap()
}

#[test]
fn ask_during_a_migration_then_moved_after_it() {
    let (_lock, c) = shared();
    let mut client = connect(c, Protocol::Resp2);
    let (k1, k2) = (key("{mig}:1"), key("{mig}:2"));
    let slot = key_slot(b"{mig}").to_string();
    let from = c.node(&client.node_for(b"{mig}").unwrap().to_string());
    let to = other(c, &from.address);
    for k in [&k1, &k2] {
        client
            .set(k, Bytes::from("v"), SetOptions::default())
            .unwrap();
    }
    // The slot half migrated: {mig}:1 moved to `to`, the slot still MIGRATING on `from`.
    assert_eq!(
        to.cli(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from.id]),
        "OK"
    );
    assert_eq!(
        from.cli(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to.id]),
        "OK"
    );
    let port = to.port.to_string();
    let migrate = ["MIGRATE", &to.host, &port, "", "0", "5000", "KEYS"];
    assert_eq!(from.cli(&[&migrate[..], &["{mig}:1"]].concat()), "OK");
    // ASK: ASKING then GET on `to`; the map keeps `from`.
    assert_eq!(client.get(&k1).unwrap(), Some(Bytes::from("v")));
    assert_eq!((client.stats().ask, client.stats().moved), (1, 0));
    assert_eq!(client.node_for(b"{mig}").unwrap().to_string(), from.address);
    // A key not moved yet is still served by `from`, with no redirection.
    assert_eq!(client.get(&k2).unwrap(), Some(Bytes::from("v")));
    assert_eq!(client.stats().ask, 1);
    // Both keys at once: split between the two nodes, a named TRYAGAIN.
    let e = client.mget(&[k1.clone(), k2.clone()]).unwrap_err();
    assert!(matches!(e, Error::TryAgain { .. }), "{e}");
    assert_eq!(e.kind(), ErrorKind::ServerError);
    assert!(e.to_string().contains("TRYAGAIN"), "{e}");
    // The migration finishes; the client, still on the old map, is told MOVED.
    assert_eq!(from.cli(&[&migrate[..], &["{mig}:2"]].concat()), "OK");
    c.on_all(&["CLUSTER", "SETSLOT", &slot, "NODE", &to.id]);
    // An MGET whose {mig} part is sent to the old owner: MOVED, followed, values in order.
    let elsewhere = key("mig:elsewhere");
    client
        .set(&elsewhere, Bytes::from("e"), SetOptions::default())
        .unwrap();
    let before = client.stats();
    assert_eq!(
        client
            .mget(&[k2.clone(), elsewhere.clone(), k1.clone()])
            .unwrap(),
        vec![
            Some(Bytes::from("v")),
            Some(Bytes::from("e")),
            Some(Bytes::from("v"))
        ]
    );
    let after = client.stats();
    assert_eq!(after.moved, before.moved + 1);
    assert!(after.refreshes > before.refreshes);
    assert_eq!(client.node_for(b"{mig}").unwrap().to_string(), to.address);
    // Straight to the new owner from now on.
    assert_eq!(
        client.mget(&[k1.clone(), k2.clone()]).unwrap(),
        vec![Some(Bytes::from("v")); 2]
    );
    assert_eq!(client.stats().moved, after.moved);
    assert_eq!(client.unlink(&[k1, k2, elsewhere]).unwrap(), 3);
}

#[test]
fn a_redirection_loop_ends_in_a_clear_error() {
    let (_lock, c) = shared();
    let url: RespUrl = format!("redis://{}", c.nodes[1].address).parse().unwrap();
    let mut client =
        RespCluster::connect_url(&url, Options::default(), &ClusterOptions::default()).unwrap();
    let slot = key_slot(b"{loop}").to_string();
    let from = c.node(&client.node_for(b"{loop}").unwrap().to_string());
    let to = other(c, &from.address);
    // MIGRATING on one side only: `from` answers ASK for a missing key, `to` (not importing)
    // answers MOVED back to `from`, and so on.
    assert_eq!(
        from.cli(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to.id]),
        "OK"
    );
    let result = client.get(&key("{loop}:missing"));
    assert_eq!(from.cli(&["CLUSTER", "SETSLOT", &slot, "STABLE"]), "OK");
    let e = result.unwrap_err();
    let Error::Redirections { count, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(*count, 5);
    assert_eq!(e.kind(), ErrorKind::ServerError);
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!(
            "GET (slot {slot}): still redirected after 5 redirections"
        )),
        "{shown}"
    );
    // The slot is stable again: the same client goes on.
    assert_eq!(client.get(&key("{loop}:missing")).unwrap(), None);
}

#[test]
fn a_server_that_is_no_cluster_node_is_named() {
    let r = Redis::start();
    let seed: Address = r.address.parse().unwrap();
    let e = RespCluster::connect(&[seed], Options::default(), &ClusterOptions::default())
        .err()
        .unwrap();
    assert!(matches!(e, Error::NotCluster { .. }), "{e}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("{} is not a Redis Cluster node", r.address)),
        "{shown}"
    );
    assert!(shown.contains("cluster support disabled"), "{shown}");
}

#[test]
fn no_seed_that_answers_is_the_connect_error() {
    let port = support::free_port();
    let seed: Address = format!("127.0.0.1:{port}").parse().unwrap();
    let e = RespCluster::connect(&[seed], Options::default(), &ClusterOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::ConnectRefused, "{e}");
    let e = RespCluster::connect(&[], Options::default(), &ClusterOptions::default())
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("no cluster node to connect to"),
        "{e}"
    );
}

#[test]
fn a_seed_that_does_not_answer_is_passed_over() {
    let (_lock, c) = shared();
    let dead: Address = format!("127.0.0.1:{}", support::free_port())
        .parse()
        .unwrap();
    let seeds = [dead, c.seeds()[2].clone()];
    let client =
        RespCluster::connect(&seeds, Options::default(), &ClusterOptions::default()).unwrap();
    assert_eq!(client.slot_map().covered(), 16384);
}
