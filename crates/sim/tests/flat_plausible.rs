//! oracleGeneral files are checked for plausibility as they are read: a file that is not a
//! trace is refused naming the first bad record and field, a trace with a few bad records is
//! read and its doubts counted, and the reference trace passes untouched.

use std::fs;
use std::path::{Path, PathBuf};

use cachelab_sim::flat::{FlatTrace, SimTrace};
use cachelab_sim::policy::{simulate_file, Unit};
use cachelab_sim::{Location, TraceError};
use rand::{rngs::SmallRng, RngCore, SeedableRng};

const RECORD: usize = 24;

fn reference() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/traces/cloudPhysicsIO.oracleGeneral.bin")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cachelab-plaus-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn record(time: u32, id: u64, size: u32, next: i64) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[0..4].copy_from_slice(&time.to_le_bytes());
    r[4..12].copy_from_slice(&id.to_le_bytes());
    r[12..16].copy_from_slice(&size.to_le_bytes());
    r[16..24].copy_from_slice(&next.to_le_bytes());
    r
}

/// Time of record `i` in [`plausible`].
fn at(i: usize) -> u32 {
    100_000 + i as u32
}

/// `n` plausible records: one a second, ids cycling over 50, sizes 100..4196 B, no next.
fn plausible(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| record(at(i), (i % 50) as u64, 100 + (i % 4096) as u32, -1))
        .collect()
}

fn set(data: &mut [u8], i: usize, r: [u8; RECORD]) {
    data[i * RECORD..(i + 1) * RECORD].copy_from_slice(&r);
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, data).unwrap();
    p
}

/// Every way of reading an oracleGeneral file must refuse it with the same error.
fn refused_everywhere(path: &Path) -> TraceError {
    let e = FlatTrace::read(path, None, true).unwrap_err();
    assert_eq!(FlatTrace::load(path, None).unwrap_err(), e);
    assert_eq!(SimTrace::load(path, None).unwrap_err(), e);
    assert_eq!(
        simulate_file(path, None, "lru", 10, Unit::Objects).unwrap_err(),
        e
    );
    let bytes = fs::read(path).unwrap();
    let shown = path.display().to_string();
    let parsed = FlatTrace::parse(&bytes, cachelab_sim::flat::Format::Oracle, &shown);
    assert_eq!(parsed.unwrap_err(), e);
    e
}

#[test]
fn the_reference_trace_has_no_doubts() {
    let (t, doubts) = FlatTrace::read(reference(), None, true).unwrap();
    assert_eq!(t.len(), 113_872);
    assert_eq!(doubts, None);
}

#[test]
fn random_bytes_are_refused_at_the_first_record() {
    let dir = tmpdir("random");
    let mut rng = SmallRng::seed_from_u64(16);
    for n in [1usize, 3, 63, 64, 200, 10_000] {
        let mut data = vec![0u8; n * RECORD];
        rng.fill_bytes(&mut data);
        let path = write(&dir, "x.oracleGeneral.bin", &data);
        let e = refused_everywhere(&path);
        assert_eq!(e.location, Location::File);
        assert!(e.message.starts_with("record 1: "), "{e}");
        assert!(
            e.message.ends_with("is this an oracleGeneral trace?"),
            "{e}"
        );
        assert!(e
            .to_string()
            .starts_with(&format!("{}: record 1: ", path.display())));
    }
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_first_bad_field_is_named_with_its_value_and_limit() {
    let dir = tmpdir("fields");
    let cases: &[([u8; RECORD], &str)] = &[
        (
            record(5, 1, 1 << 31, -1),
            "record 1: object size 2147483648 B is not plausible (limit 1 GiB)",
        ),
        (
            record(5, 1, (1 << 30) + 1, -1),
            "record 1: object size 1073741825 B is not plausible (limit 1 GiB)",
        ),
        (
            record(5, 1, 10, 0),
            "record 1: next access 0 is not plausible",
        ),
        (
            record(5, 1, 10, -7),
            "record 1: next access -7 is not plausible",
        ),
    ];
    for (rec, words) in cases {
        let data: Vec<u8> = (0..100).flat_map(|_| *rec).collect();
        let e = refused_everywhere(&write(&dir, "t.bin", &data));
        assert!(e.message.starts_with(words), "{e}");
        assert!(
            e.message
                .contains("all of the first 64 records are implausible"),
            "{e}"
        );
    }
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn most_records_implausible_is_refused_with_the_count() {
    let dir = tmpdir("most");
    let mut data = plausible(100);
    for i in (0..100).filter(|i| i % 3 != 0) {
        set(&mut data, i, record(at(i), 1, u32::MAX, -1));
    }
    let e = refused_everywhere(&write(&dir, "t.bin", &data));
    assert!(
        e.message
            .starts_with("record 2: object size 4294967295 B is not plausible"),
        "{e}"
    );
    assert!(
        e.message.contains("66 of 100 records are implausible"),
        "{e}"
    );
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_few_bad_records_are_read_as_they_are_and_counted() {
    let dir = tmpdir("few");
    let mut data = plausible(1000);
    set(&mut data, 10, record(at(10), 3, 3_000_000_000, -1)); // huge object
    set(&mut data, 20, record(at(20), 3, 10, 5)); // next access before itself
    set(&mut data, 30, record(u32::MAX, 3, 10, -1)); // a time spike: one record, not two
    set(&mut data, 40, record(at(40), 3, 10, 1 << 50)); // next access past any trace
    let path = write(&dir, "t.bin", &data);
    let (t, doubts) = FlatTrace::read(&path, None, true).unwrap();
    assert_eq!(t.len(), 1000);
    assert_eq!(t.sizes[10], 3_000_000_000);
    let d = doubts.unwrap();
    assert_eq!((d.records, d.implausible, d.first.0), (1000, 4, 11));
    assert_eq!(
        d.to_string(),
        format!(
            "{}: 4 of 1000 records are implausible and were read as they are (the first: \
             record 11: object size 3000000000 B is not plausible (limit 1 GiB))",
            path.display()
        )
    );
    // The other readers accept it too, and unchecked reading sees no doubts.
    assert_eq!(SimTrace::load(&path, None).unwrap().len(), 1000);
    assert!(simulate_file(&path, None, "lru", 10, Unit::Objects)
        .unwrap()
        .is_some());
    assert_eq!(FlatTrace::read(&path, None, false).unwrap(), (t, None));
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn timestamps_may_wobble_but_not_leap() {
    let dir = tmpdir("time");
    let doubts = |data: &[u8]| {
        let p = write(&dir, "t.bin", data);
        FlatTrace::read(&p, None, true).unwrap().1
    };
    // Back by an hour, and a gap of a year: plausible.
    let mut data = plausible(200);
    set(&mut data, 50, record(at(49) - 3600, 1, 10, -1));
    for i in 100..200 {
        set(&mut data, i, record(at(i) - 1 + 365 * 86_400, 1, 10, -1));
    }
    assert_eq!(doubts(&data), None);
    // Back by more than an hour: one record.
    let mut data = plausible(200);
    set(&mut data, 50, record(at(49) - 3601, 1, 10, -1));
    let d = doubts(&data).unwrap();
    assert_eq!((d.implausible, d.first.0), (1, 51));
    assert!(
        d.to_string()
            .contains("time 96448 is not plausible: 3601 s before 100049 (limit 1 hour back)"),
        "{d}"
    );
    // A year and a second ahead: one record.
    let mut data = plausible(200);
    set(&mut data, 50, record(at(49) + 365 * 86_400 + 1, 1, 10, -1));
    assert_eq!(doubts(&data).unwrap().implausible, 1);
    // A clock that jumps by decades once costs one record, not the rest of the file.
    let mut data = plausible(200);
    for i in 100..200 {
        set(&mut data, i, record(4_000_000_000 + i as u32, 1, 10, -1));
    }
    let d = doubts(&data).unwrap();
    assert_eq!((d.implausible, d.first.0), (1, 101));
    assert!(
        d.to_string()
            .contains("s after 100099 (limit 1 year ahead)"),
        "{d}"
    );
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_garbage_head_is_refused_even_if_the_rest_is_a_trace() {
    let dir = tmpdir("head");
    let mut data = plausible(10_000);
    for i in 0..64 {
        set(&mut data, i, record(at(i), 1, 10, 0));
    }
    let e = refused_everywhere(&write(&dir, "t.bin", &data));
    assert!(e.message.starts_with("record 1: next access 0"), "{e}");
    // 63 bad records at the head of 10,000 are only doubts.
    set(&mut data, 63, record(at(63), 1, 10, -1));
    let p = write(&dir, "t.bin", &data);
    assert_eq!(
        FlatTrace::read(&p, None, true)
            .unwrap()
            .1
            .unwrap()
            .implausible,
        63
    );
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_of_partial_records_asks_whether_it_is_a_trace() {
    let dir = tmpdir("partial");
    let e = FlatTrace::load(write(&dir, "t.bin", &plausible(3)[..70]), None).unwrap_err();
    assert_eq!(e.location, Location::Offset(48));
    assert!(e.message.contains("is this an oracleGeneral trace?"), "{e}");
    fs::remove_dir_all(dir).unwrap();
}
