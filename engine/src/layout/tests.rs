//! Tests of the layout: regions, modes, refusals and how levels read.

use super::*;

fn qemu() -> Geometry {
    Geometry { zone_append_max_blocks: 32, max_transfer_blocks: 128, ..Geometry::small(31, 16384, 15872) }
}

#[test]
fn regions_fill_the_zone_capacity() {
    for chunk in [4096, 8192, 16384, 65536] {
        for mode in [Mode::ZapRaid { group_size: 256 }, Mode::ZoneWriteOnly, Mode::ZoneAppendOnly] {
            let l = Layout::new(&qemu(), RaidLevel::Raid5 { drives: 4 }, mode, chunk).unwrap();
            let used = l.header_blocks + l.stripes * l.chunk_blocks + l.footer_blocks;
            assert!(used <= l.zone_capacity_blocks, "{l:?} overflows");
            assert!(l.zone_capacity_blocks - used < l.chunk_blocks + 2, "{l:?} wastes space");
            let entries = l.footer_blocks * footer_entries_per_block(4096) as u64;
            assert!(entries >= l.stripes * l.chunk_blocks, "footer too small");
        }
    }
}

#[test]
fn parity_rotates_for_raid5_and_stays_for_raid4() {
    let g = qemu();
    let r5 = Layout::new(&g, RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 4096).unwrap();
    let parity_drives: Vec<usize> = (0..4).map(|s| r5.drive_of(s, 3)).collect();
    assert_eq!(parity_drives, vec![3, 0, 1, 2]);
    let r4 = Layout::new(&g, RaidLevel::Raid4 { drives: 4 }, Mode::ZoneWriteOnly, 4096).unwrap();
    assert!((0..8).all(|s| r4.drive_of(s, 3) == 3));
    for s in 0..8 {
        for c in 0..4 {
            assert_eq!(r5.chunk_on(s, r5.drive_of(s, c)), c);
        }
    }
}

#[test]
fn modes_set_the_group_size() {
    let g = qemu();
    let l = |mode| Layout::new(&g, RaidLevel::Raid5 { drives: 4 }, mode, 4096).unwrap();
    assert_eq!(l(Mode::ZoneWriteOnly).group_size, 1);
    assert_eq!(l(Mode::ZapRaid { group_size: 256 }).group_size, 256);
    let za = l(Mode::ZoneAppendOnly);
    assert_eq!((za.group_size, za.groups()), (za.stripes, 1));
    assert_eq!(l(Mode::ZapRaid { group_size: 256 }).stripe_id_bits(), 8);
    assert!(!l(Mode::ZapRaid { group_size: 1 }).uses_append(), "G = 1 is written with Zone Write");
    assert!(l(Mode::ZapRaid { group_size: 2 }).uses_append());
}

#[test]
fn refuses_what_cannot_work() {
    let g = qemu();
    let no_meta = Geometry { metadata_bytes_per_block: 16, ..g };
    let err = Layout::new(&no_meta, RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 4096).unwrap_err();
    assert!(err.to_string().contains("reformat"), "{err}");
    assert!(Layout::new(&g, RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 256 }, 256 << 10).is_err());
    assert!(Layout::new(&g, RaidLevel::Raid5 { drives: 2 }, Mode::ZoneWriteOnly, 4096).is_err());
    assert!(Layout::new(&g, RaidLevel::Raid01 { drives: 3 }, Mode::ZoneWriteOnly, 4096).is_err());
    assert!(Layout::new(&g, RaidLevel::Erasure { k: 4, m: 5 }, Mode::ZoneWriteOnly, 4096).is_err());
    assert!(Layout::new(&g, RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 6000).is_err());
    let granular = Geometry { transfer_granule_blocks: 8, ..g };
    let err = Layout::new(&granular, RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 12 * 4096).unwrap_err();
    assert!(err.to_string().contains("multiples of 8"), "{err}");
    assert!(Layout::new(&granular, RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 16 * 4096).is_ok());
}

#[test]
fn levels_and_modes_read_as_people_write_them() {
    let shown = [
        (RaidLevel::Raid0 { drives: 4 }, "RAID-0 (4)"),
        (RaidLevel::Raid1 { drives: 3 }, "RAID-1 (3 copies)"),
        (RaidLevel::Raid01 { drives: 4 }, "RAID-01 (2+2)"),
        (RaidLevel::Raid4 { drives: 4 }, "RAID-4 (3+1)"),
        (RaidLevel::Raid5 { drives: 4 }, "RAID-5 (3+1)"),
        (RaidLevel::Raid6 { drives: 6 }, "RAID-6 (4+2)"),
        (RaidLevel::Erasure { k: 4, m: 3 }, "Reed-Solomon (4+3)"),
    ];
    for (level, text) in shown {
        assert_eq!(level.to_string(), text);
        let (k, m) = level.shape();
        assert_eq!(RaidLevel::from_name(level.name(), k, m), Some(level), "{text}");
    }
    assert_eq!(format!("[{:>14}]", RaidLevel::Raid5 { drives: 4 }), "[  RAID-5 (3+1)]");
    assert_eq!(RaidLevel::from_name("raid5", 3, 2), None, "RAID-5 has one parity drive");
    assert_eq!(RaidLevel::from_name("raid7", 3, 1), None);
    for (mode, text, name) in [
        (Mode::ZapRaid { group_size: 256 }, "ZapRAID G=256", "zapraid"),
        (Mode::ZoneWriteOnly, "ZoneWrite-Only", "zone-write"),
        (Mode::ZoneAppendOnly, "ZoneAppend-Only", "zone-append"),
    ] {
        assert_eq!((mode.to_string().as_str(), mode.name()), (text, name));
        assert_eq!(Mode::from_name(mode.name(), mode.group_size()), Some(mode));
        let (code, group_size) = mode.code();
        assert_eq!(Mode::from_code(code, group_size), Some(mode));
    }
    assert_eq!(Mode::ZoneAppendOnly.group_size(), None);
    let err = Layout::new(&qemu(), RaidLevel::Raid5 { drives: 2 }, Mode::ZoneWriteOnly, 4096).unwrap_err();
    assert_eq!(err.to_string(), "invalid array configuration: RAID-5 needs at least 3 drives (2 given)");
}

/// Too few or too many drives are said in drives, as the level was given (RAID-01
/// over 1 drive said "needs 0 drives"; RAID-1 over 37 said "1+36 chunks").
#[test]
fn drive_counts_are_checked_in_drives() {
    let said = |level: RaidLevel| level.validate().unwrap_err().to_string();
    assert_eq!(
        said(RaidLevel::Raid01 { drives: 1 }),
        "invalid array configuration: RAID-01 needs an even number of drives, at least 2 (1 given)"
    );
    assert!(said(RaidLevel::Raid01 { drives: 3 }).contains("even number of drives, at least 2 (3 given)"));
    assert_eq!(
        said(RaidLevel::Raid1 { drives: 37 }),
        "invalid array configuration: RAID-1 takes at most 5 drives (37 given)"
    );
    assert!(said(RaidLevel::Raid0 { drives: 37 }).ends_with("RAID-0 takes at most 32 drives (37 given)"));
    assert!(said(RaidLevel::Raid5 { drives: 34 }).ends_with("RAID-5 takes at most 33 drives (34 given)"));
    assert!(said(RaidLevel::Raid6 { drives: 40 }).ends_with("RAID-6 takes at most 34 drives (40 given)"));
    assert!(said(RaidLevel::Raid01 { drives: 10 }).ends_with("RAID-01 takes at most 8 drives (10 given)"));
    assert!(said(RaidLevel::Erasure { k: 30, m: 8 }).contains("at most 4 parity chunks"));
    // Every level takes as many drives as it says, and no more.
    for level in [
        RaidLevel::Raid0 { drives: 1 },
        RaidLevel::Raid1 { drives: 2 },
        RaidLevel::Raid01 { drives: 2 },
        RaidLevel::Raid4 { drives: 3 },
        RaidLevel::Raid5 { drives: 3 },
        RaidLevel::Raid6 { drives: 4 },
    ] {
        let with = |drives: usize| match level {
            RaidLevel::Raid0 { .. } => RaidLevel::Raid0 { drives },
            RaidLevel::Raid1 { .. } => RaidLevel::Raid1 { drives },
            RaidLevel::Raid01 { .. } => RaidLevel::Raid01 { drives },
            RaidLevel::Raid4 { .. } => RaidLevel::Raid4 { drives },
            RaidLevel::Raid5 { .. } => RaidLevel::Raid5 { drives },
            _ => RaidLevel::Raid6 { drives },
        };
        let most = level.max_drives();
        assert!(with(most).validate().is_ok(), "{level} over {most}");
        assert!(ParityCodec::for_level(with(most)).is_ok(), "{level} over {most}: no code");
        let step = if matches!(level, RaidLevel::Raid01 { .. }) { 2 } else { 1 };
        assert!(with(most + step).validate().is_err(), "{level} over {}", most + step);
    }
}
