//! Fuzzing of the fixed-size records: the array superblock (all three layouts), the spare
//! record, the segment header and the per-block metadata.

use proptest::prelude::*;
use zapraid_fuzz::{example, fuzz, put_crc32c, Encoded};
use zerocopy::little_endian::{U32, U64};
use zerocopy::IntoBytes;

use super::super::*;
use crate::format::MAX_OPEN_SEGMENTS;
use zapraid_fuzz::{assert_field_error, fields_of, verdict};

/// (drives, drive index, data chunks) of a shape the format holds.
fn shape() -> impl Strategy<Value = (u32, u32, u32)> {
    (1..=MAX_DRIVES as u32).prop_flat_map(|drives| (Just(drives), 0..drives, 0..=drives))
}

/// Whether a decoded shape is one the format holds (the decoders' rule, said again).
fn shape_holds(drives: u32, index: u32, data: u32, parity: u32) -> bool {
    (1..=MAX_DRIVES as u32).contains(&drives) && index < drives && u64::from(data) + u64::from(parity) == drives.into()
}

fn superblock_fields() -> Vec<zapraid_fuzz::Field> {
    fields_of!(ArraySuperblock, 0;
        magic, version, superblock_bytes, array_uuid, drive_index, drive_count, data_chunks, parity_chunks,
        level, mode, small_segments, large_segments, chunk_bytes, group_size, block_size_bytes, reserved_zones,
        logical_blocks, stripe_timeout_ns, created_unix_s, name, generation, failed_drives, large_chunk_bytes,
        rebuilding_drives, l2p_budget_bytes, shard_count, shard_unit_blocks, crc32c)
}

/// A sealed superblock of random valid fields.
fn valid_superblock() -> impl Strategy<Value = ArraySuperblock> {
    let fields = (
        shape(),
        any::<[u8; 16]>(),
        0u8..=2,
        (0u8..=8, 0u8..=8),
        (1u32..=1 << 30, 1u32..=1 << 30, 0u32..1 << 20),
        (any::<u32>(), any::<u32>(), 1u64..=u64::MAX),
        (any::<u64>(), any::<u64>(), any::<[u8; 32]>(), any::<u64>()),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u8>()),
        (0u32..=crate::format::MAX_SHARDS, 1u32..=1 << 20),
    );
    fields.prop_map(
        |(
            (drives, index, data),
            array_uuid,
            mode,
            (small, large),
            (chunk, group, extra),
            (block_size, reserved_zones, logical_blocks),
            (timeout, created, name, generation),
            (failed, rebuilding, l2p, level),
            (shards, unit),
        )| {
            let mask = (1u64 << drives) - 1;
            ArraySuperblock {
                magic: [0; 8],
                version: 0.into(),
                superblock_bytes: 0.into(),
                array_uuid,
                drive_index: index.into(),
                drive_count: drives.into(),
                data_chunks: data.into(),
                parity_chunks: (drives - data).into(),
                level,
                mode,
                small_segments: small,
                large_segments: large,
                chunk_bytes: chunk.into(),
                group_size: group.into(),
                block_size_bytes: block_size.into(),
                reserved_zones: reserved_zones.into(),
                logical_blocks: logical_blocks.into(),
                stripe_timeout_ns: timeout.into(),
                created_unix_s: created.into(),
                name,
                generation: generation.into(),
                failed_drives: (failed & mask).into(),
                large_chunk_bytes: if large > 0 { chunk + 1 + extra } else { 0 }.into(),
                rebuilding_drives: (rebuilding & mask).into(),
                l2p_budget_bytes: l2p.into(),
                shard_count: shards.into(),
                shard_unit_blocks: if shards > 1 { unit } else { 0 }.into(),
                crc32c: 0.into(),
            }
            .seal()
        },
    )
}

/// A superblock encoded in `size` bytes: the current layout, or an older one (the fields it
/// lacks zero, its CRC right after its fields).
fn encode_superblock(mut s: ArraySuperblock, size: usize) -> Vec<u8> {
    if size == ARRAY_SUPERBLOCK_BYTES {
        return s.as_bytes().to_vec();
    }
    s.superblock_bytes = (size as u32).into();
    s.shard_count = 0.into();
    s.shard_unit_blocks = 0.into();
    if size < PRE_SHARD_ARRAY_SUPERBLOCK_BYTES {
        s.l2p_budget_bytes = 0.into();
    }
    if size == LEGACY_ARRAY_SUPERBLOCK_BYTES {
        s.rebuilding_drives = 0.into();
    }
    let mut bytes = s.as_bytes()[..size].to_vec();
    put_crc32c(&mut bytes, size - 4, 0..size - 4);
    bytes
}

/// The CRC where the size field says the layout puts it.
fn reseal_superblock(bytes: &mut [u8]) {
    let size = bytes.get(12..16).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
    let end = match size {
        Some(
            old @ (LEGACY_ARRAY_SUPERBLOCK_BYTES | PRE_L2P_ARRAY_SUPERBLOCK_BYTES | PRE_SHARD_ARRAY_SUPERBLOCK_BYTES),
        ) => old - 4,
        _ => ARRAY_SUPERBLOCK_BYTES - 4,
    };
    put_crc32c(bytes, end, 0..end);
}

fn superblock_is_sound(s: &ArraySuperblock) {
    let drives = s.drive_count.get();
    assert!(shape_holds(drives, s.drive_index.get(), s.data_chunks.get(), s.parity_chunks.get()), "{s:?}");
    assert!(s.chunk_bytes.get() > 0 && s.group_size.get() > 0 && s.mode <= 2 && s.logical_blocks.get() > 0, "{s:?}");
    assert!(s.failed_drives.get() >> drives == 0 && s.rebuilding_drives.get() >> drives == 0, "{s:?}");
    let open = s.open_segments();
    assert!(open.total() <= MAX_OPEN_SEGMENTS, "{s:?}");
    assert!(s.large_segments == 0 || s.large_chunk_bytes.get() > s.chunk_bytes.get(), "{s:?}");
    assert!(s.shards() <= crate::format::MAX_SHARDS && (s.shards() == 1 || s.shard_unit_blocks.get() > 0), "{s:?}");
    // Sealed again it is the current layout with the same fields.
    let again = ArraySuperblock::decode(s.seal().as_bytes()).expect("a decoded superblock seals and decodes again");
    assert_eq!(again.as_bytes()[16..ARRAY_SUPERBLOCK_BYTES - 4], s.as_bytes()[16..ARRAY_SUPERBLOCK_BYTES - 4]);
    let _ = s.name();
}

#[test]
fn array_superblock_fuzzed_past_its_checksum() {
    let layouts = prop_oneof![
        Just(ARRAY_SUPERBLOCK_BYTES),
        Just(PRE_SHARD_ARRAY_SUPERBLOCK_BYTES),
        Just(PRE_L2P_ARRAY_SUPERBLOCK_BYTES),
        Just(LEGACY_ARRAY_SUPERBLOCK_BYTES)
    ];
    let valid = (valid_superblock(), layouts).prop_map(|(s, size)| Encoded {
        bytes: encode_superblock(s, size),
        fields: superblock_fields(),
        context: (),
    });
    fuzz(
        "the array superblock",
        valid,
        |bytes, _| reseal_superblock(bytes),
        |bytes, _| {
            let result = ArraySuperblock::decode(bytes);
            if let Ok(s) = &result {
                superblock_is_sound(s);
            }
            verdict(&result)
        },
    );
}

#[test]
fn array_superblock_field_errors() {
    let s = example(valid_superblock());
    let mut bad = s;
    bad.mode = 3;
    assert_field_error(ArraySuperblock::decode(bad.seal().as_bytes()), "mode 3");
    // In the oldest layout too: its fields are checked after its own CRC.
    let mut bytes = encode_superblock(s, LEGACY_ARRAY_SUPERBLOCK_BYTES);
    bytes[std::mem::offset_of!(ArraySuperblock, drive_index)..][..4].copy_from_slice(&99u32.to_le_bytes());
    reseal_superblock(&mut bytes);
    assert_field_error(ArraySuperblock::decode(&bytes), "drive 99 of");
}

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

fn valid_segment_header() -> impl Strategy<Value = SegmentHeader> {
    let fields = (
        shape(),
        any::<[u8; 16]>(),
        (any::<u64>(), any::<u8>(), 0u8..=2, 0u8..=1),
        (1u32.., 1u32.., any::<u32>()),
        (any::<u64>(), any::<u64>()),
        proptest::collection::vec(any::<u32>(), MAX_DRIVES),
    );
    fields.prop_map(
        |(
            (drives, index, data),
            array_uuid,
            (sequence, level, mode, class),
            (chunk, group, block),
            (stripes, created),
            z,
        )| {
            let mut zones = [U32::new(0); MAX_DRIVES];
            for (zone, value) in zones.iter_mut().zip(&z).take(drives as usize) {
                *zone = (*value).into();
            }
            SegmentHeader {
                magic: [0; 8],
                version: 0.into(),
                header_bytes: 0.into(),
                array_uuid,
                segment_sequence: U64::new(sequence),
                drive_index: index.into(),
                drive_count: drives.into(),
                data_chunks: data.into(),
                parity_chunks: (drives - data).into(),
                level,
                mode,
                segment_class: class,
                reserved0: 0,
                chunk_blocks: chunk.into(),
                group_size: group.into(),
                block_size_bytes: block.into(),
                stripes: stripes.into(),
                created_timestamp: created.into(),
                zones,
                reserved1: 0.into(),
                crc32c: 0.into(),
            }
            .seal()
        },
    )
}

fn reseal_segment_header(bytes: &mut [u8]) {
    put_crc32c(bytes, SEGMENT_HEADER_BYTES - 4, 0..SEGMENT_HEADER_BYTES - 4);
}

#[test]
fn segment_header_fuzzed_past_its_checksum() {
    let mut fields = fields_of!(SegmentHeader, 0;
        magic, version, header_bytes, array_uuid, segment_sequence, drive_index, drive_count, data_chunks,
        parity_chunks, level, mode, segment_class, reserved0, chunk_blocks, group_size, block_size_bytes, stripes,
        created_timestamp, reserved1, crc32c);
    // Each drive's zone on its own.
    let zones = std::mem::offset_of!(SegmentHeader, zones);
    fields.extend((0..MAX_DRIVES).map(|i| zapraid_fuzz::Field::new(zones + 4 * i, 4)));
    let valid = valid_segment_header().prop_map(move |h| Encoded {
        bytes: h.as_bytes().to_vec(),
        fields: fields.clone(),
        context: (),
    });
    fuzz(
        "the segment header",
        valid,
        |bytes, _| reseal_segment_header(bytes),
        |bytes, _| {
            let result = SegmentHeader::decode(bytes);
            if let Ok(h) = &result {
                assert!(shape_holds(
                    h.drive_count.get(),
                    h.drive_index.get(),
                    h.data_chunks.get(),
                    h.parity_chunks.get()
                ));
                assert!(h.header_bytes.get() as usize == SEGMENT_HEADER_BYTES, "{h:?}");
                assert!(h.chunk_blocks.get() > 0 && h.group_size.get() > 0, "{h:?}");
                assert_eq!(h.seal().as_bytes(), &bytes[..SEGMENT_HEADER_BYTES]);
            }
            verdict(&result)
        },
    );
}

#[test]
fn segment_header_field_errors() {
    let mut h = example(valid_segment_header());
    h.drive_index = h.drive_count;
    let expected = format!("drive {0} of {0}", h.drive_count.get());
    assert_field_error(SegmentHeader::decode(h.seal().as_bytes()), &expected);
    let mut h = example(valid_segment_header());
    h.chunk_blocks = 0.into();
    assert_field_error(SegmentHeader::decode(h.seal().as_bytes()), "chunk 0 blocks");
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
