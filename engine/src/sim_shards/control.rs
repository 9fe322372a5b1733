//! What an operator (or a test) does to a running array of shards besides requests: a
//! clean stop begun, a rebuild cut short resumed by every shard, the rebuild rate, time
//! passing to a given instant, and where an array LBA lives on the drives.

use zapraid_zns::{execute, Command, EmulatedDrive, ZoneAction, ZoneTarget, ZonedDevice};

use super::ShardedSimulator;
use crate::error::{Error, Result};
use crate::l2p::Physical;

impl ShardedSimulator {
    /// Starts every shard's clean stop (`Engine::stop`); `step` drives them on.
    pub fn begin_stop(&mut self) {
        for shard in 0..self.shards.len() {
            self.shards[shard].engine.stop(self.now_ns);
            self.dispatch(shard);
        }
    }

    /// Resumes the rebuild of drive `drive` in every shard onto the drive in its place,
    /// which holds what a rebuild cut short wrote (`Simulator::resume_rebuild`): each
    /// shard's zones of it that hold none of that shard's segments are reset first, as a
    /// real driver does, then each shard resumes over its own zones (one whose part was
    /// done keeps every segment it checks and finishes at once).
    pub fn resume_rebuild(&mut self, drive: usize) -> Result<()> {
        let device = |error| Error::Device { drive, error };
        if drive >= self.drives.len() {
            return Err(Error::InvalidConfig { reason: format!("drive {drive} of {}", self.drives.len()) });
        }
        for shard in 0..self.shards.len() {
            let zones = self.map.zones_of(shard);
            let keep = self.shards[shard].engine.zones_holding_segments();
            let new = &mut self.drives[drive];
            let geometry = new.geometry();
            for local in (0..zones.end - zones.start).filter(|z| !keep.contains(z)) {
                let start_lba = geometry.zone_start_lba(zones.start + local);
                let reset = Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::Zone { start_lba } };
                execute(new, reset).result.map_err(device)?;
            }
            self.shards[shard]
                .engine
                .resume_drive_rebuild(drive)
                .map_err(|error| self.map.array_error(shard, error))?;
        }
        for shard in 0..self.shards.len() {
            self.dispatch(shard);
        }
        Ok(())
    }

    /// Limits every shard's rebuild to `rate_bytes_per_s` written to the new drive
    /// (`Engine::set_rebuild_rate`), now: the array's rebuild then writes at most S times
    /// that, each shard pacing its own part.
    pub fn set_rebuild_rate(&mut self, rate_bytes_per_s: Option<u64>) {
        for shard in 0..self.shards.len() {
            self.shards[shard].engine.tick(self.now_ns);
            self.shards[shard].engine.set_rebuild_rate(rate_bytes_per_s);
            self.dispatch(shard);
        }
    }

    /// Runs one step if anything is due by `t_ns` and returns true; else moves the clock to
    /// `t_ns` (if later than now) and returns false (`Simulator::step_until`).
    pub fn step_until(&mut self, t_ns: u64) -> bool {
        if self.deliver_completions() {
            return true;
        }
        match self.next_event_ns() {
            Some(next) if next <= t_ns => self.step(),
            _ => {
                if t_ns > self.now_ns {
                    self.now_ns = t_ns;
                    self.drives.iter_mut().for_each(|d| d.advance_to(t_ns));
                }
                false
            }
        }
    }

    /// Where array LBA `lba` lives now, if it was ever written (`Engine::locate`), with
    /// the zone numbered on the whole drive.
    pub fn locate(&self, lba: u64) -> Option<Physical> {
        let (shard, local) = self.map.locate(lba);
        let at = self.shards.get(shard)?.engine.locate(local)?;
        Some(Physical { zone: self.map.zones_of(shard).start + at.zone, ..at })
    }

    /// Takes the drives as they are, leaving the simulator none: for a start from the
    /// drives of a simulator still held (a stopped array's).
    pub fn take_drives(&mut self) -> Vec<EmulatedDrive> {
        std::mem::take(&mut self.drives)
    }
}
