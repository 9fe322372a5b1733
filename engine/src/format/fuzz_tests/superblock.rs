//! Fuzzing of the array superblock: every layout (180 bytes, and the older 172, 164, 156
//! and 148), classic and declustered arrays.

use proptest::prelude::*;
use zapraid_fuzz::{assert_field_error, example, fields_of, fuzz, put_crc32c, verdict, Encoded};
use zerocopy::IntoBytes;

use super::super::*;

/// (N, drive index, k, m, S) of an array the format holds: classic (N = k + m, S = 0) or
/// declustered (k + m < N <= 64, N - S >= k + m).
fn array_shape() -> impl Strategy<Value = (u32, u32, u32, u32, u32)> {
    let width = 1..=MAX_DRIVES as u32;
    let classic = width.clone().prop_flat_map(|w| (Just(w), 0..w, 0..=w)).prop_map(|(w, i, k)| (w, i, k, w - k, 0));
    let declustered = width
        .prop_filter("room for a wider array", |w| (*w as usize) < MAX_ARRAY_DRIVES)
        .prop_flat_map(|w| (Just(w), w + 1..=MAX_ARRAY_DRIVES as u32, 0..=w))
        .prop_flat_map(|(w, n, k)| (Just((w, n, k)), 0..n, 0..=n - w))
        .prop_map(|((w, n, k), i, s)| (n, i, k, w - k, s));
    prop_oneof![classic, declustered]
}

/// The bits of drives 0..N.
fn drive_mask(drives: u32) -> u64 {
    1u64.checked_shl(drives).map_or(u64::MAX, |bit| bit - 1)
}

pub(super) fn superblock_fields() -> Vec<zapraid_fuzz::Field> {
    fields_of!(ArraySuperblock, 0;
        magic, version, superblock_bytes, array_uuid, drive_index, drive_count, data_chunks, parity_chunks,
        level, mode, small_segments, large_segments, chunk_bytes, group_size, block_size_bytes, reserved_zones,
        logical_blocks, stripe_timeout_ns, created_unix_s, name, generation, failed_drives, large_chunk_bytes,
        rebuilding_drives, l2p_budget_bytes, shard_count, shard_unit_blocks, distributed_spares, placement_crc32c,
        spared_drives, grown_from, grown_placement_crc32c, crc32c)
}

/// A sealed superblock of random valid fields.
pub(super) fn valid_superblock() -> impl Strategy<Value = ArraySuperblock> {
    let fields = (
        (array_shape(), any::<u32>()),
        any::<[u8; 16]>(),
        0u8..=2,
        (0u8..=8, 0u8..=8),
        (1u32..=1 << 30, 1u32..=1 << 30, 0u32..1 << 20),
        (any::<u32>(), any::<u32>(), 1u64..=u64::MAX),
        (any::<u64>(), any::<u64>(), any::<[u8; 32]>(), any::<u64>()),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u8>()),
        (0u32..=MAX_SHARDS, 1u32..=1 << 20),
    );
    fields.prop_map(
        |(
            ((drives, index, data, parity, spares), placement_crc),
            array_uuid,
            mode,
            (small, large),
            (chunk, group, extra),
            (block_size, reserved_zones, logical_blocks),
            (timeout, created, name, generation),
            (failed, rebuilding, l2p, level),
            (shards, unit),
        )| {
            let mask = drive_mask(drives);
            let declustered = drives > data + parity;
            // Grown once, when the bits say so and there was room: from a count between
            // the least a declustered array of this shape has and N - 1.
            let least = (data + parity + 1).max(data + parity + spares);
            let grown = declustered && placement_crc & 1 == 1 && least < drives;
            let earlier = if grown { least + placement_crc % (drives - least) } else { 0 };
            ArraySuperblock {
                magic: [0; 8],
                version: 0.into(),
                superblock_bytes: 0.into(),
                array_uuid,
                drive_index: index.into(),
                drive_count: drives.into(),
                data_chunks: data.into(),
                parity_chunks: parity.into(),
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
                distributed_spares: spares.into(),
                placement_crc32c: if declustered { placement_crc } else { 0 }.into(),
                // Some of the failed drives (bits of another field picked): only a
                // declustered array's.
                spared_drives: if declustered { failed & mask & rebuilding.rotate_left(7) } else { 0 }.into(),
                grown_from: [earlier as u8, 0, 0, 0],
                grown_placement_crc32c: [
                    if grown { placement_crc.rotate_left(5) | 1 } else { 0 }.into(),
                    0.into(),
                    0.into(),
                ],
                crc32c: 0.into(),
            }
            .seal()
        },
    )
}

/// The superblock made classic (as wide as its stripes), as every layout before the
/// declustered one held.
fn as_classic(mut s: ArraySuperblock) -> ArraySuperblock {
    let width = s.stripe_width();
    s.drive_count = width.into();
    s.drive_index = (s.drive_index.get() % width).into();
    s.failed_drives = (s.failed_drives.get() & drive_mask(width)).into();
    s.rebuilding_drives = (s.rebuilding_drives.get() & drive_mask(width)).into();
    s.distributed_spares = 0.into();
    s.placement_crc32c = 0.into();
    s.spared_drives = 0.into();
    s.grown_from = [0; 4];
    s.grown_placement_crc32c = [0.into(); 3];
    s
}

/// A superblock encoded in `size` bytes: the current layout, or an older one (a classic
/// array, the fields it lacks zero, its CRC right after its fields).
pub(super) fn encode_superblock(s: ArraySuperblock, size: usize) -> Vec<u8> {
    if size == ARRAY_SUPERBLOCK_BYTES {
        return s.as_bytes().to_vec();
    }
    let mut s = as_classic(s);
    s.superblock_bytes = (size as u32).into();
    if size < PRE_DECLUSTERED_ARRAY_SUPERBLOCK_BYTES {
        s.shard_count = 0.into();
        s.shard_unit_blocks = 0.into();
    }
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
pub(super) fn reseal_superblock(bytes: &mut [u8]) {
    let size = bytes.get(12..16).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
    let end = match size {
        Some(old) if OLDER_ARRAY_SUPERBLOCK_SIZES.contains(&old) => old - 4,
        _ => ARRAY_SUPERBLOCK_BYTES - 4,
    };
    put_crc32c(bytes, end, 0..end);
}

fn superblock_is_sound(s: &ArraySuperblock) {
    let (drives, width, spares) = (s.drive_count.get(), s.stripe_width(), s.distributed_spares.get());
    assert!((1..=MAX_DRIVES as u32).contains(&width) && s.drive_index.get() < drives, "{s:?}");
    if s.is_declustered() {
        assert!(drives <= MAX_ARRAY_DRIVES as u32 && u64::from(drives) >= u64::from(width) + u64::from(spares));
        let size = s.superblock_bytes.get() as usize;
        assert!(size >= PRE_SPARED_ARRAY_SUPERBLOCK_BYTES, "only the declustered layouts: {s:?}");
        let earlier = s.grown_from();
        assert!(earlier.windows(2).all(|w| w[0] < w[1]) && earlier.iter().all(|&n| n > width && n < drives), "{s:?}");
    } else {
        assert!(drives == width && spares == 0 && s.placement_crc32c.get() == 0, "{s:?}");
        assert!(s.grown_from().is_empty(), "only a declustered array grew: {s:?}");
    }
    assert!(s.chunk_bytes.get() > 0 && s.group_size.get() > 0 && s.mode <= 2 && s.logical_blocks.get() > 0, "{s:?}");
    let beyond = !drive_mask(drives);
    assert!(s.failed_drives.get() & beyond == 0 && s.rebuilding_drives.get() & beyond == 0, "{s:?}");
    let open = s.open_segments();
    assert!(open.total() <= MAX_OPEN_SEGMENTS, "{s:?}");
    assert!(s.large_segments == 0 || s.large_chunk_bytes.get() > s.chunk_bytes.get(), "{s:?}");
    assert!(s.shards() <= MAX_SHARDS && (s.shards() == 1 || s.shard_unit_blocks.get() > 0), "{s:?}");
    // Sealed again it is the current layout with the same fields.
    let again = ArraySuperblock::decode(s.seal().as_bytes()).expect("a decoded superblock seals and decodes again");
    assert_eq!(again.as_bytes()[16..ARRAY_SUPERBLOCK_BYTES - 4], s.as_bytes()[16..ARRAY_SUPERBLOCK_BYTES - 4]);
    let _ = s.name();
}

#[test]
fn array_superblock_fuzzed_past_its_checksum() {
    let layouts = prop_oneof![
        3 => Just(ARRAY_SUPERBLOCK_BYTES),
        1 => Just(PRE_GROW_ARRAY_SUPERBLOCK_BYTES),
        1 => Just(PRE_DECLUSTERED_ARRAY_SUPERBLOCK_BYTES),
        1 => Just(PRE_SHARD_ARRAY_SUPERBLOCK_BYTES),
        1 => Just(PRE_L2P_ARRAY_SUPERBLOCK_BYTES),
        1 => Just(LEGACY_ARRAY_SUPERBLOCK_BYTES)
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

/// `s` with `change` made, sealed in the current layout, gives a field error saying
/// `what`.
#[track_caller]
fn refused(s: ArraySuperblock, change: impl FnOnce(&mut ArraySuperblock), what: &str) {
    let mut bad = s;
    change(&mut bad);
    assert_field_error(ArraySuperblock::decode(bad.seal().as_bytes()), what);
}

#[test]
fn array_superblock_field_errors() {
    let s = example(valid_superblock());
    refused(s, |s| s.mode = 3, "mode 3");
    // In the oldest layout too: its fields are checked after its own CRC.
    let mut bytes = encode_superblock(s, LEGACY_ARRAY_SUPERBLOCK_BYTES);
    bytes[std::mem::offset_of!(ArraySuperblock, drive_index)..][..4].copy_from_slice(&99u32.to_le_bytes());
    reseal_superblock(&mut bytes);
    assert_field_error(ArraySuperblock::decode(&bytes), "drive 99 of");
}

/// The array's drives, stripe, spares and placement CRC: classic and declustered shapes the
/// format does not hold are refused, the newest layout and the older ones alike.
#[test]
fn array_superblock_shape_errors() {
    let classic = as_classic(example(valid_superblock()));
    let (k, m) = (3, 2);
    let wide = ArraySuperblock {
        drive_index: 10.into(),
        drive_count: 11.into(),
        data_chunks: k.into(),
        parity_chunks: m.into(),
        distributed_spares: 1.into(),
        placement_crc32c: 0xc2b7_1ad7.into(),
        failed_drives: (1 << 10).into(),
        rebuilding_drives: 0.into(),
        ..classic
    };
    let decoded = ArraySuperblock::decode(wide.seal().as_bytes()).unwrap();
    assert!(decoded.is_declustered() && decoded.stripe_width() == k + m, "{decoded:?}");
    assert!(!ArraySuperblock::decode(classic.seal().as_bytes()).unwrap().is_declustered());
    // N below k + m.
    refused(wide, |s| s.drive_count = (k + m - 1).into(), "drive 10 of 4, 3+2");
    refused(wide, |s| (s.drive_count, s.drive_index) = (4.into(), 0.into()), "drive 0 of 4, 3+2");
    // N past 64, at 64 with the top drive failed, and the drive index past N.
    refused(wide, |s| s.drive_count = 65.into(), "drive 10 of 65");
    let top = ArraySuperblock { drive_count: 64.into(), failed_drives: (1 << 63).into(), ..wide };
    assert!(ArraySuperblock::decode(top.seal().as_bytes()).unwrap().failed_drives.get() == 1 << 63);
    refused(wide, |s| s.drive_index = 11.into(), "drive 11 of 11");
    // Too many spares to leave k + m; a wider stripe than a segment header holds.
    refused(wide, |s| s.distributed_spares = 7.into(), "7 distributed spare(s)");
    refused(wide, |s| s.distributed_spares = u32::MAX.into(), "4294967295 distributed spare(s)");
    refused(wide, |s| (s.data_chunks, s.parity_chunks) = (35.into(), 2.into()), "35+2");
    refused(wide, |s| s.data_chunks = u32::MAX.into(), "4294967295+2");
    // A classic array has no spares and no placement.
    refused(classic, |s| s.distributed_spares = 1.into(), "1 distributed spare(s)");
    refused(classic, |s| s.placement_crc32c = 1.into(), "placement CRC 0x00000001");
    // Grown from 8, then 10 drives: each count declustered, rising, below N, with a CRC.
    let grown = ArraySuperblock {
        grown_from: [8, 10, 0, 0],
        grown_placement_crc32c: [0x1234_5678.into(), 0x9abc_def0.into(), 0.into()],
        ..wide
    };
    assert_eq!(ArraySuperblock::decode(grown.seal().as_bytes()).unwrap().grown_from(), vec![8, 10]);
    refused(grown, |s| s.grown_from = [10, 8, 0, 0], "drive 10 of 11");
    refused(grown, |s| s.grown_from = [8, 11, 0, 0], "drive 10 of 11");
    refused(grown, |s| s.grown_from = [5, 10, 0, 0], "drive 10 of 11");
    refused(grown, |s| s.grown_from = [8, 0, 10, 0], "drive 10 of 11");
    refused(grown, |s| s.grown_from[3] = 9, "drive 10 of 11");
    refused(grown, |s| s.grown_placement_crc32c[1] = 0.into(), "drive 10 of 11");
    refused(grown, |s| s.grown_placement_crc32c[2] = 1.into(), "drive 10 of 11");
    refused(classic, |s| s.grown_from = [3, 0, 0, 0], "inconsistent shape");
    // A failed drive past N.
    refused(wide, |s| s.failed_drives = (1 << 11).into(), "drive 10 of 11");
    // An older layout never held a declustered array.
    let mut s = wide;
    s.superblock_bytes = (PRE_DECLUSTERED_ARRAY_SUPERBLOCK_BYTES as u32).into();
    let mut bytes = s.as_bytes()[..PRE_DECLUSTERED_ARRAY_SUPERBLOCK_BYTES].to_vec();
    reseal_superblock(&mut bytes);
    assert_field_error(ArraySuperblock::decode(&bytes), "in the 172-byte layout");
}
