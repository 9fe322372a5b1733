//! Fuzzing of the checkpoint image (full and incremental, with and without a lost-block
//! list) and of the mapping block.

use proptest::prelude::*;
use zapraid_fuzz::{example, fuzz, put_crc32c, Encoded, Field};

use super::super::*;
use zapraid_fuzz::{assert_field_error, fields_of, verdict};

/// A segment record's flags as `encode` writes them; the zone is set by `valid_image`.
fn segment(incremental: bool) -> impl Strategy<Value = CheckpointSegment> {
    let fields = (0u8..4, any::<bool>(), any::<(u64, u64)>(), proptest::collection::vec(any::<u8>(), 0..24));
    (fields, any::<bool>(), 1u64..1 << 20).prop_map(
        move |((state, large, (sequence, live_blocks), table), in_base, base_bytes)| {
            let (sealed, open, appending) = (state == 0, state == 1, state == 2);
            // Only an incremental image leaves a table in its base, never an appending one's.
            let in_base = incremental && in_base && !appending;
            CheckpointSegment {
                zone: 0,
                sequence,
                sealed,
                open,
                appending,
                large,
                live_blocks,
                table: if in_base { Vec::new() } else { table },
                base_table_bytes: if in_base { base_bytes } else { 0 },
            }
        },
    )
}

fn valid_image() -> impl Strategy<Value = CheckpointImage> {
    any::<bool>()
        .prop_flat_map(|incremental| {
            let segments = proptest::collection::vec((segment(incremental), 1u32..1000), 0..6);
            let counters = any::<([u8; 16], u64, u64, u64)>();
            let lost = proptest::collection::btree_map(any::<u64>(), any::<u64>(), 0..5);
            let directory = proptest::collection::vec(any::<u32>(), 0..16);
            (Just(incremental), counters, 1u64.., 1u32.., segments, directory, lost, any::<u64>())
        })
        .prop_map(
            |(
                incremental,
                (array_uuid, next_sequence, next_timestamp, superblock_generation),
                generation,
                per_page,
                s,
                directory,
                lost,
                base,
            )| {
                // Zones in increasing order: each one past the one before.
                let mut zone = 0u32;
                let segments = s
                    .into_iter()
                    .map(|(segment, step)| {
                        zone += step;
                        CheckpointSegment { zone, ..segment }
                    })
                    .collect();
                CheckpointImage {
                    array_uuid,
                    generation,
                    next_sequence,
                    next_timestamp,
                    superblock_generation,
                    entries_per_page: per_page,
                    segments,
                    directory,
                    base_generation: incremental.then_some(base % generation),
                    lost: lost.into_iter().collect(),
                }
            },
        )
}

/// Where every field of an image's header and records is, and its base, directory and
/// lost-block list's first ones.
fn image_fields(image: &CheckpointImage) -> Vec<Field> {
    let mut fields = fields_of!(CheckpointHeader, 0;
        magic, version, crc32c, image_bytes, array_uuid, generation, next_sequence, next_timestamp,
        superblock_generation, segment_count, page_count, entries_per_page, flags);
    let mut at = CHECKPOINT_HEADER_BYTES;
    if image.base_generation.is_some() {
        fields.push(Field::new(at, CHECKPOINT_BASE_BYTES));
        at += CHECKPOINT_BASE_BYTES;
    }
    for _ in &image.segments {
        fields.extend(fields_of!(CheckpointSegmentRecord, at; zone, flags, sequence, live_blocks, table_bytes));
        at += CHECKPOINT_SEGMENT_BYTES;
    }
    if !image.directory.is_empty() {
        fields.push(Field::new(at, CHECKPOINT_DIRECTORY_ENTRY_BYTES));
    }
    if !image.lost.is_empty() {
        let lost_at = (image.image_len() - checkpoint_lost_list_bytes(image.lost.len())) as usize;
        fields.push(Field::new(lost_at, CHECKPOINT_LOST_COUNT_BYTES));
        let first = lost_at + CHECKPOINT_LOST_COUNT_BYTES;
        fields.extend([Field::new(first, 8), Field::new(first + 8, 8)]);
    }
    fields
}

fn encoded_image() -> impl Strategy<Value = Encoded<u32>> {
    (valid_image(), prop_oneof![Just(512u32), Just(4096)]).prop_map(|(image, block_bytes)| Encoded {
        bytes: image.encode(block_bytes),
        fields: image_fields(&image),
        context: block_bytes,
    })
}

/// The CRC over the bytes the header says the image has (as far as there are bytes).
fn reseal_image(bytes: &mut [u8]) {
    let at = std::mem::offset_of!(CheckpointHeader, image_bytes);
    let Some(recorded) = bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))) else {
        return;
    };
    let end = usize::try_from(recorded).unwrap_or(usize::MAX);
    let crc = std::mem::offset_of!(CheckpointHeader, crc32c);
    put_crc32c(bytes, crc, crc + 4..end);
}

/// The rules of a decoded image (`encode` asserts them) and its round trip.
fn image_is_sound(image: &CheckpointImage, bytes: &[u8], block_bytes: u32) {
    assert!(image.entries_per_page > 0);
    assert!(image.segments.windows(2).all(|w| w[0].zone < w[1].zone), "{image:?}");
    assert!(image.lost.windows(2).all(|w| w[0].0 < w[1].0), "{image:?}");
    assert!(image.base_generation.is_none_or(|base| base < image.generation), "{image:?}");
    for s in &image.segments {
        assert!(u8::from(s.sealed) + u8::from(s.open) + u8::from(s.appending) <= 1, "{s:?}");
        let in_base = s.base_table_bytes > 0;
        assert!(!in_base || (image.base_generation.is_some() && s.table.is_empty() && !s.appending), "{s:?}");
    }
    assert!(image.image_len() <= bytes.len() as u64);
    let again = CheckpointImage::decode(&image.encode(block_bytes)).expect("a decoded image encodes again");
    assert_eq!(&again, image);
    let _ = image.clone().resolve(None);
}

#[test]
fn checkpoint_image_fuzzed_past_its_checksum() {
    fuzz(
        "the checkpoint image",
        encoded_image(),
        |bytes, _| reseal_image(bytes),
        |bytes, &block_bytes| {
            let result = CheckpointImage::decode(bytes);
            if let Ok(image) = &result {
                image_is_sound(image, bytes, block_bytes);
            }
            // The helpers that read a first block only must not panic either.
            let _ = CheckpointImage::base_generation_of(bytes);
            let _ = CheckpointImage::image_bytes(bytes);
            verdict(&result)
        },
    );
}

#[test]
fn checkpoint_image_field_errors() {
    let mut image = example(valid_image());
    image.base_generation = None;
    image.segments = vec![CheckpointSegment {
        zone: 3,
        sequence: 8,
        sealed: true,
        open: false,
        appending: false,
        large: false,
        live_blocks: 1,
        table: vec![1, 2, 3],
        base_table_bytes: 0,
    }];
    image.lost = vec![(10, 1), (20, 2)];
    let bytes = image.encode(512);
    let with = |offset: usize, value: &[u8]| {
        let mut b = bytes.clone();
        b[offset..offset + value.len()].copy_from_slice(value);
        reseal_image(&mut b);
        CheckpointImage::decode(&b)
    };
    // Sealed and open at once.
    let record = CHECKPOINT_HEADER_BYTES;
    let flags = record + std::mem::offset_of!(CheckpointSegmentRecord, flags);
    assert_field_error(with(flags, &5u32.to_le_bytes()), "unknown segment flags 0x5");
    // A table running past the image.
    let table = record + std::mem::offset_of!(CheckpointSegmentRecord, table_bytes);
    assert_field_error(with(table, &u64::MAX.to_le_bytes()), "stripe table runs past the image");
    // The lost-block list out of order, and a count beyond the image.
    let lost = (image.image_len() - checkpoint_lost_list_bytes(2)) as usize;
    let second_lba = lost + CHECKPOINT_LOST_COUNT_BYTES + CHECKPOINT_LOST_ENTRY_BYTES;
    assert_field_error(with(second_lba, &5u64.to_le_bytes()), "not in increasing LBA order");
    assert_field_error(with(lost, &(u64::MAX / 2).to_le_bytes()), "does not fit the image");
    // No entries per page.
    let per_page = std::mem::offset_of!(CheckpointHeader, entries_per_page);
    assert_field_error(with(per_page, &0u32.to_le_bytes()), "no entries per page");
}

/// A mapping block with the array and page its reader expects of it.
fn valid_mapping_block() -> impl Strategy<Value = Encoded<([u8; 16], u64)>> {
    let block_bytes = prop_oneof![Just(512usize), Just(4096), MAPPING_BLOCK_HEADER_BYTES..=100];
    block_bytes
        .prop_flat_map(|bytes| {
            let per_block = mapping_entries_per_block(bytes as u32);
            (Just(bytes), proptest::collection::vec(any::<u32>(), 0..=per_block), any::<([u8; 16], u64)>())
        })
        .prop_map(|(block_bytes, entries, (uuid, page))| {
            let mut block = vec![0u8; block_bytes];
            encode_mapping_block(uuid, page, &entries, &mut block);
            let mut fields =
                fields_of!(MappingBlockHeader, 0; magic, version, crc32c, array_uuid, page, entries, reserved);
            if !entries.is_empty() {
                fields.push(Field::new(MAPPING_BLOCK_HEADER_BYTES, MAPPING_ENTRY_BYTES));
            }
            Encoded { bytes: block, fields, context: (uuid, page) }
        })
}

fn reseal_mapping_block(bytes: &mut [u8]) {
    put_crc32c(bytes, 12, 16..bytes.len());
}

#[test]
fn mapping_block_fuzzed_past_its_checksum() {
    fuzz(
        "a mapping block",
        valid_mapping_block(),
        |bytes, _| reseal_mapping_block(bytes),
        |bytes, &(uuid, page)| {
            let result = decode_mapping_block(bytes, uuid, page);
            if let Ok(entries) = &result {
                assert!(entries.len() <= mapping_entries_per_block(bytes.len() as u32));
                let mut again = vec![0u8; bytes.len()];
                encode_mapping_block(uuid, page, entries, &mut again);
                assert_eq!(decode_mapping_block(&again, uuid, page).as_ref(), Ok(entries));
            }
            verdict(&result)
        },
    );
}

#[test]
fn mapping_block_field_errors() {
    let encoded = example(valid_mapping_block());
    let (uuid, page) = encoded.context;
    let with_entries = |entries: u32| {
        let mut b = encoded.bytes.clone();
        b[std::mem::offset_of!(MappingBlockHeader, entries)..][..4].copy_from_slice(&entries.to_le_bytes());
        reseal_mapping_block(&mut b);
        decode_mapping_block(&b, uuid, page)
    };
    let too_many = mapping_entries_per_block(encoded.bytes.len() as u32) as u32 + 1;
    assert_field_error(with_entries(too_many), &format!("{too_many} entries do not fit"));
    assert_field_error(decode_mapping_block(&encoded.bytes, uuid, page.wrapping_add(1)), "expected");
}
