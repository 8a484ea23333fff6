//! What the engine's integration tests share: a spec every test starts from (a closed loop
//! against one server, memcached's protocol), each changing what it tests.

use std::time::Duration;

use cachelab_load::{DistSpec, Mix, Mode, Pool, Spec, Stop};

pub fn spec(address: &str) -> Spec {
    Spec {
        pool: Pool::single(address.parse().unwrap()),
        connections: 4,
        threads: 2,
        pipeline: 4,
        max_outstanding: 64,
        mode: Mode::Closed,
        mix: Mix {
            get: 0.6,
            multiget: 0.1,
            set: 0.2,
            delete: 0.1,
        },
        multiget_keys: 5,
        key_space: 2000,
        key_dist: DistSpec {
            name: "zipf".into(),
            params: vec![0.9],
        },
        value_size: DistSpec {
            name: "uniform".into(),
            params: vec![10.0, 500.0],
        },
        prefix: "cachelab-test:load".into(),
        ttl: 0,
        stop: Stop::Requests(20_000),
        warmup: Duration::ZERO,
        prefill: false,
        interval: Duration::from_millis(200),
        options: Default::default(),
        give_up_after: Duration::from_secs(5),
        stall: Duration::from_millis(100),
        seed: 42,
        server_pid: None,
        busy_poll: Duration::ZERO,
        spin: Duration::ZERO,
        send_batch: 1,
        behind: Vec::new(),
        on_miss_set: false,
        probe_rate: None,
        cleanup: true,
        protocol: Default::default(),
    }
}
