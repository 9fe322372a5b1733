//! Tests of the on-disk formats: segment headers, footers, block metadata and fields.

use super::*;
use proptest::prelude::*;
use zerocopy::little_endian::U32;
use zerocopy::IntoBytes;

fn header() -> SegmentHeader {
    let mut zones = [U32::new(0); MAX_DRIVES];
    for (i, z) in zones.iter_mut().take(4).enumerate() {
        *z = (10 + i as u32).into();
    }
    SegmentHeader {
        magic: [0; 8],
        version: 0.into(),
        header_bytes: 0.into(),
        array_uuid: [9; 16],
        segment_sequence: 77.into(),
        drive_index: 2.into(),
        drive_count: 4.into(),
        data_chunks: 3.into(),
        parity_chunks: 1.into(),
        level: 5,
        mode: 0,
        segment_class: 0,
        reserved0: 0,
        chunk_blocks: 1.into(),
        group_size: 256.into(),
        block_size_bytes: 4096.into(),
        stripes: 1000.into(),
        created_timestamp: 5.into(),
        zones,
        reserved1: 0.into(),
        crc32c: 0.into(),
    }
    .seal()
}

fn flips_detected(bytes: &[u8], decode: impl Fn(&[u8]) -> bool) {
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.to_vec();
        b[bit / 8] ^= 1 << (bit % 8);
        assert!(!decode(&b), "bit {bit} flip went undetected");
    }
}

#[test]
fn segment_header_round_trips_and_every_bit_flip_is_detected() {
    let h = header();
    let decoded = SegmentHeader::decode(h.as_bytes()).unwrap();
    assert_eq!(decoded.zones[3].get(), 13);
    flips_detected(h.as_bytes(), |b| SegmentHeader::decode(b).is_ok());
}

/// A declustered header's lanes: segment 17 of an array of 11 drives, lanes 0..4 on drives
/// 5, 0, 9 and 2.
fn lanes() -> SegmentLanes {
    SegmentLanes::new(17, 11, &[5, 0, 9, 2])
}

#[test]
fn declustered_segment_header_round_trips_and_every_bit_flip_is_detected() {
    let h = header();
    let bytes = h.sealed_bytes(&lanes());
    assert_eq!(bytes.len(), DECLUSTERED_SEGMENT_HEADER_BYTES);
    assert_eq!(&bytes[..], &h.seal_declustered(&lanes())[..]);
    let (decoded, got) = SegmentHeader::decode_with_lanes(&bytes).unwrap();
    assert_eq!(got, lanes());
    assert!(decoded.is_declustered() && decoded.header_bytes.get() == 280);
    // The shared fields as they were; the lane of this chunk and its drive.
    assert_eq!(decoded.as_bytes()[16..SEGMENT_LANES_OFFSET], h.seal().as_bytes()[16..SEGMENT_LANES_OFFSET]);
    let lane = decoded.drive_index.get() as usize;
    assert_eq!(
        (lane, got.drive_of_lane(lane), got.lane_of_drive(9, 4), got.lane_of_drive(1, 4)),
        (2, Some(9), Some(2), None)
    );
    assert_eq!(SegmentHeader::decode(&bytes).unwrap().as_bytes(), decoded.as_bytes());
    flips_detected(&bytes, |b| SegmentHeader::decode_with_lanes(b).is_ok());
    // In a whole block, what follows is zeros.
    let mut block = bytes.clone();
    block.resize(4096, 0);
    assert_eq!(SegmentHeader::decode_with_lanes(&block).unwrap().1, lanes());
    // Cut short, it is refused as such.
    let short = SegmentHeader::decode_with_lanes(&bytes[..SEGMENT_HEADER_BYTES]).unwrap_err();
    assert_eq!(short, DecodeError::Short { needed: DECLUSTERED_SEGMENT_HEADER_BYTES, got: SEGMENT_HEADER_BYTES });
}

/// A classic array's segment header is written in the 240-byte layout, byte for byte as
/// before declustered arrays, and reads with lane i on drive i, numbered as its zone.
#[test]
fn a_classic_segment_header_keeps_its_layout_and_implies_its_lanes() {
    let h = header();
    let implied = SegmentLanes::implied_by(&h);
    assert_eq!(implied, SegmentLanes::classic(4, 12));
    assert_eq!(h.sealed_bytes(&implied), h.seal().as_bytes());
    let (decoded, got) = SegmentHeader::decode_with_lanes(h.seal().as_bytes()).unwrap();
    assert!(!decoded.is_declustered());
    assert_eq!((got.segment_number.get(), got.array_drives.get()), (12, 4));
    assert_eq!((0..4).map(|l| got.drive_of_lane(l).unwrap()).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(&got.lane_drives[4..], [0; MAX_DRIVES - 4]);
    // Lanes that say more than the 240 bytes can (another drive, number or N) take the
    // 280-byte layout, and read back as given.
    let other = [
        SegmentLanes::classic(4, 13),
        SegmentLanes::new(12, 4, &[1, 0, 2, 3]),
        SegmentLanes::new(12, 5, &[0, 1, 2, 3]),
    ];
    for lanes in other {
        let bytes = h.sealed_bytes(&lanes);
        assert_eq!(bytes.len(), DECLUSTERED_SEGMENT_HEADER_BYTES, "{lanes:?}");
        assert_eq!(SegmentHeader::decode_with_lanes(&bytes).unwrap().1, lanes);
    }
}

/// The superblock of the tests: a classic 3+1 array.
fn classic_superblock() -> ArraySuperblock {
    let mut name = [0u8; 32];
    name[..4].copy_from_slice(b"tank");
    ArraySuperblock {
        magic: [0; 8],
        version: 0.into(),
        superblock_bytes: 0.into(),
        array_uuid: [9; 16],
        drive_index: 2.into(),
        drive_count: 4.into(),
        data_chunks: 3.into(),
        parity_chunks: 1.into(),
        level: 5,
        mode: 0,
        small_segments: 0,
        large_segments: 0,
        chunk_bytes: 4096.into(),
        group_size: 256.into(),
        block_size_bytes: 4096.into(),
        reserved_zones: 1.into(),
        logical_blocks: 1000.into(),
        stripe_timeout_ns: 100_000.into(),
        created_unix_s: 1.into(),
        name,
        generation: 3.into(),
        failed_drives: 0b10.into(),
        large_chunk_bytes: 0.into(),
        rebuilding_drives: 0b10.into(),
        l2p_budget_bytes: 0.into(),
        shard_count: 0.into(),
        shard_unit_blocks: 0.into(),
        distributed_spares: 0.into(),
        placement_crc32c: 0.into(),
        spared_drives: 0.into(),
        grown_from: [0; 4],
        grown_placement_crc32c: [0.into(); 3],
        crc32c: 0.into(),
    }
}

#[test]
fn array_superblock_round_trips_and_every_bit_flip_is_detected() {
    let s = classic_superblock().seal();
    let decoded = ArraySuperblock::decode(s.as_bytes()).unwrap();
    assert_eq!((decoded.drive_index.get(), decoded.name()), (2, "tank".to_string()));
    flips_detected(s.as_bytes(), |b| ArraySuperblock::decode(b).is_ok());
    assert_eq!(decoded.rebuilding_drives.get(), 0b10);
    assert!(!decoded.is_declustered() && decoded.stripe_width() == 4);
}

#[test]
fn declustered_array_superblock_round_trips_and_every_bit_flip_is_detected() {
    let s = ArraySuperblock {
        drive_index: 10.into(),
        drive_count: 11.into(),
        data_chunks: 4.into(),
        parity_chunks: 1.into(),
        distributed_spares: 1.into(),
        placement_crc32c: 0xc2b7_1ad7.into(),
        failed_drives: (1 << 10 | 1 << 3).into(),
        spared_drives: (1 << 3).into(),
        ..classic_superblock()
    }
    .seal();
    assert_eq!(s.as_bytes().len(), 204);
    let decoded = ArraySuperblock::decode(s.as_bytes()).unwrap();
    assert_eq!(decoded.as_bytes(), s.as_bytes());
    assert!(decoded.is_declustered() && decoded.stripe_width() == 5);
    assert_eq!((decoded.distributed_spares.get(), decoded.placement_crc32c.get()), (1, 0xc2b7_1ad7));
    assert_eq!(decoded.spared_drives.get(), 1 << 3);
    flips_detected(s.as_bytes(), |b| ArraySuperblock::decode(b).is_ok());
    // A spared drive is a failed one, and only a declustered array has them.
    let unfailed = ArraySuperblock { spared_drives: (1 << 4).into(), ..s }.seal();
    assert!(ArraySuperblock::decode(unfailed.as_bytes()).is_err());
    let classic = ArraySuperblock { spared_drives: 1.into(), failed_drives: 1.into(), ..classic_superblock() }.seal();
    assert!(ArraySuperblock::decode(classic.as_bytes()).is_err());
    // The first declustered layout (180 bytes) reads with no drive spared.
    let first = ArraySuperblock { superblock_bytes: 180.into(), ..s };
    let mut bytes = first.as_bytes()[..176].to_vec();
    bytes.extend_from_slice(&crc32c::crc32c(&bytes).to_le_bytes());
    let decoded = ArraySuperblock::decode(&bytes).unwrap();
    assert!(decoded.is_declustered() && decoded.spared_drives.get() == 0);
    // Grown from 8 drives: round trips, every flip detected; the 188-byte layout reads
    // as never grown.
    let grown = ArraySuperblock {
        grown_from: [8, 0, 0, 0],
        grown_placement_crc32c: [0x0bad_cafe.into(), 0.into(), 0.into()],
        ..s
    }
    .seal();
    let decoded = ArraySuperblock::decode(grown.as_bytes()).unwrap();
    assert_eq!((decoded.grown_from(), decoded.grown_placement_crc32c[0].get()), (vec![8], 0x0bad_cafe));
    flips_detected(grown.as_bytes(), |b| ArraySuperblock::decode(b).is_ok());
    let before = ArraySuperblock { superblock_bytes: 188.into(), ..grown };
    let mut bytes = before.as_bytes()[..184].to_vec();
    bytes.extend_from_slice(&crc32c::crc32c(&bytes).to_le_bytes());
    let decoded = ArraySuperblock::decode(&bytes).unwrap();
    assert!(decoded.is_declustered() && decoded.grown_from().is_empty() && decoded.spared_drives.get() == 1 << 3);
}

/// Every older layout (148, 156, 164, 172, 180 and 188 bytes, the CRC after its last field) reads
/// with the fields it lacks 0, a damaged one is refused, and a classic array's superblock
/// sealed again differs from the 172-byte one only in its size and its CRC's place.
#[test]
fn older_array_superblocks_read_with_the_newer_fields_zero() {
    let current = ArraySuperblock {
        l2p_budget_bytes: (1u64 << 20).into(),
        shard_count: 2.into(),
        shard_unit_blocks: 8.into(),
        ..classic_superblock()
    };
    for old in OLDER_ARRAY_SUPERBLOCK_SIZES {
        let s = ArraySuperblock { superblock_bytes: (old as u32).into(), ..current.seal() };
        let mut bytes = s.as_bytes()[..old - 4].to_vec();
        bytes.extend_from_slice(&crc32c::crc32c(&bytes).to_le_bytes());
        let decoded = ArraySuperblock::decode(&bytes).unwrap();
        assert_eq!(decoded.as_bytes()[16..old - 4], s.as_bytes()[16..old - 4], "{old}");
        assert!(decoded.as_bytes()[old - 4..ARRAY_SUPERBLOCK_BYTES - 4].iter().all(|b| *b == 0), "{old}");
        assert_eq!((decoded.distributed_spares.get(), decoded.placement_crc32c.get()), (0, 0));
        flips_detected(&bytes, |b| ArraySuperblock::decode(b).is_ok());
        if old == PRE_DECLUSTERED_ARRAY_SUPERBLOCK_BYTES {
            let resealed = decoded.seal();
            let new = resealed.as_bytes();
            assert_eq!((&new[..12], &new[16..old - 4]), (&bytes[..12], &bytes[16..old - 4]));
            assert_eq!(&new[old - 4..ARRAY_SUPERBLOCK_BYTES - 4], [0; 32]);
        }
    }
}

/// A superblock written before `rebuilding_drives` (148 bytes, the CRC after the large
/// chunk) reads with no drive rebuilding; a damaged one is still refused.
#[test]
fn legacy_array_superblock_reads_with_no_drive_rebuilding() {
    let s = ArraySuperblock {
        magic: ARRAY_SUPERBLOCK_MAGIC,
        version: FORMAT_VERSION.into(),
        superblock_bytes: (LEGACY_ARRAY_SUPERBLOCK_BYTES as u32).into(),
        array_uuid: [5; 16],
        drive_index: 1.into(),
        drive_count: 4.into(),
        data_chunks: 3.into(),
        parity_chunks: 1.into(),
        level: 5,
        mode: 0,
        small_segments: 0,
        large_segments: 0,
        chunk_bytes: 4096.into(),
        group_size: 256.into(),
        block_size_bytes: 4096.into(),
        reserved_zones: 1.into(),
        logical_blocks: 1000.into(),
        stripe_timeout_ns: 100_000.into(),
        created_unix_s: 1.into(),
        name: [0; 32],
        generation: 7.into(),
        failed_drives: 0b100.into(),
        large_chunk_bytes: 0.into(),
        rebuilding_drives: 0.into(),
        l2p_budget_bytes: 0.into(),
        shard_count: 0.into(),
        shard_unit_blocks: 0.into(),
        distributed_spares: 0.into(),
        placement_crc32c: 0.into(),
        spared_drives: 0.into(),
        grown_from: [0; 4],
        grown_placement_crc32c: [0.into(); 3],
        crc32c: 0.into(),
    };
    let covered = LEGACY_ARRAY_SUPERBLOCK_BYTES - 4;
    let mut legacy = s.as_bytes()[..covered].to_vec();
    legacy.extend_from_slice(&crc32c::crc32c(&legacy).to_le_bytes());
    // A whole block: what follows the legacy superblock is zeros.
    legacy.resize(512, 0);
    let decoded = ArraySuperblock::decode(&legacy).unwrap();
    assert_eq!((decoded.generation.get(), decoded.failed_drives.get(), decoded.rebuilding_drives.get()), (7, 0b100, 0));
    flips_detected(&legacy[..LEGACY_ARRAY_SUPERBLOCK_BYTES], |b| ArraySuperblock::decode(b).is_ok());
    // Sealed again, it is written in the current layout.
    let resealed = ArraySuperblock::decode(decoded.seal().as_bytes()).unwrap();
    assert_eq!(resealed.superblock_bytes.get() as usize, ARRAY_SUPERBLOCK_BYTES);
}

#[test]
fn footer_block_round_trips_and_every_bit_flip_is_detected() {
    let entries: Vec<FooterEntry> = (0..5)
        .map(|i| FooterEntry {
            lba: (100 + i).into(),
            timestamp: i.into(),
            stripe_id: (i as u32).into(),
            reserved: 0.into(),
        })
        .collect();
    let mut block = vec![0u8; 512];
    let header = FooterBlockHeader::new(1, 3, 40);
    encode_footer_block(header, &entries, &mut block);
    let (h, got) = decode_footer_block(&block).unwrap();
    assert_eq!((h.first_block.get(), got), (40, entries));
    flips_detected(&block, |b| decode_footer_block(b).is_ok());
}

#[test]
fn block_metadata_detects_every_bit_flip_of_data_or_metadata() {
    let data: Vec<u8> = (0..512u32).map(|i| (i * 7) as u8).collect();
    let mut oob = vec![0u8; 64];
    BlockMetadata::new(42, 7, 3, 9, BlockKind::Data).encode(&data, &mut oob);
    let (m, kind) = BlockMetadata::decode(&data, &oob).unwrap();
    assert_eq!((m.lba.get(), kind), (42, BlockKind::Data));
    flips_detected(&oob[..BLOCK_METADATA_BYTES], |o| BlockMetadata::decode(&data, o).is_ok());
    flips_detected(&data, |d| BlockMetadata::decode(d, &oob).is_ok());
}

proptest! {
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = SegmentHeader::decode(&bytes);
        let _ = SegmentHeader::decode_with_lanes(&bytes);
        let _ = ArraySuperblock::decode(&bytes);
        let _ = decode_footer_block(&bytes);
        let _ = BlockMetadata::decode(&bytes, &bytes);
    }
}
