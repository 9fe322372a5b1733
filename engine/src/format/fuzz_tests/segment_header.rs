//! Fuzzing of the segment header: both layouts (240 bytes, a classic array's; 280, a
//! declustered array's with its segment number and lane drives).

use proptest::prelude::*;
use zapraid_fuzz::{assert_field_error, example, fields_of, fuzz, put_crc32c, verdict, Encoded, Field};
use zerocopy::little_endian::{U32, U64};
use zerocopy::IntoBytes;

use super::super::*;

/// (drives, drive index, data chunks) of a stripe the format holds.
fn shape() -> impl Strategy<Value = (u32, u32, u32)> {
    (1..=MAX_DRIVES as u32).prop_flat_map(|drives| (Just(drives), 0..drives, 0..=drives))
}

/// Whether a decoded shape is one the format holds (the decoder's rule, said again).
fn shape_holds(drives: u32, index: u32, data: u32, parity: u32) -> bool {
    (1..=MAX_DRIVES as u32).contains(&drives) && index < drives && u64::from(data) + u64::from(parity) == drives.into()
}

/// Lanes of a declustered segment of `width` lanes: N from `width` to 64, the lanes on
/// distinct drives, any segment number.
fn lanes(width: u32) -> impl Strategy<Value = SegmentLanes> {
    (width..=MAX_ARRAY_DRIVES as u32)
        .prop_flat_map(|n| (Just(n), Just((0..n).collect::<Vec<u32>>()).prop_shuffle(), any::<u32>()))
        .prop_map(move |(n, drives, number)| SegmentLanes::new(number, n, &drives[..width as usize]))
}

/// A header of random valid fields (not sealed), with the lanes of a declustered segment
/// of its width.
fn valid_segment_header() -> impl Strategy<Value = (SegmentHeader, SegmentLanes)> {
    let fields = (
        shape(),
        any::<[u8; 16]>(),
        (any::<u64>(), any::<u8>(), 0u8..=2, 0u8..=1),
        (1u32.., 1u32.., any::<u32>()),
        (any::<u64>(), any::<u64>()),
        proptest::collection::vec(any::<u32>(), MAX_DRIVES),
    );
    let header = fields.prop_map(
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
        },
    );
    header.prop_flat_map(|h| (Just(h), lanes(h.drive_count.get())))
}

/// The fields of a header of `bytes` bytes, each zone and each lane drive on its own.
fn segment_header_fields(bytes: usize) -> Vec<Field> {
    let mut fields = fields_of!(SegmentHeader, 0;
        magic, version, header_bytes, array_uuid, segment_sequence, drive_index, drive_count, data_chunks,
        parity_chunks, level, mode, segment_class, reserved0, chunk_blocks, group_size, block_size_bytes, stripes,
        created_timestamp);
    let zones = std::mem::offset_of!(SegmentHeader, zones);
    fields.extend((0..MAX_DRIVES).map(|i| Field::new(zones + 4 * i, 4)));
    if bytes == DECLUSTERED_SEGMENT_HEADER_BYTES {
        fields.extend(fields_of!(SegmentLanes, SEGMENT_LANES_OFFSET; segment_number, array_drives));
        let lane_drives = SEGMENT_LANES_OFFSET + std::mem::offset_of!(SegmentLanes, lane_drives);
        fields.extend((0..MAX_DRIVES).map(|i| Field::new(lane_drives + i, 1)));
    } else {
        fields.extend(fields_of!(SegmentHeader, 0; reserved1));
    }
    fields.push(Field::new(bytes - 4, 4));
    fields
}

/// The CRC where the size field says the layout puts it.
fn reseal_segment_header(bytes: &mut [u8]) {
    let size = bytes.get(12..16).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
    let end = if size == Some(DECLUSTERED_SEGMENT_HEADER_BYTES) {
        DECLUSTERED_SEGMENT_HEADER_BYTES
    } else {
        SEGMENT_HEADER_BYTES
    };
    put_crc32c(bytes, end - 4, 0..end - 4);
}

/// What a decoded header and its lanes must be.
fn segment_header_is_sound(h: &SegmentHeader, lanes: &SegmentLanes, bytes: &[u8]) {
    let (w, index) = (h.drive_count.get(), h.drive_index.get());
    assert!(shape_holds(w, index, h.data_chunks.get(), h.parity_chunks.get()), "{h:?}");
    assert!(h.chunk_blocks.get() > 0 && h.group_size.get() > 0, "{h:?}");
    if h.is_declustered() {
        let n = lanes.array_drives.get();
        assert!((w..=MAX_ARRAY_DRIVES as u32).contains(&n), "{lanes:?}");
        let used = &lanes.lane_drives[..w as usize];
        assert!(used.iter().all(|d| u32::from(*d) < n), "{lanes:?}");
        assert!((1..used.len()).all(|i| !used[..i].contains(&used[i])), "{lanes:?}");
        assert!(lanes.lane_drives[w as usize..].iter().all(|d| *d == 0), "{lanes:?}");
        assert_eq!(h.seal_declustered(lanes), bytes[..DECLUSTERED_SEGMENT_HEADER_BYTES]);
        assert_eq!(lanes.lane_of_drive(u32::from(used[index as usize]), w as usize), Some(index as usize));
    } else {
        assert_eq!(h.header_bytes.get() as usize, SEGMENT_HEADER_BYTES, "{h:?}");
        assert_eq!(*lanes, SegmentLanes::implied_by(h));
        assert_eq!(lanes.segment_number.get(), h.zones[index as usize].get());
        assert_eq!(h.seal().as_bytes(), &bytes[..SEGMENT_HEADER_BYTES]);
    }
    // Written again as the engine writes it, it reads as the same header and lanes.
    let (again, again_lanes) = SegmentHeader::decode_with_lanes(&h.sealed_bytes(lanes)).expect("sealed again");
    assert_eq!(again.as_bytes()[16..SEGMENT_LANES_OFFSET], h.as_bytes()[16..SEGMENT_LANES_OFFSET]);
    assert_eq!(again_lanes, *lanes);
}

#[test]
fn segment_header_fuzzed_past_its_checksum() {
    let valid = (valid_segment_header(), any::<bool>()).prop_map(|((h, lanes), declustered)| {
        let bytes = if declustered { h.seal_declustered(&lanes).to_vec() } else { h.seal().as_bytes().to_vec() };
        let fields = segment_header_fields(bytes.len());
        Encoded { bytes, fields, context: () }
    });
    fuzz(
        "the segment header",
        valid,
        |bytes, _| reseal_segment_header(bytes),
        |bytes, _| {
            let result = SegmentHeader::decode_with_lanes(bytes);
            if let Ok((h, lanes)) = &result {
                segment_header_is_sound(h, lanes, bytes);
                assert_eq!(SegmentHeader::decode(bytes).expect("the same bytes").as_bytes(), h.as_bytes());
            }
            verdict(&result)
        },
    );
}

#[test]
fn segment_header_field_errors() {
    let (h, _) = example(valid_segment_header());
    let mut bad = h;
    bad.drive_index = h.drive_count;
    let expected = format!("drive {0} of {0}", h.drive_count.get());
    assert_field_error(SegmentHeader::decode(bad.seal().as_bytes()), &expected);
    let mut bad = h;
    bad.chunk_blocks = 0.into();
    assert_field_error(SegmentHeader::decode(bad.seal().as_bytes()), "chunk 0 blocks");
}

/// A 4+1 segment's header of lane 1, numbered 17, of an array of 11 drives.
fn declustered() -> (SegmentHeader, SegmentLanes) {
    let (h, _) = example(valid_segment_header());
    let h = SegmentHeader {
        drive_index: 1.into(),
        drive_count: 5.into(),
        data_chunks: 4.into(),
        parity_chunks: 1.into(),
        ..h
    };
    (h, SegmentLanes::new(17, 11, &[3, 0, 9, 4, 7]))
}

/// `lanes` with `change` made, sealed with a valid header, give a field error saying
/// `what`.
#[track_caller]
fn lanes_refused(change: impl FnOnce(&mut SegmentLanes), what: &str) {
    let (h, mut lanes) = declustered();
    change(&mut lanes);
    assert_field_error(SegmentHeader::decode_with_lanes(&h.seal_declustered(&lanes)), what);
}

#[test]
fn segment_lanes_field_errors() {
    let (h, lanes) = declustered();
    let (decoded, got) = SegmentHeader::decode_with_lanes(&h.seal_declustered(&lanes)).unwrap();
    assert_eq!((decoded.drive_index.get(), got.drive_of_lane(1), got.segment_number.get()), (1, Some(0), 17));
    // A lane on no drive of the array, two lanes on one drive.
    lanes_refused(|l| l.lane_drives[4] = 11, "lane drives [3, 0, 9, 4, 11] are not distinct drives below 11");
    lanes_refused(|l| l.lane_drives[2] = 3, "lane drives [3, 0, 3, 4, 7] are not");
    // N below the lanes, past 64, or 0.
    lanes_refused(|l| l.array_drives = 4.into(), "an array of 4 drives for stripes of 5");
    lanes_refused(|l| l.array_drives = 65.into(), "an array of 65 drives");
    lanes_refused(|l| l.array_drives = 0.into(), "an array of 0 drives");
    // An entry past the lanes.
    lanes_refused(|l| l.lane_drives[5] = 1, "entries past 5 lanes are not 0");
    // The shape is checked in this layout too.
    let mut bad = h;
    bad.drive_index = 5.into();
    assert_field_error(SegmentHeader::decode(&bad.seal_declustered(&lanes)), "drive 5 of 5");
}
