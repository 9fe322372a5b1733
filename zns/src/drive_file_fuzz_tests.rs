//! Structure-aware fuzzing of the drive file's decoders (helpers in `zapraid-fuzz`): the
//! superblock region (both copies) and the zone records, built valid by their encoders,
//! mutated and re-checksummed so that the field checks are reached. An accepted superblock
//! gives a geometry that is validated, and a valid one a file layout, without a panic.

use proptest::prelude::*;
use zapraid_fuzz::{assert_field_error, example, fields_of, fuzz, put_crc32c, verdict, Encoded};
use zerocopy::IntoBytes;

use super::*;

impl zapraid_fuzz::FieldError for DecodeError {
    fn field_reason(&self) -> Option<&str> {
        match self {
            DecodeError::Field(reason) => Some(reason),
            _ => None,
        }
    }
}

/// Geometries near the valid ones (so that some validate) and anywhere else.
fn geometry() -> impl Strategy<Value = Geometry> {
    let limits = (proptest::option::of(any::<u32>()), proptest::option::of(any::<u32>()));
    let near = (1u32..64, 1u64..1 << 16, 0u64..1 << 16)
        .prop_map(|(zones, size, cap)| Geometry::small(zones, size, cap.min(size)));
    let anywhere = (any::<(u32, u32, u64, u64, u32)>(), limits, any::<(u32, u32)>()).prop_map(
        |((block, metadata, size, capacity, zones), (open, active), (append, transfer))| Geometry {
            block_size_bytes: block,
            metadata_bytes_per_block: metadata,
            zone_size_blocks: size,
            zone_capacity_blocks: capacity,
            zone_count: zones,
            max_open_zones: open.filter(|v| *v != NO_LIMIT),
            max_active_zones: active.filter(|v| *v != NO_LIMIT),
            zone_append_max_blocks: append,
            max_transfer_blocks: transfer,
            // Not recorded in a drive file (`Superblock::geometry`): the round trip needs 0.
            transfer_granule_blocks: 0,
        },
    );
    prop_oneof![near, anywhere]
}

const COPY_AT: usize = SUPERBLOCK_COPY_OFFSET_BYTES as usize;

/// A superblock region as `create` writes it (both copies), or as files made before the
/// copy have it (zeros there).
fn valid_region() -> impl Strategy<Value = Encoded> {
    (geometry(), any::<([u8; 16], u64)>(), any::<bool>()).prop_map(|(g, (uuid, seed), with_copy)| {
        let sb = Superblock::new(&g, uuid, seed);
        let mut region = vec![0u8; SUPERBLOCK_REGION_BYTES as usize];
        region[..sb.as_bytes().len()].copy_from_slice(sb.as_bytes());
        if with_copy {
            region[COPY_AT..COPY_AT + sb.as_bytes().len()].copy_from_slice(sb.as_bytes());
        }
        let fields = |at: usize| {
            fields_of!(Superblock, at;
                magic, version, superblock_bytes, block_size_bytes, metadata_bytes_per_block, zone_size_blocks,
                zone_capacity_blocks, zone_count, max_open_zones, max_active_zones, zone_append_max_blocks,
                max_transfer_blocks, reserved0, drive_uuid, landing_seed, crc32c, reserved1)
        };
        Encoded { bytes: region, fields: [fields(0), fields(COPY_AT)].concat(), context: () }
    })
}

fn reseal_region(bytes: &mut [u8]) {
    for at in [0, COPY_AT] {
        put_crc32c(bytes, at + SUPERBLOCK_CRC_OFFSET, at..at + SUPERBLOCK_CRC_OFFSET);
    }
}

#[test]
fn superblock_region_fuzzed_past_its_checksums() {
    fuzz(
        "the drive file's superblock",
        valid_region(),
        |bytes, _| reseal_region(bytes),
        |bytes, _| {
            // The primary alone, whose field checks a valid copy would otherwise hide, then
            // the region as opening a file reads it.
            let primary = Superblock::decode(bytes);
            let region = Superblock::decode_region(bytes).map(|(sb, _)| sb);
            for sb in [&primary, &region].into_iter().flatten() {
                superblock_is_sound(sb);
            }
            verdict(&primary)
        },
    );
}

fn superblock_is_sound(sb: &Superblock) {
    assert_eq!(sb.superblock_bytes.get() as usize, std::mem::size_of::<Superblock>());
    let g = sb.geometry();
    let again = Superblock::new(&g, sb.drive_uuid, sb.landing_seed.get());
    assert_eq!(Superblock::decode(again.as_bytes()).map(|s| s.geometry()), Ok(g));
    // What opening the file does next with it: never a panic.
    if g.validate().is_ok() {
        let _ = FileLayout::new(&g);
    }
}

#[test]
fn superblock_field_errors() {
    let mut region = example(valid_region()).bytes;
    let size = std::mem::offset_of!(Superblock, superblock_bytes);
    for at in [0, COPY_AT] {
        region[at + size..at + size + 4].copy_from_slice(&95u32.to_le_bytes());
    }
    reseal_region(&mut region);
    assert_field_error(Superblock::decode_region(&region), "superblock size 95");
}

/// A zone record of a zone of the context's capacity.
fn valid_zone_record() -> impl Strategy<Value = Encoded<u64>> {
    let states = [
        ZoneState::Empty,
        ZoneState::ImplicitlyOpen,
        ZoneState::ExplicitlyOpen,
        ZoneState::Closed,
        ZoneState::ReadOnly,
        ZoneState::Full,
        ZoneState::Offline,
    ];
    (proptest::sample::select(states.to_vec()), 0u64..1 << 20, any::<(u64, u64)>()).prop_map(
        |(state, capacity, (written, sequence))| {
            let written = if state == ZoneState::Empty { 0 } else { written % (capacity + 1) };
            let record = ZoneRecord::new(state, written, sequence);
            let fields =
                fields_of!(ZoneRecord, 0; state, reserved0, written_blocks, update_sequence, reserved1, crc32c);
            Encoded { bytes: record.as_bytes().to_vec(), fields, context: capacity }
        },
    )
}

fn reseal_zone_record(bytes: &mut [u8]) {
    put_crc32c(bytes, ZONE_RECORD_CRC_OFFSET, 0..ZONE_RECORD_CRC_OFFSET);
}

#[test]
fn zone_record_fuzzed_past_its_checksum() {
    fuzz(
        "a drive file's zone record",
        valid_zone_record(),
        |bytes, _| reseal_zone_record(bytes),
        |bytes, &capacity| {
            let result = ZoneRecord::decode(bytes, capacity);
            if let Ok((state, written, sequence)) = result {
                assert!(written <= capacity && (state != ZoneState::Empty || written == 0));
                let again = ZoneRecord::new(state, written, sequence);
                assert_eq!(ZoneRecord::decode(again.as_bytes(), capacity), Ok((state, written, sequence)));
            }
            verdict(&result)
        },
    );
}

#[test]
fn zone_record_field_errors() {
    let encoded = example(valid_zone_record());
    let capacity = encoded.context;
    let with = |offset: usize, value: &[u8]| {
        let mut b = encoded.bytes.clone();
        b[offset..offset + value.len()].copy_from_slice(value);
        reseal_zone_record(&mut b);
        ZoneRecord::decode(&b, capacity)
    };
    let written = std::mem::offset_of!(ZoneRecord, written_blocks);
    assert_field_error(with(written, &(capacity + 1).to_le_bytes()), "past capacity");
    assert_field_error(with(std::mem::offset_of!(ZoneRecord, state), &[0x5]), "zone state 0x5");
}
