//! Splitting an emulated drive into parts (`part`): each part an `EmulatedDrive` of its
//! own that owns a run of the drive's zones (their state, data, metadata and zone
//! records), with its own queue, clock and landing order, sharing with the other parts
//! only the drive's open and active zone counts and its failure (`shared`).

use super::*;
use crate::part::{spans_of, DrivePart};

impl EmulatedDrive {
    /// Splits the drive into one part per entry of `parts` ((first zone, zone count) in
    /// the drive's numbering; in the order given), each a device of its own zones
    /// numbered from 0 that can be moved to a thread of its own. Refused for a drive with
    /// commands in flight, for one in virtual time (its timing model is one controller and
    /// one set of channels for the whole drive, which parts on their own clocks cannot
    /// share), and for parts outside the drive or sharing a zone. Zones no part names are
    /// left as they are, out of reach until the drive is opened again (a drive file keeps
    /// them; memory media drop them).
    pub fn split(self, parts: &[(u32, u32)]) -> Result<Vec<DrivePart<EmulatedDrive>>> {
        debug_assert_eq!(self.owned, 0..self.geometry.zone_count, "only a whole drive splits");
        let spans = spans_of(&self.geometry, parts)?;
        let refuse = |reason: String| Err(Error::CannotSplit { reason });
        if self.timing.is_some() {
            return refuse(
                "it runs in virtual time: its timing model is one controller and one set of channels, \
                 which parts on clocks of their own cannot share"
                    .into(),
            );
        }
        if self.in_flight() > 0 {
            return refuse(format!("{} commands are in flight (split an idle drive)", self.in_flight()));
        }
        let owned: Vec<Range<u32>> =
            spans.iter().map(|span| span.first_zone()..span.first_zone() + span.zone_count()).collect();
        let EmulatedDrive {
            geometry,
            media,
            zones,
            shared,
            implicitly_open,
            now_ns,
            mut rng,
            media_errors,
            drive_uuid,
            ..
        } = self;
        let media = media.split(&owned);
        let in_part = |lba: &u64, zones: &Range<u32>| geometry.zone_of(*lba).is_some_and(|z| zones.contains(&z));
        let parts = spans.into_iter().zip(owned).zip(media).map(|((span, owned), media)| {
            let part = EmulatedDrive {
                geometry,
                media,
                zones: zones.clone(),
                implicitly_open: implicitly_open.iter().copied().filter(|z| owned.contains(z)).collect(),
                zone_write_in_flight: vec![false; zones.len()],
                pending: BTreeMap::new(),
                ready: VecDeque::new(),
                now_ns,
                timing: None,
                // Each part's landing order from the drive's seed, so that a run repeats.
                rng: ChaCha8Rng::seed_from_u64(rng.random()),
                submitted: 0,
                media_errors: media_errors.iter().copied().filter(|lba| in_part(lba, &owned)).collect(),
                drive_uuid,
                shared: Arc::clone(&shared),
                owned,
            };
            part.debug_check_invariants();
            DrivePart::new(part, span)
        });
        Ok(parts.collect())
    }
}
