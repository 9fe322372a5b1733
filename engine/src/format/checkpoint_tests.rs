//! Tests of the checkpoint image: round trips, incremental images and their bases, and
//! every flipped bit detected.

use super::*;

/// The sample's lost-block list: its count and two entries.
const SAMPLE_LOST_BYTES: u64 = (CHECKPOINT_LOST_COUNT_BYTES + 2 * CHECKPOINT_LOST_ENTRY_BYTES) as u64;

fn sample() -> CheckpointImage {
    CheckpointImage {
        array_uuid: [7; 16],
        generation: 3,
        next_sequence: 41,
        next_timestamp: 9_000,
        superblock_generation: 5,
        entries_per_page: 1_012,
        segments: vec![
            CheckpointSegment {
                zone: 0,
                sequence: 12,
                sealed: true,
                open: false,
                appending: false,
                large: false,
                live_blocks: 300,
                table: vec![1, 2, 3, 4, 5, 6, 7, 8],
                base_table_bytes: 0,
            },
            CheckpointSegment {
                zone: 5,
                sequence: 40,
                sealed: false,
                open: true,
                appending: false,
                large: true,
                live_blocks: 17,
                table: Vec::new(),
                base_table_bytes: 0,
            },
            CheckpointSegment {
                zone: 6,
                sequence: 39,
                sealed: false,
                open: false,
                appending: true,
                large: false,
                live_blocks: 3,
                table: vec![4, 0, 4, 0],
                base_table_bytes: 0,
            },
        ],
        directory: vec![u32::MAX, 12, 99_000, u32::MAX, 4],
        base_generation: None,
        lost: vec![(3, 17), (900, 8_000)],
    }
}

/// An incremental image on `sample()`: zone 0's table left in the base, a new sealed
/// segment with its own.
fn incremental() -> CheckpointImage {
    let mut image = sample();
    image.generation = 4;
    image.base_generation = Some(3);
    image.segments[0].table.clear();
    image.segments[0].base_table_bytes = 8;
    image.segments.push(CheckpointSegment {
        zone: 9,
        sequence: 41,
        sealed: true,
        open: false,
        appending: false,
        large: false,
        live_blocks: 5,
        table: vec![9, 9, 9],
        base_table_bytes: 0,
    });
    image
}

#[test]
fn an_incremental_image_round_trips_and_resolves_from_its_base_alone() {
    let base = sample();
    let image = incremental();
    let bytes = image.encode(512);
    let expected_bytes = checkpoint_image_bytes(4, 5, 3 + 4) + CHECKPOINT_BASE_BYTES as u64 + SAMPLE_LOST_BYTES;
    assert_eq!(CheckpointImage::image_bytes(&bytes).unwrap(), expected_bytes);
    let decoded = CheckpointImage::decode(&bytes).unwrap();
    assert_eq!(decoded, image);
    assert_eq!(CheckpointImage::base_generation_of(&bytes[..512]), Ok(Some(3)));
    assert_eq!(CheckpointImage::base_generation_of(&base.encode(512)[..512]), Ok(None));
    assert!(CheckpointImage::base_generation_of(&bytes[..90]).is_err());
    assert_eq!((base.next_generation(), decoded.next_generation()), (4, 6));
    let resolved = decoded.clone().resolve(Some(&base)).unwrap();
    assert_eq!(resolved.segments[0].table, base.segments[0].table);
    assert_eq!(resolved.segments[0].base_table_bytes, 0);
    assert_eq!(resolved.segments[3].table, vec![9, 9, 9]);
    assert_eq!(resolved.base_generation, Some(3));
    // A resolved image is whole: it encodes with every table and resolves to itself.
    let again = CheckpointImage::decode(&resolved.encode(512)).unwrap();
    assert_eq!(again.clone().resolve(None).unwrap(), resolved);

    // Not its base: another generation, another superblock generation, an incremental
    // image, a different segment in the zone, a table of another length, a table of a
    // segment appending in the base; no base read.
    assert!(decoded.clone().resolve(None).is_err());
    let mut other = base.clone();
    other.generation = 1;
    assert!(decoded.clone().resolve(Some(&other)).is_err());
    let mut other = base.clone();
    other.superblock_generation += 1;
    assert!(decoded.clone().resolve(Some(&other)).is_err());
    let mut other = base.clone();
    other.base_generation = Some(1);
    assert!(decoded.clone().resolve(Some(&other)).is_err());
    let mut other = base.clone();
    other.segments[0].sequence += 1;
    assert!(decoded.clone().resolve(Some(&other)).is_err());
    let mut other = base.clone();
    other.segments[0].table.push(0);
    assert!(decoded.clone().resolve(Some(&other)).is_err());
    // The base's table of a segment open then (appending) grew after it: never taken.
    let mut other = base.clone();
    (other.segments[0].sealed, other.segments[0].appending) = (false, true);
    assert!(decoded.clone().resolve(Some(&other)).is_err());
}

#[test]
fn every_single_bit_flip_of_an_incremental_image_is_detected() {
    let bytes = incremental().encode(512);
    let image_bytes = CheckpointImage::image_bytes(&bytes).unwrap() as usize;
    for bit in 0..image_bytes * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(CheckpointImage::decode(&flipped).is_err(), "bit {bit} of the checkpoint flipped unnoticed");
    }
}

#[test]
fn round_trips_and_pads_to_whole_blocks() {
    let image = sample();
    let bytes = image.encode(512);
    assert_eq!(bytes.len() % 512, 0);
    assert_eq!(CheckpointImage::image_bytes(&bytes).unwrap(), checkpoint_image_bytes(3, 5, 8 + 4) + SAMPLE_LOST_BYTES);
    assert_eq!(CheckpointImage::decode(&bytes).unwrap(), image);
}

#[test]
fn every_single_bit_flip_of_the_image_is_detected() {
    let image = sample();
    let bytes = image.encode(512);
    let image_bytes = image.image_len() as usize;
    let mut detected = 0;
    for bit in 0..image_bytes * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(CheckpointImage::decode(&flipped).is_err(), "bit {bit} of the checkpoint flipped unnoticed");
        detected += 1;
    }
    assert_eq!(detected, image_bytes * 8);
}

#[test]
fn a_short_or_foreign_image_is_an_error_not_a_panic() {
    let bytes = sample().encode(512);
    let image_bytes = checkpoint_image_bytes(3, 5, 8) as usize;
    assert!(CheckpointImage::decode(&bytes[..image_bytes - 1]).is_err());
    assert!(CheckpointImage::decode(&bytes[..10]).is_err());
    assert_eq!(CheckpointImage::decode(&[0u8; 512]), Err(DecodeError::Magic));
    // A header claiming a huge body is refused by length, before anything is read.
    let mut huge = bytes.clone();
    huge[76..80].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(CheckpointImage::decode(&huge).is_err());
}
