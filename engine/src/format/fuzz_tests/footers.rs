//! Fuzzing of footer blocks (a sealed segment's footer) and of the stop footer a clean stop
//! leaves (a footer block with block metadata, judged against where it was found).

use proptest::prelude::*;
use zapraid_fuzz::{example, fuzz, put_crc32c, Encoded, Field};
use zerocopy::IntoBytes;

use super::super::*;
use zapraid_fuzz::{assert_field_error, fields_of, verdict};

fn footer_entry() -> impl Strategy<Value = FooterEntry> {
    (any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(lba, timestamp, stripe)| FooterEntry {
        lba: lba.into(),
        timestamp: timestamp.into(),
        stripe_id: stripe.into(),
        reserved: 0.into(),
    })
}

/// The header's fields and those of the first and last entries of a footer block at `at`.
fn footer_fields(at: usize, entries: usize) -> Vec<Field> {
    let mut fields =
        fields_of!(FooterBlockHeader, at; magic, version, drive_index, segment_sequence, first_block, entries);
    for i in [0, entries.saturating_sub(1)].into_iter().take(entries) {
        let entry = at + FOOTER_BLOCK_HEADER_BYTES + i * FOOTER_ENTRY_BYTES;
        fields.extend(fields_of!(FooterEntry, entry; lba, timestamp, stripe_id, reserved));
    }
    fields
}

/// Blocks of the sizes drives have, and blocks barely larger than a footer's header.
fn footer_block_bytes() -> impl Strategy<Value = usize> {
    prop_oneof![Just(512usize), Just(4096), FOOTER_BLOCK_HEADER_BYTES + 4..=200]
}

fn valid_footer_block() -> impl Strategy<Value = Encoded> {
    footer_block_bytes()
        .prop_flat_map(|bytes| {
            let per_block = footer_entries_per_block(bytes as u32);
            (Just(bytes), proptest::collection::vec(footer_entry(), 0..=per_block), any::<(u32, u64, u32)>())
        })
        .prop_map(|(block_bytes, entries, (drive, sequence, first))| {
            let header = FooterBlockHeader::new(drive, sequence, first);
            let mut block = vec![0u8; block_bytes];
            encode_footer_block(header, &entries, &mut block);
            Encoded { bytes: block, fields: footer_fields(0, entries.len()), context: () }
        })
}

/// The CRC in the last 4 bytes of the (possibly cut or extended) block.
fn reseal_footer_block(bytes: &mut [u8]) {
    let end = bytes.len().saturating_sub(4);
    put_crc32c(bytes, end, 0..end);
}

#[test]
fn footer_block_fuzzed_past_its_checksum() {
    fuzz(
        "a footer block",
        valid_footer_block(),
        |bytes, _| reseal_footer_block(bytes),
        |bytes, _| {
            let result = decode_footer_block(bytes);
            if let Ok((header, entries)) = &result {
                assert!(entries.len() <= footer_entries_per_block(bytes.len() as u32));
                assert_eq!(header.entries.get() as usize, entries.len());
                let mut again = vec![0u8; bytes.len()];
                encode_footer_block(*header, entries, &mut again);
                let (h, e) = decode_footer_block(&again).expect("a decoded footer block encodes again");
                assert_eq!((h.as_bytes(), &e), (header.as_bytes(), entries));
            }
            verdict(&result)
        },
    );
}

#[test]
fn footer_block_field_errors() {
    let mut block = example(valid_footer_block()).bytes;
    let too_many = footer_entries_per_block(block.len() as u32) + 1;
    block[std::mem::offset_of!(FooterBlockHeader, entries)..][..4].copy_from_slice(&(too_many as u32).to_le_bytes());
    reseal_footer_block(&mut block);
    assert_field_error(decode_footer_block(&block), &format!("{too_many} entries do not fit"));
}

/// Bytes of the out-of-band area after a stop footer's block.
const STOP_FOOTER_OOB_BYTES: usize = 64;

/// The last block of a stop footer of `entries` data-region blocks and its metadata, as a
/// clean stop writes them, with where it is found.
#[derive(Clone, Debug)]
struct StopFooterCase {
    place: StopFooterPlace,
    block_bytes: usize,
}

fn valid_stop_footer() -> impl Strategy<Value = Encoded<StopFooterCase>> {
    prop_oneof![Just(512usize), Just(4096)]
        .prop_flat_map(|block_bytes| {
            let per_block = footer_entries_per_block(block_bytes as u32);
            (Just(block_bytes), 1..=3 * per_block)
        })
        .prop_flat_map(|(block_bytes, total)| {
            let per_block = footer_entries_per_block(block_bytes as u32);
            let first = (total - 1) / per_block * per_block;
            let last_block = proptest::collection::vec(footer_entry(), total - first);
            (Just((block_bytes, first)), last_block, any::<u64>(), 0..MAX_DRIVES, 1u64..=64)
        })
        .prop_map(|((block_bytes, first), entries, sequence, drive, data_start)| {
            let per_block = footer_entries_per_block(block_bytes as u32);
            let header = FooterBlockHeader::new(drive as u32, sequence, first as u32);
            let mut block = vec![0u8; block_bytes];
            encode_footer_block(header, &entries, &mut block);
            let mut oob = vec![0u8; STOP_FOOTER_OOB_BYTES];
            BlockMetadata::new(NO_LBA, 0, 0, sequence, BlockKind::Footer).encode(&block, &mut oob);
            let total = (first + entries.len()) as u64;
            let blocks = (first / per_block + 1) as u64;
            let place = StopFooterPlace {
                segment_sequence: sequence,
                drive_index: drive,
                data_start_blocks: data_start,
                written_blocks: data_start + total + blocks,
            };
            let mut fields = footer_fields(0, entries.len());
            fields.extend(fields_of!(BlockMetadata, block_bytes;
                lba, timestamp, stripe_id, segment_sequence_low, magic, version, kind));
            Encoded { bytes: [block, oob].concat(), fields, context: StopFooterCase { place, block_bytes } }
        })
}

/// The footer block's CRC, then the metadata's (over the block and the metadata).
fn reseal_stop_footer(bytes: &mut [u8], case: &StopFooterCase) {
    let block = case.block_bytes;
    put_crc32c(bytes, block - 4, 0..block - 4);
    put_crc32c(bytes, block + 28, 0..block + 28);
}

fn decode_case(bytes: &[u8], case: &StopFooterCase) -> Result<u64, DecodeError> {
    let (data, oob) = bytes.split_at(case.block_bytes.min(bytes.len()));
    decode_stop_footer(data, oob, &case.place)
}

#[test]
fn stop_footer_fuzzed_past_its_checksums() {
    fuzz(
        "a stop footer",
        valid_stop_footer(),
        |bytes, case| reseal_stop_footer(bytes, case),
        |bytes, case| {
            let result = decode_case(bytes, case);
            if let Ok(start) = &result {
                let (header, entries) = decode_footer_block(&bytes[..case.block_bytes]).expect("a stop footer's block");
                let per_block = footer_entries_per_block(case.block_bytes as u32) as u64;
                let blocks = u64::from(header.first_block.get()) / per_block + 1;
                assert_eq!(*start + blocks, case.place.written_blocks);
                let data_blocks = u64::from(header.first_block.get()) + entries.len() as u64;
                assert_eq!(*start, case.place.data_start_blocks + data_blocks);
            }
            verdict(&result)
        },
    );
}

#[test]
fn stop_footer_field_errors() {
    let encoded = example(valid_stop_footer());
    let case = &encoded.context;
    assert!(decode_case(&encoded.bytes, case).is_ok());
    let set_u32 = |offset: usize, value: u32| {
        let mut bytes = encoded.bytes.clone();
        bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
        reseal_stop_footer(&mut bytes, case);
        decode_case(&bytes, case)
    };
    let first_block = std::mem::offset_of!(FooterBlockHeader, first_block);
    let first = u32::from_le_bytes(encoded.bytes[first_block..][..4].try_into().expect("4 bytes"));
    assert_field_error(set_u32(first_block, first + 1), "is not a multiple of");
    let drive = std::mem::offset_of!(FooterBlockHeader, drive_index);
    assert_field_error(set_u32(drive, case.place.drive_index as u32 + 1), "footer of segment");
    // Another block's metadata: a data block, not a footer.
    let mut bytes = encoded.bytes.clone();
    bytes[case.block_bytes + std::mem::offset_of!(BlockMetadata, kind)] = BlockKind::Data as u8;
    reseal_stop_footer(&mut bytes, case);
    assert_field_error(decode_case(&bytes, case), "not a footer");
    // Found one block further on than its entries end: not this stop's footer.
    let moved = StopFooterCase {
        place: StopFooterPlace { written_blocks: case.place.written_blocks + 1, ..case.place },
        ..case.clone()
    };
    assert_field_error(decode_case(&encoded.bytes, &moved), "do not end at the write pointer");
}

/// A block too small for one entry decodes as a footer block with none, and is no stop
/// footer (no division by its zero entries per block).
#[test]
fn a_block_too_small_for_an_entry_is_no_stop_footer() {
    let block_bytes = FOOTER_BLOCK_HEADER_BYTES + 4;
    assert_eq!(footer_entries_per_block(block_bytes as u32), 0);
    let header = FooterBlockHeader::new(0, 5, 0);
    let mut block = vec![0u8; block_bytes];
    encode_footer_block(header, &[], &mut block);
    let mut oob = vec![0u8; BLOCK_METADATA_BYTES];
    BlockMetadata::new(NO_LBA, 0, 0, 5, BlockKind::Footer).encode(&block, &mut oob);
    let place = StopFooterPlace { segment_sequence: 5, drive_index: 0, data_start_blocks: 1, written_blocks: 2 };
    assert_field_error(decode_stop_footer(&block, &oob, &place), "the 0 entries a footer block holds");
}
