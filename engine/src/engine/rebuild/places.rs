//! Where the chunks of a segment's stripes lie on the drives holding it, for the rebuild,
//! which walks the segment's chunk positions in order. A Zone Append segment's compact
//! stripe table says which stripe of its group a chunk position holds; where another drive
//! holds that stripe takes a search of the group on that drive (`Engine::stripe_places`:
//! up to G entries per drive, for every position). The rebuild inverts the table one group
//! at a time instead (each entry of the group read once per drive) and keeps the inverse
//! while its reads are in that group (`ZoneRebuild::group_places`, a `GroupPlaces`).
//!
//! Invariant: the places are `stripe_places`' (for each other drive holding the segment,
//! the first position of the group holding the stripe there), asserted in debug builds.

use crate::engine::machine::Engine;
use crate::engine::state::read::StripePlaces;
use crate::engine::state::rebuild::{GroupPlaces, NO_POSITION};

impl Engine {
    /// `stripe_places` for the rebuild of lane `lane` of the segment in `zone`, at chunk
    /// position `position`, from the inverse of its group's stripe table (module doc).
    pub(super) fn rebuild_stripe_places(&mut self, zone: u32, lane: usize, position: u64) -> Option<StripePlaces> {
        let cached = self.drive_rebuild.as_mut()?.zones.get_mut(&zone)?.group_places.take();
        let seg = self.segment_of_zone(zone)?;
        let Some(table) = seg.table.as_ref() else {
            // Zone Write: stripe s is at position s on every drive, no search.
            return self.stripe_places(zone, lane, position);
        };
        let layout = seg.layout;
        let group = position / layout.group_size;
        let first = group * layout.group_size;
        let group_size = layout.group_size as usize;
        let places = match cached.filter(|c| c.group == group) {
            Some(places) => places,
            None => {
                let mut positions = vec![NO_POSITION; layout.drives() * group_size];
                for (other, of_lane) in positions.chunks_exact_mut(group_size).enumerate() {
                    // Backwards, so that the first position holding a stripe is kept.
                    for at in (0..layout.group_stripes(group)).rev() {
                        if let Some(id) = table.get(other, first + at) {
                            // An ID beyond the group's is no stripe of it (`stripe_places`
                            // finds none either).
                            if let Some(slot) = of_lane.get_mut(id as usize) {
                                *slot = at as u32;
                            }
                        }
                    }
                }
                GroupPlaces { group, group_size, positions }
            }
        };
        let found = table.get(lane, position).map(|id| {
            let others = (0..layout.drives())
                .filter(|&other| other != lane && self.holds(zone, other))
                .filter_map(|other| Some((other, first + places.position(other, id)?)))
                .collect();
            StripePlaces { stripe_number: first + u64::from(id), others, entries_checked: 0 }
        });
        if let Some(z) = self.drive_rebuild.as_mut().and_then(|r| r.zones.get_mut(&zone)) {
            z.group_places = Some(places);
        }
        debug_assert!(
            {
                let searched = self.stripe_places(zone, lane, position);
                searched.map(|s| (s.stripe_number, s.others))
                    == found.as_ref().map(|f| (f.stripe_number, f.others.clone()))
            },
            "the inverted stripe table gives the search's places"
        );
        found
    }
}
