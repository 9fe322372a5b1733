//! Tests of the lane map: the identity of a classic array, both directions of a
//! declustered one, and a grown one's rows in several placements.

use super::*;

#[test]
fn a_classic_array_maps_as_the_identity() {
    let placement = Placement::new(4, 4, 0).unwrap();
    let mut lanes = Lanes::new(&placement, 10, 100);
    assert!(lanes.is_classic());
    assert_eq!(lanes.segments(), 10);
    assert_eq!(lanes.drive(7, 2), 2);
    assert_eq!(lanes.lane(7, 3), Some(3));
    let command = DriveCommand {
        drive: 1,
        tag: 9,
        command: Command::Read { lba: 730, data: vec![], metadata: vec![] },
        delay_ns: 0,
    };
    let out = lanes.outbound(command);
    assert_eq!(out.drive, 1);
    assert!(matches!(out.command, Command::Read { lba: 730, .. }));
}

#[test]
fn commands_and_completions_map_both_ways() {
    let placement = Placement::new(7, 3, 1).unwrap();
    let (rows, zs) = (20, 100);
    let mut lanes = Lanes::new(&placement, rows, zs);
    assert_eq!(lanes.segments(), 40);
    for segment in 0..lanes.segments() {
        let drives: Vec<usize> = lanes.drives_of(segment).collect();
        let mut distinct = drives.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "segment {segment}'s drives {drives:?} are distinct");
        for (lane, drive) in drives.iter().enumerate() {
            assert_eq!(lanes.lane(segment, *drive), Some(lane));
        }
        let row = u64::from(lanes.row(segment));
        let group = segment % 2;
        let placed: Vec<usize> = placement.segment_drives(row, group).into_iter().map(|d| d as usize).collect();
        assert_eq!(drives, placed);
    }
    // Segment 13 (row 6, group 1), lane 2, an append of its zone.
    let (segment, lane) = (13u32, 2usize);
    let drive = lanes.drive(segment, lane);
    let start = u64::from(segment) * zs;
    let command = DriveCommand {
        drive: lane,
        tag: 5,
        command: Command::Append { zone_start_lba: start, data: vec![], metadata: vec![] },
        delay_ns: 0,
    };
    let out = lanes.outbound(command);
    assert_eq!(out.drive, drive);
    assert!(matches!(out.command, Command::Append { zone_start_lba: 600, .. }));
    let mut completion =
        Completion { tag: 5, result: Ok(Done::Written { lba: 642, blocks: 1 }), data: vec![], metadata: vec![] };
    assert_eq!(lanes.inbound(drive, &mut completion), (lane, Some(drive)));
    assert!(matches!(completion.result, Ok(Done::Written { lba, .. }) if lba == start + 42));
}

#[test]
fn a_grown_array_numbers_each_placement_apart_and_moves_rows_between_them() {
    // 4+1 with one spare: formatted on 8 drives (G = 1), grown to 16 (G = 3).
    let placements = [Placement::new(8, 5, 1).unwrap(), Placement::new(16, 5, 1).unwrap()];
    let (rows, zs) = (6u32, 100u64);
    let mut lanes = Lanes::grown(&placements, rows, zs);
    assert_eq!((lanes.segments(), lanes.epochs(), lanes.groups()), (rows + 3 * rows, 2, 3));
    // Every row starts in the newest placement: the old numbers are unusable.
    for row in 0..rows {
        assert!(!lanes.row_is_old(row));
        assert!(!lanes.is_usable(row), "old number {row}");
        assert_eq!(lanes.row_segments(row), rows + 3 * row..rows + 3 * row + 3);
        for segment in lanes.row_segments(row) {
            assert!(lanes.is_usable(segment));
            assert_eq!(lanes.row(segment), row);
            let group = (segment - rows) % 3;
            let placed: Vec<usize> =
                placements[1].segment_drives(u64::from(row), group).into_iter().map(|d| d as usize).collect();
            assert_eq!(lanes.drives_of(segment).collect::<Vec<_>>(), placed);
        }
    }
    // Row 2 goes back to the old placement (a start found a segment of it there): its
    // one old number is usable and on 5 of the first 8 drives, the new drives are spare
    // positions there, and the new numbers of the row name no drive.
    lanes.set_row_epoch(2, 0);
    assert!(lanes.row_is_old(2) && lanes.is_usable(2));
    assert_eq!(lanes.row_segments(2), 2..3);
    assert!(lanes.drives_of(2).all(|d| d < 8));
    for segment in rows + 6..rows + 9 {
        assert!(!lanes.is_usable(segment));
        assert!((0..16).all(|d| lanes.lane(segment, d) != Some(0)), "unusable {segment} holds no lane");
    }
    let failed = vec![false; 16];
    let spares: Vec<usize> = lanes.row_spares(2).iter().map(|&d| usize::from(d)).collect();
    assert_eq!(spares.len(), 3 + 8, "the old placement's 3 spare positions and the 8 drives added");
    assert!((8..16).all(|d| spares.contains(&d)));
    assert!(lanes.spare_for(2, &failed).is_some());
    // A command of the old number goes to zone 2 of its drive; its completion comes back.
    let command = DriveCommand {
        drive: 1,
        tag: 3,
        command: Command::Append { zone_start_lba: 2 * zs, data: vec![], metadata: vec![] },
        delay_ns: 0,
    };
    let out = lanes.outbound(command);
    assert_eq!(out.drive, lanes.drive(2, 1));
    assert!(matches!(out.command, Command::Append { zone_start_lba: 200, .. }));
    let mut completion =
        Completion { tag: 3, result: Ok(Done::Written { lba: 207, blocks: 1 }), data: vec![], metadata: vec![] };
    assert_eq!(lanes.inbound(out.drive, &mut completion), (1, Some(out.drive)));
    assert!(matches!(completion.result, Ok(Done::Written { lba: 207, .. })));
    // Emptied, it takes the newest placement again.
    lanes.set_row_epoch(2, 1);
    assert!(!lanes.is_usable(2) && lanes.is_usable(rows + 6) && !lanes.row_is_old(2));
}
