//! Fuzzing of the small fixed-size records: the spare record and the per-block metadata
//! (the array superblock and the segment header have files of their own).

use proptest::prelude::*;
use zapraid_fuzz::{assert_field_error, example, fields_of, fuzz, put_crc32c, verdict, Encoded};
use zerocopy::IntoBytes;

use super::super::*;

fn valid_spare_record() -> impl Strategy<Value = SpareRecord> {
    ("[a-z0-9-]{0,40}", any::<[u8; 16]>(), 1..=MAX_DRIVES as u32, 1u32.., any::<u64>()).prop_map(
        |(name, uuid, drives, block_size, created)| SpareRecord::new(uuid, &name, drives, block_size, created),
    )
}

fn reseal_spare_record(bytes: &mut [u8]) {
    put_crc32c(bytes, SPARE_RECORD_BYTES - 4, 0..SPARE_RECORD_BYTES - 4);
}

#[test]
fn spare_record_fuzzed_past_its_checksum() {
    let fields = fields_of!(SpareRecord, 0;
        magic, version, record_bytes, array_uuid, drive_index, drive_count, block_size_bytes, reserved0,
        created_unix_s, name, reserved1, crc32c);
    let valid = valid_spare_record().prop_map(move |r| Encoded {
        bytes: r.as_bytes().to_vec(),
        fields: fields.clone(),
        context: (),
    });
    fuzz(
        "the spare record",
        valid,
        |bytes, _| reseal_spare_record(bytes),
        |bytes, _| {
            let result = SpareRecord::decode(bytes);
            if let Ok(r) = &result {
                let drives = r.drive_count.get() as usize;
                assert!(
                    r.record_bytes.get() as usize == SPARE_RECORD_BYTES && r.drive_index.get() == SPARE_DRIVE_INDEX
                );
                assert!((1..=MAX_DRIVES).contains(&drives) && r.block_size_bytes.get() > 0, "{r:?}");
                assert_eq!(r.seal().as_bytes(), &bytes[..SPARE_RECORD_BYTES]);
                let _ = r.name();
            }
            verdict(&result)
        },
    );
}

#[test]
fn spare_record_field_errors() {
    let mut r = example(valid_spare_record());
    r.block_size_bytes = 0.into();
    let mut bytes = r.as_bytes().to_vec();
    reseal_spare_record(&mut bytes);
    assert_field_error(SpareRecord::decode(&bytes), "blocks of 0 bytes");
}

/// Block metadata after its block's data (whose length is the context): the metadata's
/// CRC covers both.
fn valid_block_metadata() -> impl Strategy<Value = Encoded<usize>> {
    let fields = (
        proptest::collection::vec(any::<u8>(), 1..=512),
        BLOCK_METADATA_BYTES..=64,
        (any::<u64>(), any::<u64>(), any::<u32>(), any::<u64>()),
        1u8..=7,
    );
    fields.prop_map(|(data, oob_bytes, (lba, timestamp, stripe, sequence), kind)| {
        let kind = BlockKind::from_u8(kind).expect("a kind");
        let mut oob = vec![0u8; oob_bytes];
        BlockMetadata::new(lba, timestamp, stripe, sequence, kind).encode(&data, &mut oob);
        let at = data.len();
        let fields = fields_of!(BlockMetadata, at; lba, timestamp, stripe_id, segment_sequence_low, magic, version, kind, crc32c);
        Encoded { bytes: [data, oob].concat(), fields, context: at }
    })
}

fn reseal_block_metadata(bytes: &mut [u8], data_bytes: usize) {
    put_crc32c(bytes, data_bytes + 28, 0..data_bytes + 28);
}

fn decode_block_metadata(bytes: &[u8], data_bytes: usize) -> Result<(BlockMetadata, BlockKind), DecodeError> {
    let (data, oob) = bytes.split_at(data_bytes.min(bytes.len()));
    BlockMetadata::decode(data, oob)
}

#[test]
fn block_metadata_fuzzed_past_its_checksum() {
    fuzz(
        "block metadata",
        valid_block_metadata(),
        |bytes, &data_bytes| reseal_block_metadata(bytes, data_bytes),
        |bytes, &data_bytes| {
            let result = decode_block_metadata(bytes, data_bytes);
            if let Ok((m, kind)) = &result {
                assert_eq!(
                    (m.magic.get(), u32::from(m.version), m.kind),
                    (BLOCK_METADATA_MAGIC, FORMAT_VERSION, *kind as u8)
                );
                assert!(m.verifies(&bytes[..data_bytes]));
            }
            verdict(&result)
        },
    );
}

#[test]
fn block_metadata_field_errors() {
    let mut encoded = example(valid_block_metadata());
    let data_bytes = encoded.context;
    encoded.bytes[data_bytes + std::mem::offset_of!(BlockMetadata, kind)] = 9;
    reseal_block_metadata(&mut encoded.bytes, data_bytes);
    assert_field_error(decode_block_metadata(&encoded.bytes, data_bytes), "block kind 9");
}
