use zapraid_zns::Geometry;

use super::*;
use crate::checksum::{BlockChecksums, ReadChecks};
use crate::engine::{Request, Response};
use crate::error::Error;
use crate::layout::{Mode, RaidLevel};

const BLOCK: usize = 512;

fn geometry(zone_count: u32) -> Geometry {
    Geometry {
        block_size_bytes: BLOCK as u32,
        metadata_bytes_per_block: 32,
        max_open_zones: Some(8),
        max_active_zones: Some(9),
        ..Geometry::small(zone_count, 64, 60)
    }
}

fn map(shards: u32, unit: u64, logical: u64) -> ShardMap {
    ShardMap::new(shards, unit, logical, &geometry(40)).unwrap()
}

/// Blocks `lba`.. as the tests write them: each block its LBA's low byte throughout.
fn blocks(lba: u64, count: u64) -> Vec<u8> {
    (lba..lba + count).flat_map(|l| std::iter::repeat_n(l as u8, BLOCK)).collect()
}

#[test]
fn every_lba_has_one_place_and_each_shard_its_share() {
    for (shards, unit, logical) in [(1, 4, 37), (2, 4, 37), (3, 5, 100), (4, 1, 9), (3, 8, 17)] {
        let m = map(shards, unit, logical);
        let mut seen = vec![Vec::new(); shards as usize];
        for lba in 0..logical {
            let (shard, local) = m.locate(lba);
            assert_eq!(shard as u64, lba / unit % u64::from(shards));
            assert_eq!(m.array_lba(shard, local), lba, "{shards} shards, unit {unit}");
            seen[shard].push(local);
        }
        for (shard, locals) in seen.iter().enumerate() {
            // Each shard's LBAs are 0..its logical blocks, in array order.
            assert_eq!(locals, &(0..m.logical_blocks_of(shard)).collect::<Vec<_>>(), "shard {shard}");
        }
        if shards == 1 {
            assert!((0..logical).all(|l| m.locate(l) == (0, l)));
        }
    }
}

#[test]
fn zones_are_cut_in_contiguous_runs() {
    let m = ShardMap::new(3, 4, 60, &geometry(40)).unwrap();
    assert_eq!((0..3).map(|s| m.zones_of(s)).collect::<Vec<_>>(), vec![0..13, 13..26, 26..40]);
    assert_eq!(ShardMap::new(1, 4, 60, &geometry(40)).unwrap().zones_of(0), 0..40);
    assert!(ShardMap::new(41, 1, 1000, &geometry(40)).is_err());
    assert!(ShardMap::new(0, 4, 60, &geometry(40)).is_err());
    assert!(ShardMap::new(2, 0, 60, &geometry(40)).is_err());
    let err = ShardMap::new(3, 8, 16, &geometry(40)).unwrap_err().to_string();
    assert!(err.contains("16 logical blocks leave shard 2 none"), "{err}");
}

#[test]
fn a_write_is_cut_by_shard_and_its_read_joined_in_lba_order() {
    let m = map(3, 4, 100);
    // Blocks 2..25: units 0 (2..4) to 6 (24..25), shards 0 1 2 0 1 2 0.
    let split = m.split(Request::Write { lba: 2, data: blocks(2, 23) }).unwrap();
    let parts: Vec<(usize, u64, Vec<u8>)> = split
        .parts
        .into_iter()
        .map(|p| match p.request {
            Request::Write { lba, data } => (p.shard, lba, data),
            other => panic!("{other:?}"),
        })
        .collect();
    let expected_locals = [(0, 2, 2 + 4 + 1), (1, 0, 8), (2, 0, 8)];
    for ((shard, lba, data), (s, l, n)) in parts.iter().zip(expected_locals) {
        assert_eq!((*shard, *lba, data.len() / BLOCK), (s, l, n));
        // Each block is the array block at its place.
        for (i, block) in data.chunks(BLOCK).enumerate() {
            assert_eq!(u64::from(block[0]), m.array_lba(s, l + i as u64), "shard {s} block {i}");
        }
    }
    // Reads come back from the shards in any order; the join puts them in LBA order.
    let mut split = m.split(Request::Read { lba: 2, blocks: 23 }).unwrap();
    let answers: Vec<(usize, Response)> = split
        .parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let Request::Read { lba, blocks: n } = p.request else { panic!() };
            let data = (lba..lba + n).flat_map(|l| blocks(m.array_lba(p.shard, l), 1)).collect();
            (i, Response { id: 9, result: Ok(data), checks: None })
        })
        .collect();
    let mut done = false;
    for (i, response) in answers.into_iter().rev() {
        assert!(!done);
        done = split.join.answer(i, response);
    }
    assert!(done);
    let response = split.join.finish(5);
    assert_eq!((response.id, response.result.unwrap()), (5, blocks(2, 23)));
}

#[test]
fn checksums_and_unverified_checks_follow_their_blocks() {
    let m = map(2, 3, 50);
    let data = blocks(4, 7);
    let sums = BlockChecksums::of(&data, BLOCK);
    let split = m.split(Request::WriteWithChecksums { lba: 4, data, checksums: sums }).unwrap();
    assert_eq!(split.parts.len(), 2);
    for p in &split.parts {
        let Request::WriteWithChecksums { data, checksums, .. } = &p.request else { panic!() };
        assert_eq!(checksums, &BlockChecksums::of(data, BLOCK), "shard {}", p.shard);
    }
    let bad = Request::WriteWithChecksums { lba: 4, data: blocks(4, 7), checksums: BlockChecksums::of(&[], BLOCK) };
    assert!(m.split(bad).unwrap_err().to_string().contains("0 block checksums for a write of 7 blocks"));

    // Unverified reads: each block's metadata lands at its block.
    let mut split = m.split(Request::ReadUnverified { lba: 4, blocks: 7, buffer: vec![1; 3] }).unwrap();
    let mut answers = Vec::new();
    for (i, p) in split.parts.iter().enumerate() {
        let Request::ReadUnverified { lba, blocks: n, .. } = p.request else { panic!() };
        let data: Vec<u8> = (lba..lba + n).flat_map(|l| blocks(m.array_lba(p.shard, l), 1)).collect();
        let meta = (lba..lba + n).map(|l| Some(metadata_for(m.array_lba(p.shard, l)))).collect();
        answers.push((i, Response { id: 0, result: Ok(data), checks: Some(ReadChecks::Many(meta)) }));
    }
    for (i, r) in answers {
        split.join.answer(i, r);
    }
    let response = split.join.finish(1);
    let checks = response.checks.unwrap();
    let lbas: Vec<u64> = checks.metadata().iter().map(|m| m.unwrap().lba.get()).collect();
    assert_eq!(lbas, (4..11).collect::<Vec<_>>());
    assert_eq!(response.result.unwrap(), blocks(4, 7));
}

fn metadata_for(lba: u64) -> crate::format::BlockMetadata {
    crate::format::BlockMetadata::new(lba, 1, 0, 1, crate::format::BlockKind::Data)
}

#[test]
fn the_first_error_in_lba_order_names_the_arrays_lba_and_zone() {
    let m = map(2, 4, 64);
    let mut split = m.split(Request::Read { lba: 6, blocks: 8 }).unwrap();
    // Parts: shard 1 (array 6..8, 12..14 → local 2..6), shard 0 (array 8..12 → local 4..8).
    assert_eq!(split.parts.iter().map(|p| p.shard).collect::<Vec<_>>(), vec![1, 0]);
    let lost = |lba| Response { id: 0, result: Err(Error::Lost { lba }), checks: None };
    let corrupt = Error::Corrupt { drive: 2, zone: 3, offset_blocks: 9, structure: "footer", reason: "x".into() };
    split.join.answer(1, Response { id: 0, result: Err(corrupt), checks: None });
    assert!(split.join.answer(0, lost(5)));
    let error = split.join.finish(3).result.unwrap_err();
    assert!(matches!(error, Error::Lost { lba: 13 }), "{error:?}");

    let mut split = m.split(Request::Read { lba: 6, blocks: 8 }).unwrap();
    let corrupt = Error::Corrupt { drive: 2, zone: 3, offset_blocks: 9, structure: "footer", reason: "x".into() };
    split.join.answer(0, Response { id: 0, result: Err(corrupt), checks: None });
    split.join.answer(1, Response { id: 0, result: Ok(vec![0; 4 * BLOCK]), checks: None });
    let error = split.join.finish(3).result.unwrap_err();
    assert!(matches!(error, Error::Corrupt { zone: 23, .. }), "shard 1's zone 3 is zone 20 + 3: {error:?}");

    // Parts whose shards said their errors in the array's terms already: passed on as is.
    let mut split = m.split(Request::Read { lba: 6, blocks: 8 }).unwrap();
    split.join.errors_in_array_terms();
    split.join.answer(0, lost(13));
    split.join.answer(1, Response { id: 0, result: Ok(vec![0; 4 * BLOCK]), checks: None });
    let error = split.join.finish(3).result.unwrap_err();
    assert!(matches!(error, Error::Lost { lba: 13 }), "{error:?}");
}

#[test]
fn flushes_reach_every_shard_and_bad_requests_none() {
    let m = map(3, 4, 100);
    let split = m.split(Request::Flush).unwrap();
    assert_eq!(split.parts.iter().map(|p| p.shard).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(split.parts.iter().all(|p| matches!(p.request, Request::Flush)));
    let err = m.split(Request::Read { lba: 98, blocks: 3 }).unwrap_err().to_string();
    assert!(err.contains("3 blocks at LBA 98 outside the 100 logical blocks"), "{err}");
    assert!(m.split(Request::Discard { lba: 0, blocks: 0 }).is_err());
    assert!(m.split(Request::Write { lba: 0, data: vec![0; BLOCK + 1] }).is_err());
    // A discard within one unit goes to its shard alone, at its local LBA.
    let split = m.split(Request::Discard { lba: 13, blocks: 2 }).unwrap();
    assert!(matches!(split.parts[..], [Part { shard: 0, request: Request::Discard { lba: 5, blocks: 2 } }]));
}

#[test]
fn the_zone_limits_must_hold_every_shards_open_segments() {
    let g = geometry(40);
    let plan = crate::hybrid::SegmentPlan::new(
        &g,
        RaidLevel::Raid5 { drives: 4 },
        Mode::ZapRaid { group_size: 4 },
        BLOCK as u64,
        crate::hybrid::OpenSegments::SINGLE,
    )
    .unwrap();
    assert!(map(4, 4, 100).check_zone_limits(&g, &plan, 1).is_ok(), "4 x 2 open, 4 x 2 + 1 active");
    let err = map(4, 4, 100).check_zone_limits(&g, &plan, 2).unwrap_err().to_string();
    assert!(err.contains("allow 9 active zones; 4 shards of 1 open segment need 8 (2 each"), "{err}");
    assert!(err.ends_with("+ 2 other active zones: 1 short"), "{err}");
    let few = Geometry { max_open_zones: Some(5), ..g };
    let err = map(3, 4, 100).check_zone_limits(&few, &plan, 0).unwrap_err().to_string();
    assert!(err.contains("the drives allow 5 open zones; 3 shards of 1 open segment need 6"), "{err}");
    assert!(err.ends_with(": 1 short"), "{err}");
    // Each shard keeps its own reserve: 40 zones hold less in 4 shards than in 1.
    let whole = plan.capacity_blocks(40);
    assert!(map(1, 4, whole).check_capacity(&plan).is_ok());
    let err = map(4, 4, whole).check_capacity(&plan).unwrap_err().to_string();
    assert!(err.starts_with("invalid array configuration: shard 0 of 4 holds"), "{err}");
    // The most 4 shards can export fits every shard, and one unit more per shard does not.
    let most = ShardMap::largest_logical_blocks(4, 4, &g, &plan);
    assert!(most > 0 && most.is_multiple_of(16) && most < whole, "{most} of {whole}");
    assert!(map(4, 4, most).check_capacity(&plan).is_ok());
    assert!(map(4, 4, most + 16).check_capacity(&plan).is_err());
    assert_eq!(ShardMap::largest_logical_blocks(1, 4, &g, &plan), whole, "one shard: one engine's");
}

#[test]
fn shards_get_their_own_uuid_but_one_shard_the_arrays() {
    let config = crate::engine::Config {
        level: RaidLevel::Raid5 { drives: 4 },
        mode: Mode::ZoneWriteOnly,
        chunk_bytes: BLOCK as u64,
        open_segments: crate::hybrid::OpenSegments::SINGLE,
        stripe_timeout_ns: 1,
        logical_blocks: 100,
        lookup_ps_per_entry: 0,
        merge_appends: true,
        declustering: Default::default(),
        l2p: Default::default(),
        array_uuid: [7; 16],
    };
    let one = map(1, 4, 100).shard_config(0, config);
    assert_eq!((one.array_uuid, one.logical_blocks), ([7; 16], 100));
    let m = map(3, 4, 100);
    let uuids: Vec<[u8; 16]> = (0..3).map(|s| m.shard_config(s, config).array_uuid).collect();
    assert!(uuids[0] != uuids[1] && uuids[1] != uuids[2] && uuids[0] != [7; 16]);
    assert_eq!((0..3).map(|s| m.shard_config(s, config).logical_blocks).sum::<u64>(), 100);
}
