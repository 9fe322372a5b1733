//! A declustered array under test (issue 35): the schemes the declustered tests run (4+1
//! on 11 drives and 4+2 on 13, one distributed spare, every mode) and a run of one against
//! a reference map of what each block holds (`engine/tests/declustered.rs`,
//! `engine/tests/rebalance.rs`).
#![allow(dead_code)] // not every test binary uses every helper

use std::collections::HashMap;

use zapraid_engine::{Config, Declustering, Mode, OpenSegments, RaidLevel, Request, Simulator};
use zapraid_zns::{Geometry, ZoneState};

use super::BLOCK;

pub const LOGICAL_BLOCKS: u64 = 240;

/// Each drive's zones: with 2 segments per zone index, the array has twice as many.
pub const ZONES: u32 = 8;

pub fn geometry() -> Geometry {
    super::geometry(ZONES, 8, 10)
}

#[derive(Clone, Copy, Debug)]
pub struct Scheme {
    pub level: RaidLevel,
    pub drives: u32,
    pub spares: u32,
    pub mode: Mode,
    pub chunk_blocks: u64,
    pub open: OpenSegments,
}

/// Drives the grow tests add (`grow.rs`, `grow_review.rs`).
pub const GROW_BY: u32 = 5;

impl Scheme {
    /// The config once grown by `GROW_BY` drives (the drives before recorded).
    pub fn grown(&self) -> Config {
        let mut config = self.config();
        config.declustering.grown_from[0] = self.drives as u8;
        config.declustering.drives = self.drives + GROW_BY;
        config
    }

    pub fn config(&self) -> Config {
        Config {
            open_segments: self.open,
            declustering: Declustering::wide(self.drives, self.spares),
            ..super::config(self.level, self.mode, self.chunk_blocks, LOGICAL_BLOCKS)
        }
    }
}

pub fn schemes() -> Vec<Scheme> {
    let single = OpenSegments::SINGLE;
    let hybrid = OpenSegments { small: 2, large: 1, large_chunk_bytes: 2 * BLOCK as u64 };
    // 4+1 on 11 drives and 4+2 on 13, one distributed spare: two segments per row.
    let shapes = [(RaidLevel::Raid5 { drives: 5 }, 11), (RaidLevel::Raid6 { drives: 6 }, 13)];
    let mut schemes = Vec::new();
    for (level, drives) in shapes {
        for mode in [Mode::ZapRaid { group_size: 4 }, Mode::ZoneWriteOnly, Mode::ZoneAppendOnly] {
            for chunk_blocks in [1, 2] {
                schemes.push(Scheme { level, drives, spares: 1, mode, chunk_blocks, open: single });
            }
        }
        let mode = Mode::ZapRaid { group_size: 4 };
        schemes.push(Scheme { level, drives, spares: 1, mode, chunk_blocks: 1, open: hybrid });
    }
    schemes
}

/// A run against a reference map of what each block holds.
pub struct Run {
    pub sim: Simulator,
    pub model: HashMap<u64, Vec<u8>>,
    pub next_id: u64,
    pub round: u64,
    pub what: String,
}

impl Run {
    pub fn new(scheme: Scheme) -> Run {
        let sim = Simulator::new(geometry(), scheme.config(), 11, None)
            .unwrap_or_else(|e| panic!("{scheme:?}: the array cannot be made: {e}"));
        Run { sim, model: HashMap::new(), next_id: 0, round: 0, what: format!("{scheme:?}") }
    }

    /// Writes of 1 to 5 blocks over `lbas`, all in flight at once, then waits for them.
    pub fn write_round(&mut self, lbas: std::ops::Range<u64>) {
        self.submit_round(lbas);
        for response in self.sim.run_until_idle() {
            assert!(response.result.is_ok(), "{}: a write failed: {:?}", self.what, response.result);
        }
    }

    /// The writes of `write_round`, submitted and not waited for.
    pub fn submit_round(&mut self, lbas: std::ops::Range<u64>) {
        self.round += 1;
        let mut lba = lbas.start;
        while lba < lbas.end {
            let blocks = (1 + (lba + self.round) % 5).min(lbas.end - lba);
            let data: Vec<u8> = (lba..lba + blocks).flat_map(|l| super::named_block(l, self.round)).collect();
            for l in lba..lba + blocks {
                self.model.insert(l, super::named_block(l, self.round));
            }
            self.sim.submit(self.next_id, Request::Write { lba, data });
            self.next_id += 1;
            lba += blocks;
        }
    }

    /// A run over `sim` (made by the caller: timed drives, tight zone limits).
    pub fn with(sim: Simulator, what: String) -> Run {
        Run { sim, model: HashMap::new(), next_id: 0, round: 0, what }
    }

    /// Every block of the array, read in one request.
    pub fn read_all(&mut self) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        self.sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        let got = self.sim.run_until_response(id).expect("read answered").result;
        got.unwrap_or_else(|e| panic!("{}: read: {e}", self.what))
    }

    pub fn verify(&mut self, when: &str) {
        let id = self.next_id;
        self.next_id += 1;
        self.sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        let got = self.sim.run_until_response(id).expect("read answered").result;
        let got = got.unwrap_or_else(|e| panic!("{} {when}: read failed: {e}", self.what));
        for lba in 0..LOGICAL_BLOCKS {
            let want = self.model.get(&lba).cloned().unwrap_or_else(|| vec![0; BLOCK]);
            assert!(got[lba as usize * BLOCK..][..BLOCK] == want[..], "{} {when}: LBA {lba} differs", self.what);
        }
    }

    /// `rounds` writes of every block.
    pub fn fill(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.write_round(0..LOGICAL_BLOCKS);
        }
    }

    /// Pulls `drive` (it fails every command) and tells the engine.
    pub fn pull(&mut self, drive: usize) {
        self.sim.drives[drive].fail();
        self.sim.engine.fail_drive(drive);
    }

    /// `rounds` writes of every block, then `drive` pulled and its rebuild into spare
    /// space started.
    pub fn fill_and_spare(&mut self, rounds: usize, drive: usize) {
        self.fill(rounds);
        self.pull(drive);
        let what = &self.what;
        self.sim.rebuild_into_spares(drive).unwrap_or_else(|e| panic!("{what}: into spares: {e}"));
    }

    /// Drives with at least one zone written.
    pub fn drives_written(&self) -> usize {
        self.sim.drives.iter().filter(|d| d.zones().iter().any(|z| z.state != ZoneState::Empty)).count()
    }
}
