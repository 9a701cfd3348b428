use std::path::Path;

use super::files::file_header;
use super::format::{crc32, AOF_MAGIC};
use super::replay::{read_stream, StreamEnd};
use super::*;

#[test]
fn the_record_crc_is_crc32fast_s() {
    let data: Vec<u8> = (0..600u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for len in 0..data.len() {
        for start in [0, 1, 3, 7] {
            let b = &data[start.min(len)..len];
            assert_eq!(crc32(b), crc32fast::hash(b), "{} bytes", b.len());
        }
    }
}

#[test]
fn roundtrip() {
    let mut data = file_header(AOF_MAGIC, 0).to_vec();
    put_set(&mut data, b"k", b"v", 7);
    put_del(&mut data, [&b"a"[..], b"b"].into_iter());
    put_mset(&mut data, [(&b"x"[..], &b"1"[..])].into_iter());
    let before_last = data.len();
    put_flushall(&mut data);
    let mut ops = Vec::new();
    let end = read_stream(&data, FILE_HEADER, Path::new("t"), |op| {
        ops.push(format!("{op:?}"));
        Ok(())
    })
    .unwrap();
    assert_eq!(end, StreamEnd::Clean);
    assert_eq!(ops.len(), 4);
    // every cut inside the last record is a truncation, never an error
    let last = before_last;
    for cut in last + 1..data.len() {
        let end = read_stream(&data[..cut], FILE_HEADER, Path::new("t"), |_| Ok(())).unwrap();
        assert_eq!(end, StreamEnd::Truncated(last));
    }
    // any flipped byte in the first record is an error
    for i in FILE_HEADER..FILE_HEADER + rec_set(b"k", b"v", 7).len() {
        let mut bad = data.clone();
        bad[i] ^= 0x40;
        assert!(read_stream(&bad, FILE_HEADER, Path::new("t"), |_| Ok(())).is_err());
    }
}
