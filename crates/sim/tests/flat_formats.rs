//! Reading, writing and converting flat traces; malformed input names the file and the line
//! or byte offset.

use std::fs;
use std::path::{Path, PathBuf};

use cachelab_sim::flat::{FlatTrace, Format};
use cachelab_sim::{Location, TraceError};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/traces")
        .join(name)
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cachelab-flat-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn load_bytes(dir: &Path, name: &str, bytes: &[u8]) -> Result<FlatTrace, TraceError> {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    FlatTrace::load(&p, None)
}

/// Each malformed file, the location its error must name, and words the message must hold.
#[test]
fn malformed_inputs_name_file_and_place() {
    let dir = tmpdir("bad");
    let cases: &[(&str, &[u8], Location, &str)] = &[
        ("empty.csv", b"", Location::File, "empty"),
        ("empty.bin", b"", Location::File, "empty"),
        ("empty.txt", b"", Location::File, "empty"),
        ("blank.txt", b"\n\n", Location::File, "no requests"),
        (
            "nokey.csv",
            b"time,size\n1,2\n",
            Location::Line(1),
            "key column",
        ),
        (
            "fields.csv",
            b"time,key,size\n1,2,3\n1,2\n",
            Location::Line(3),
            "bad line",
        ),
        (
            "neg.csv",
            b"time,key,size\n1,2,3\n1,2,-4\n",
            Location::Line(3),
            "negative size",
        ),
        (
            "nan.csv",
            b"time,key,size\n1,2,x\n",
            Location::Line(2),
            "non-numeric size",
        ),
        (
            "big.csv",
            b"time,key,size\n1,2,4294967296\n",
            Location::Line(2),
            "larger",
        ),
        (
            "time.csv",
            b"time,key,size\n-1,2,3\n",
            Location::Line(2),
            "bad time",
        ),
        (
            "nokeyval.csv",
            b"time,key,size\n1,,3\n",
            Location::Line(2),
            "empty key",
        ),
        ("two.txt", b"a\nb c\n", Location::Line(2), "bad line"),
        (
            "trunc.bin",
            &[0u8; 24 * 2 + 5],
            Location::Offset(48),
            "truncated record",
        ),
    ];
    for (name, bytes, loc, words) in cases {
        let e = load_bytes(&dir, name, bytes).expect_err(name);
        assert!(e.path.ends_with(name), "{name}: {e}");
        assert_eq!(e.location, *loc, "{name}: {e}");
        assert!(e.message.contains(words), "{name}: {e}");
        let shown = e.to_string();
        assert!(shown.contains(name), "{shown}");
    }
    let missing = FlatTrace::load(dir.join("nope.csv"), None).unwrap_err();
    assert!(missing.message.contains("cannot read"), "{missing}");
    let unknown = FlatTrace::load(dir.join("x.parquet"), None).unwrap_err();
    assert_eq!(unknown.location, Location::File);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn csv_columns_found_by_name_with_ops_and_hashed_keys() {
    let dir = tmpdir("csv");
    let t = load_bytes(
        &dir,
        "t.csv",
        b"op , obj_size,extra,TIME,obj_id\r\nget,10,x,5,abc\r\nset,20,y,6,17\r\ndelete,0,z,7,abc\r\n",
    )
    .unwrap();
    assert_eq!(t.times, vec![5, 6, 7]);
    assert_eq!(t.sizes, vec![10, 20, 0]);
    assert_eq!(t.ids[1], 17);
    assert_eq!(t.ids[0], t.ids[2]);
    assert_eq!(t.ids[0], cachelab_sim::flat::key_hash(b"abc"));
    assert_eq!(t.deletes(), Some(vec![false, false, true]));
    // Round trip keeps the ops.
    let out = dir.join("out.csv");
    t.write(&out, None).unwrap();
    assert_eq!(
        fs::read_to_string(&out).unwrap(),
        format!(
            "time,key,size,op\n5,{0},10,get\n6,17,20,set\n7,{0},0,delete\n",
            t.ids[0]
        )
    );
    assert_eq!(FlatTrace::load(&out, None).unwrap(), t);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn oracle_writer_reproduces_libcachesim_file_byte_for_byte() {
    // The reference binary was written by libCacheSim's traceConv, next_access_vtime included.
    let src = data("cloudPhysicsIO.oracleGeneral.bin");
    let t = FlatTrace::load(&src, None).unwrap();
    let dir = tmpdir("oracle");
    let out = dir.join("copy.oracleGeneral");
    t.write(&out, None).unwrap();
    assert!(fs::read(&out).unwrap() == fs::read(&src).unwrap());
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn convert_between_all_formats() {
    let t = FlatTrace::load(data("zipf_1.0.txt"), None).unwrap();
    assert_eq!(t.len(), 1_000_000);
    let dir = tmpdir("convert");
    for f in Format::ALL {
        let p = dir.join(format!("z.{}", f.name()));
        t.write(&p, Some(f)).unwrap();
        let back = FlatTrace::load(&p, Some(f)).unwrap();
        assert_eq!(back, t, "{}", f.name());
    }
    // Only the finished file is left behind.
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn failed_write_leaves_nothing() {
    let dir = tmpdir("fail");
    let t = FlatTrace::load(data("zipf_1.0.txt"), None).unwrap();
    // Unknown extension: refused before anything is created.
    assert!(t.write(dir.join("z.unknown"), None).is_err());
    // Target is a directory: the rename fails and the temporary file is removed.
    fs::create_dir(dir.join("taken.csv")).unwrap();
    assert!(t.write(dir.join("taken.csv"), None).is_err());
    let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn format_detection() {
    assert_eq!(Format::from_path(Path::new("a/b.CSV")), Some(Format::Csv));
    assert_eq!(
        Format::from_path(Path::new("x.oracleGeneral.bin")),
        Some(Format::Oracle)
    );
    assert_eq!(
        Format::from_path(Path::new("x.oracleGeneral")),
        Some(Format::Oracle)
    );
    assert_eq!(Format::from_path(Path::new("x.txt")), Some(Format::Lines));
    assert_eq!(Format::from_path(Path::new("x.zst")), None);
    assert_eq!(Format::parse("oracleGeneral"), Some(Format::Oracle));
}

#[test]
fn a_fifo_in_the_way_is_never_opened_nor_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tmpdir("fifo");
    let t = FlatTrace::load(data("zipf_1.0.txt"), None).unwrap();
    let fifo = dir.join("in-the-way.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !matches!(made, Ok(s) if s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    // Opening a FIFO for writing would block with no reader: refused instead, at once.
    let err = t.write(&fifo, None).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "a temporary file was left: {left:?}");
    fs::remove_dir_all(dir).unwrap();
}
