//! Virtual-time performance model of a ZNS SSD, in the spirit of FEMU.
//!
//! A command passes through serial resources, each a "server" that is busy until a time:
//! the controller (drive-wide, every command), the per-zone append sequencer and the
//! drive-wide append engine (Zone Append only, with a small cache of per-zone append
//! contexts), the channels that carry data to the chips, and the flash chips a zone is
//! striped over. Writes are acknowledged from a
//! write-back buffer once transferred, but never further than `write_buffer_window_ns`
//! ahead of the chips that program them, so sustained throughput is bounded by the flash.
//! Zone Append parallelism within a zone is bounded by `append_slots_per_zone`.
//!
//! The model owns no data; the emulator asks it when a command completes. It is
//! deterministic given the seeded jitter the emulator passes in.

use std::collections::VecDeque;

use crate::geometry::Geometry;

/// Parameters of the timing model; all times in nanoseconds of virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimingParams {
    /// Controller occupancy per command (drive-wide, serial).
    pub controller_ns_per_command: u64,
    /// Extra controller occupancy per block transferred.
    pub controller_ns_per_block: u64,
    /// Latency after the controller until a write or append is acknowledged (parallel).
    pub ack_ns_per_command: u64,
    /// Extra acknowledgement latency per block.
    pub ack_ns_per_block: u64,
    /// Per-zone append sequencer occupancy per append (assigns the LBA; serial per zone).
    pub append_sequencer_ns: u64,
    /// Drive-wide append engine occupancy per append.
    pub append_engine_ns_per_command: u64,
    /// Extra append engine occupancy per block.
    pub append_engine_ns_per_block: u64,
    /// Zones whose append context the engine keeps; appends to other zones pay a miss.
    pub append_contexts: u32,
    /// Append engine occupancy added by an append-context miss.
    pub append_context_miss_ns: u64,
    /// Most appends of one zone in the device pipeline at once.
    pub append_slots_per_zone: u32,
    /// Flash chips (parallel units) of the drive.
    pub chips: u32,
    /// Channels (buses) the chips hang off; chip `c` is on channel `c % channels`.
    pub channels: u32,
    /// Time a channel is busy moving one block to its chip.
    pub channel_ns_per_block: u64,
    /// Chips one zone is striped over.
    pub chips_per_zone: u32,
    /// Blocks per flash page (the striping unit across a zone's chips).
    pub blocks_per_page: u32,
    /// Time a chip is busy programming one page.
    pub page_program_ns: u64,
    /// Time a chip is busy reading one page.
    pub page_read_ns: u64,
    /// Read latency per block transferred to the host.
    pub read_ns_per_block: u64,
    /// How far acknowledged writes may run ahead of the flash (buffer depth in time).
    pub write_buffer_window_ns: u64,
    /// Zone reset latency.
    pub reset_ns: u64,
    /// Zone finish latency.
    pub finish_ns: u64,
    /// Open/close and zone report latency.
    pub zone_admin_ns: u64,
    /// Uniform random latency added to each completion (orders concurrent commands).
    pub jitter_ns: u64,
}

impl TimingParams {
    /// Calibrated to the WD Ultrastar DC ZN540 figures of the ZapRAID paper (section 2.2,
    /// Figure 2): Zone Write QD 1 latency of about 10.5 us + 1.1 us per 4 KiB, one zone
    /// flushing at about 1,050 MiB/s, appends serialized per zone at about 7.2 us, an append
    /// engine that keeps two zone contexts (so appends peak at two open zones), and eight
    /// chips on two channels of about 900 MiB/s each (the paper measured about 1,750 MiB/s
    /// drive-wide at 16 KiB). Reads, reset and finish are not calibrated
    /// against the paper (it gives no figures for them); their values are typical of TLC.
    pub fn zn540() -> Self {
        TimingParams {
            controller_ns_per_command: 4_600,
            controller_ns_per_block: 430,
            ack_ns_per_command: 5_850,
            ack_ns_per_block: 670,
            append_sequencer_ns: 7_200,
            append_engine_ns_per_command: 6_300,
            append_engine_ns_per_block: 500,
            append_contexts: 2,
            append_context_miss_ns: 3_000,
            append_slots_per_zone: 4,
            chips: 8,
            channels: 2,
            channel_ns_per_block: 4_340,
            chips_per_zone: 4,
            blocks_per_page: 4,
            page_program_ns: 59_500,
            page_read_ns: 60_000,
            read_ns_per_block: 1_100,
            write_buffer_window_ns: 240_000,
            reset_ns: 1_000_000,
            finish_ns: 1_000_000,
            zone_admin_ns: 10_000,
            jitter_ns: 400,
        }
    }

    /// Checks the parameters can drive the model.
    pub fn validate(&self) -> Result<(), String> {
        if self.chips == 0 || self.chips_per_zone == 0 || self.chips_per_zone > self.chips {
            return Err(format!("need 1 <= chips per zone ({}) <= chips ({})", self.chips_per_zone, self.chips));
        }
        if self.channels == 0 || self.channels > self.chips {
            return Err(format!("need 1 <= channels ({}) <= chips ({})", self.channels, self.chips));
        }
        if self.blocks_per_page == 0 || self.append_slots_per_zone == 0 {
            return Err("blocks per page and append slots per zone must be at least 1".into());
        }
        Ok(())
    }
}

/// What the model needs to know about a command.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TimedOp {
    Read { zone: u32, offset_blocks: u64, blocks: u64 },
    Write { zone: u32, blocks: u64 },
    Append { zone: u32, blocks: u64 },
    Reset { zone: Option<u32> },
    Finish,
    Admin,
}

/// Busy-until state of every server of the model.
pub(crate) struct Timing {
    params: TimingParams,
    controller_free_ns: u64,
    append_engine_free_ns: u64,
    append_sequencer_free_ns: Vec<u64>,
    /// Completion times of the appends of each zone still holding a slot.
    append_slots: Vec<VecDeque<u64>>,
    /// Zones whose append context is cached, most recent last.
    append_contexts: VecDeque<u32>,
    chip_free_ns: Vec<u64>,
    channel_free_ns: Vec<u64>,
    /// Next zone-relative block each zone will program (the flash is written in order).
    program_cursor_blocks: Vec<u64>,
}

impl Timing {
    pub(crate) fn new(params: TimingParams, geometry: &Geometry) -> Self {
        let zones = geometry.zone_count as usize;
        Timing {
            controller_free_ns: 0,
            append_engine_free_ns: 0,
            append_sequencer_free_ns: vec![0; zones],
            append_slots: vec![VecDeque::new(); zones],
            append_contexts: VecDeque::new(),
            chip_free_ns: vec![0; params.chips as usize],
            channel_free_ns: vec![0; params.channels as usize],
            program_cursor_blocks: vec![0; zones],
            params,
        }
    }

    pub(crate) fn params(&self) -> &TimingParams {
        &self.params
    }

    fn chip_of(&self, zone: u32, offset_blocks: u64) -> usize {
        let p = &self.params;
        let page = offset_blocks / u64::from(p.blocks_per_page);
        let within_zone = page % u64::from(p.chips_per_zone);
        ((u64::from(zone) * u64::from(p.chips_per_zone) + within_zone) % u64::from(p.chips)) as usize
    }

    fn controller(&mut self, now_ns: u64, blocks: u64) -> u64 {
        let p = &self.params;
        let start = now_ns.max(self.controller_free_ns);
        self.controller_free_ns = start + p.controller_ns_per_command + p.controller_ns_per_block * blocks;
        self.controller_free_ns
    }

    /// Programs `blocks` blocks of `zone` into its chips starting at `ready_ns`; returns
    /// when the last of them is on flash.
    fn program(&mut self, zone: u32, blocks: u64, ready_ns: u64) -> u64 {
        let block_program_ns = self.params.page_program_ns / u64::from(self.params.blocks_per_page);
        let mut done = ready_ns;
        for _ in 0..blocks {
            let offset = self.program_cursor_blocks[zone as usize];
            self.program_cursor_blocks[zone as usize] += 1;
            let chip = self.chip_of(zone, offset);
            let channel = chip % self.channel_free_ns.len();
            let on_bus = ready_ns.max(self.channel_free_ns[channel]) + self.params.channel_ns_per_block;
            self.channel_free_ns[channel] = on_bus;
            let start = on_bus.max(self.chip_free_ns[chip]);
            self.chip_free_ns[chip] = start + block_program_ns;
            done = done.max(self.chip_free_ns[chip]);
        }
        done
    }

    fn acknowledge(&self, in_buffer_ns: u64, programmed_ns: u64, blocks: u64, jitter_ns: u64) -> u64 {
        let p = &self.params;
        let ack = in_buffer_ns + p.ack_ns_per_command + p.ack_ns_per_block * blocks;
        ack.max(programmed_ns.saturating_sub(p.write_buffer_window_ns)) + jitter_ns
    }

    /// The virtual time at which `op`, submitted at `now_ns`, completes. `jitter_ns` is
    /// the emulator's seeded random draw in `[0, jitter_ns]`.
    pub(crate) fn schedule(&mut self, now_ns: u64, op: TimedOp, jitter_ns: u64) -> u64 {
        match op {
            TimedOp::Write { zone, blocks } => {
                let in_buffer = self.controller(now_ns, blocks);
                let programmed = self.program(zone, blocks, in_buffer);
                self.acknowledge(in_buffer, programmed, blocks, jitter_ns)
            }
            TimedOp::Append { zone, blocks } => {
                let z = zone as usize;
                let slots = self.params.append_slots_per_zone as usize;
                let mut start = now_ns;
                while self.append_slots[z].front().is_some_and(|done| *done <= start) {
                    self.append_slots[z].pop_front();
                }
                if self.append_slots[z].len() >= slots {
                    start = start.max(self.append_slots[z].pop_front().expect("slot"));
                }
                let after_controller = self.controller(start, blocks);
                let sequenced =
                    after_controller.max(self.append_sequencer_free_ns[z]) + self.params.append_sequencer_ns;
                self.append_sequencer_free_ns[z] = sequenced;
                let miss_ns = self.touch_append_context(zone);
                let p = &self.params;
                let engine_start = sequenced.max(self.append_engine_free_ns);
                self.append_engine_free_ns =
                    engine_start + miss_ns + p.append_engine_ns_per_command + p.append_engine_ns_per_block * blocks;
                let in_buffer = self.append_engine_free_ns;
                let programmed = self.program(zone, blocks, in_buffer);
                let done = self.acknowledge(in_buffer, programmed, blocks, jitter_ns);
                let queue = &mut self.append_slots[z];
                // Slots free in completion order, so keep the queue sorted.
                let at = queue.partition_point(|t| *t <= done);
                queue.insert(at, done);
                done
            }
            TimedOp::Read { zone, offset_blocks, blocks } => {
                let after_controller = self.controller(now_ns, 0);
                let p = &self.params;
                let mut done = after_controller;
                let pages_first = offset_blocks / u64::from(p.blocks_per_page);
                let pages_last = (offset_blocks + blocks.max(1) - 1) / u64::from(p.blocks_per_page);
                for page in pages_first..=pages_last {
                    let chip = self.chip_of(zone, page * u64::from(p.blocks_per_page));
                    let start = after_controller.max(self.chip_free_ns[chip]);
                    self.chip_free_ns[chip] = start + p.page_read_ns;
                    done = done.max(self.chip_free_ns[chip]);
                }
                done + p.read_ns_per_block * blocks + jitter_ns
            }
            TimedOp::Reset { zone } => {
                match zone {
                    Some(z) => self.forget_zone(z),
                    None => (0..self.program_cursor_blocks.len() as u32).for_each(|z| self.forget_zone(z)),
                }
                self.controller(now_ns, 0) + self.params.reset_ns + jitter_ns
            }
            TimedOp::Finish => self.controller(now_ns, 0) + self.params.finish_ns + jitter_ns,
            TimedOp::Admin => self.controller(now_ns, 0) + self.params.zone_admin_ns + jitter_ns,
        }
    }

    fn forget_zone(&mut self, zone: u32) {
        self.program_cursor_blocks[zone as usize] = 0;
    }

    /// Marks `zone`'s append context most recently used; returns the miss penalty.
    fn touch_append_context(&mut self, zone: u32) -> u64 {
        if let Some(at) = self.append_contexts.iter().position(|z| *z == zone) {
            self.append_contexts.remove(at);
            self.append_contexts.push_back(zone);
            return 0;
        }
        self.append_contexts.push_back(zone);
        if self.append_contexts.len() > self.params.append_contexts as usize {
            self.append_contexts.pop_front();
        }
        self.params.append_context_miss_ns
    }
}
