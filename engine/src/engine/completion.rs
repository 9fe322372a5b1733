//! The completions of drive commands other than data chunks and reads (`on_completion`
//! takes those): headers, footers, zone finishes and resets, and the commands of the
//! drive rebuild, the scrub and degraded reads, each sent to the role it belongs to. A
//! header, footer, finish or reset that fails fails its drive. `drive` here is the
//! command's lane in its segment (`lanes`).

use zapraid_zns::{Completion, ZoneAction};

use super::machine::{Engine, Op};
use super::state::segment::{FooterPlace, SegmentState};
use super::state::stop::StopState;

impl Engine {
    pub(super) fn other_completion(&mut self, drive: usize, op: Op, completion: Completion) {
        match op {
            Op::Header { segment } => {
                self.zone_write_done(drive, segment);
                if completion.result.is_err() {
                    self.fail_lane(segment, drive);
                }
                self.seg_mut(segment).header_pending -= 1;
            }
            Op::Chunk { .. } | Op::Chunks { .. } => unreachable!("chunk completions go to chunk_done"),
            Op::Footer { segment, drive, next_block, place: place @ FooterPlace::Stop { blocks, .. } } => {
                self.zone_write_done(drive, segment);
                if completion.result.is_err() {
                    self.fail_lane(segment, drive);
                }
                if completion.result.is_ok() && next_block < blocks {
                    self.write_footer_blocks(segment, drive, next_block, place);
                } else if let StopState::WritingFooters(left) = self.stop {
                    self.stop = if left == 1 { StopState::Stopped } else { StopState::WritingFooters(left - 1) };
                }
            }
            Op::Footer { segment, drive, next_block, place: FooterPlace::Sealing { .. } } => {
                self.zone_write_done(drive, segment);
                if completion.result.is_err() {
                    self.fail_lane(segment, drive);
                }
                if completion.result.is_ok() && next_block < self.seg(segment).layout.footer_blocks {
                    self.write_footer_piece(segment, drive, next_block);
                } else {
                    self.seg_mut(segment).footer_pending -= 1;
                    if !self.lane_failed(segment, drive) {
                        self.zone_command(drive, segment, ZoneAction::Finish);
                    }
                    let seg = self.seg_mut(segment);
                    if seg.footer_pending == 0 {
                        seg.state = SegmentState::Sealed;
                        seg.footer = Vec::new(); // on the drives now
                        self.gc_check_needed = true; // a new candidate (if padding left room)
                        self.mark_if_in_old_row(segment);
                    }
                }
            }
            Op::Finish { segment } => {
                if completion.result.is_err() {
                    self.fail_lane(segment, drive);
                }
                let seg = self.seg_mut(segment);
                seg.commands_in_flight -= 1;
                seg.finishes_in_flight -= 1;
            }
            Op::PageRebuild { tag, zone } => self.page_rebuild_completion(drive, tag, zone, completion),
            Op::Reset { segment } => {
                if completion.result.is_err() {
                    self.fail_lane(segment, drive);
                }
                self.seg_mut(segment).commands_in_flight -= 1;
                self.relocation.as_mut().expect("resets belong to a relocation").resets_pending -= 1;
                self.reset_done();
            }
            Op::Read { .. } => unreachable!("read completions go to read_done"),
            Op::Rebuild { zone, rebuild, op } => self.rebuild_done(drive, zone, rebuild, op, completion),
            Op::Scrub(read) => self.scrub_read_done(drive, read, completion),
            Op::DegradedShard { rebuild, drive, zone } => {
                self.seg_mut(zone).commands_in_flight -= 1;
                self.rebuild_shard_done(rebuild, zone, drive, completion);
            }
        }
    }
}
