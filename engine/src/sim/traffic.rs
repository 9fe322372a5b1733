//! What each drive of a simulation served: bytes read and written by the commands that
//! completed successfully, per drive (by its index in the array, a replacement drive
//! continuing its predecessor's count). `zapraid bench declustered` measures a rebuild's
//! load on each drive from it (how evenly the survivors were read) rather than from the
//! placement's formula.
//!
//! Counted when the simulator reaps a completion from the drive, before the engine sees
//! it: a read by the bytes it returned, a write or Zone Append by the blocks the drive
//! says it wrote. A failed command counts nothing; zone management and reports move no
//! data and count nothing.

use zapraid_zns::{Completion, Done};

/// Bytes one drive served, and the commands that carried them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriveTraffic {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub reads: u64,
    pub writes: u64,
}

impl DriveTraffic {
    /// Counts what `completion` served, with blocks of `block_bytes`.
    pub(crate) fn count(&mut self, completion: &Completion, block_bytes: u64) {
        match &completion.result {
            Ok(Done::Read) => {
                self.bytes_read += completion.data.len() as u64;
                self.reads += 1;
            }
            Ok(Done::Written { blocks, .. }) => {
                self.bytes_written += blocks * block_bytes;
                self.writes += 1;
            }
            Ok(Done::ZoneManaged | Done::Zones(_)) | Err(_) => {}
        }
    }

    /// What was served between `earlier` (a snapshot of this counter) and now.
    pub fn since(&self, earlier: &DriveTraffic) -> DriveTraffic {
        DriveTraffic {
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
        }
    }
}

#[cfg(test)]
mod tests {
    use zapraid_zns::Geometry;

    use super::*;
    use crate::engine::{Config, Request, DEFAULT_STRIPE_TIMEOUT_NS};
    use crate::layout::{Mode, RaidLevel};
    use crate::sim::Simulator;

    const BLOCK: u64 = 4096;
    /// Ten full stripes of data.
    const BLOCKS: u64 = 30;

    fn simulator() -> Simulator {
        let config = Config {
            level: RaidLevel::Raid5 { drives: 4 },
            mode: Mode::ZoneWriteOnly,
            chunk_bytes: BLOCK,
            open_segments: crate::hybrid::OpenSegments::SINGLE,
            stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
            logical_blocks: 256,
            array_uuid: [7; 16],
            lookup_ps_per_entry: 0,
            merge_appends: false,
            declustering: Default::default(),
            l2p: crate::engine::L2pConfig::default(),
        };
        Simulator::new(Geometry::small(16, 256, 240), config, 3, None).unwrap()
    }

    fn read_all(sim: &mut Simulator, id: u64) {
        sim.submit(id, Request::Read { lba: 0, blocks: BLOCKS });
        assert!(sim.run_until_response(id).expect("answered").result.is_ok());
    }

    /// A (3+1)-RAID-5 of one-block chunks takes full stripes (each drive writes its
    /// chunks, parity and headers included), a read of every block reads each once from
    /// the drive holding it, and with a drive failed the others serve its blocks' stripes
    /// while it serves nothing.
    #[test]
    fn every_drive_s_reads_and_writes_are_counted() {
        let mut sim = simulator();
        assert_eq!(sim.drive_traffic(), &[DriveTraffic::default(); 4]);
        sim.submit(1, Request::Write { lba: 0, data: vec![0x5a; (BLOCKS * BLOCK) as usize] });
        sim.run_until_idle();
        let written: Vec<u64> = sim.drive_traffic().iter().map(|t| t.bytes_written).collect();
        // Each drive holds a quarter of the stripes' chunks (data and parity), at least.
        assert!(written.iter().all(|w| *w >= BLOCKS * BLOCK / 3), "{written:?}");
        assert!(written.iter().sum::<u64>() >= BLOCKS * BLOCK * 4 / 3, "{written:?}");
        let before = sim.drive_traffic().to_vec();
        read_all(&mut sim, 2);
        let read: Vec<u64> = sim.drive_traffic().iter().zip(&before).map(|(a, b)| a.since(b).bytes_read).collect();
        assert_eq!(read.iter().sum::<u64>(), BLOCKS * BLOCK, "{read:?}");
        // Drive 1 fails: it serves nothing, and each of its blocks is rebuilt from the
        // three others' chunks of its stripe.
        sim.drives[1].fail();
        sim.engine.fail_drive(1);
        let before = sim.drive_traffic().to_vec();
        read_all(&mut sim, 3);
        let read: Vec<u64> = sim.drive_traffic().iter().zip(&before).map(|(a, b)| a.since(b).bytes_read).collect();
        assert_eq!(read[1], 0, "{read:?}");
        assert!(read.iter().sum::<u64>() > BLOCKS * BLOCK, "{read:?}");
    }

    fn completion(result: zapraid_zns::Result<Done>, data_bytes: usize) -> Completion {
        Completion { tag: 1, result, data: vec![0; data_bytes], metadata: Vec::new() }
    }

    #[test]
    fn counts_what_completed_and_only_that() {
        let mut t = DriveTraffic::default();
        t.count(&completion(Ok(Done::Read), 8192), 4096);
        t.count(&completion(Ok(Done::Written { lba: 0, blocks: 3 }), 0), 4096);
        // A write's buffer comes back with its completion: the blocks written count, not it.
        t.count(&completion(Ok(Done::Written { lba: 8, blocks: 1 }), 4096), 4096);
        t.count(&completion(Err(zapraid_zns::Error::DeviceFailed), 4096), 4096);
        t.count(&completion(Ok(Done::ZoneManaged), 0), 4096);
        let want = DriveTraffic { bytes_read: 8192, bytes_written: 4 * 4096, reads: 1, writes: 2 };
        assert_eq!(t, want);
        let earlier = DriveTraffic { bytes_read: 4096, bytes_written: 4096, reads: 1, writes: 1 };
        assert_eq!(t.since(&earlier), DriveTraffic { bytes_read: 4096, bytes_written: 3 * 4096, reads: 0, writes: 1 });
    }
}
