//! Zone Writes in order: at most one in flight per drive's zone, later ones waiting behind
//! it in the order they were issued (a drive may reorder commands in flight, and a Zone
//! Write must land at the write pointer). Every writer of a zone at a fixed offset goes
//! through here: chunks of Zone Write segments, headers, footers and the rebuild's writes.
//!
//! Invariant: `Engine::zone_writes` holds an entry for a drive's zone exactly while one of
//! its Zone Writes is in flight; the entry's queue holds the ones not sent yet.

use std::collections::VecDeque;

use zapraid_zns::Command;

use crate::drive_command::DriveCommand;

use super::machine::{Engine, Op};

impl Engine {
    /// Issues a Zone Write, or queues it behind the one in flight on that drive's zone.
    pub(super) fn zone_write(&mut self, drive: usize, zone: u32, op: Op, command: Command) {
        let tag = self.new_tag(op);
        match self.zone_writes.get_mut(&(drive, zone)) {
            Some(waiting) => waiting.push_back((tag, command)),
            None => {
                self.zone_writes.insert((drive, zone), VecDeque::new());
                self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
            }
        }
    }

    /// The Zone Write in flight on `drive`'s `zone` completed: the next one waiting goes.
    /// A waiting write of a rebuild that stopped is never sent: the drive in its place
    /// may be another now, and another rebuild may write this zone.
    pub(super) fn zone_write_done(&mut self, drive: usize, zone: u32) {
        loop {
            let waiting = self.zone_writes.get_mut(&(drive, zone)).expect("a Zone Write was in flight");
            let Some((tag, command)) = waiting.pop_front() else {
                self.zone_writes.remove(&(drive, zone));
                return;
            };
            if let Some(&Op::Rebuild { rebuild, .. }) = self.ops.get(tag) {
                if self.rebuild_stopped(rebuild) {
                    self.ops.remove(tag);
                    self.seg_mut(zone).commands_in_flight -= 1;
                    continue;
                }
            }
            self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
            return;
        }
    }
}
