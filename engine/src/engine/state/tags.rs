//! Things in flight found by a tag without hashing (what each drive command is for, the
//! reads in progress): a tag is a slot index in its low `INDEX_BITS` bits and the slot's
//! generation in the rest.
//!
//! Slots are reused once their command completes, the longest free first, and the
//! generation is bumped at every reuse: a completion for a tag whose slot has moved on (a
//! stale or duplicated one) finds nothing instead of another command's purpose. That
//! holds until a slot's 40-bit generation wraps: 2^40 reuses, 12 days of a million
//! commands a second through a single slot, and the reuses spread over every slot in use.
//! Invariants: `free` holds exactly the empty
//! slots, each once; `len` counts the full ones; no index has all its bits set, so no tag
//! is `u64::MAX` (drivers keep that one for commands of their own).

use std::collections::VecDeque;

use zapraid_zns::Tag;

/// Bits of a tag for the slot index: 16 million things in flight at most.
const INDEX_BITS: u32 = 24;
const INDEX_MASK: Tag = (1 << INDEX_BITS) - 1;
const GENERATION_MASK: u64 = (1 << (Tag::BITS - INDEX_BITS)) - 1;

struct Slot<T> {
    generation: u64,
    value: Option<T>,
}

pub(in crate::engine) struct TagSlab<T> {
    slots: Vec<Slot<T>>,
    free: VecDeque<u32>,
    len: usize,
}

impl<T> Default for TagSlab<T> {
    fn default() -> Self {
        Self { slots: Vec::new(), free: VecDeque::new(), len: 0 }
    }
}

impl<T> TagSlab<T> {
    /// Keeps `value` under a new tag, unique among the tags held.
    pub(in crate::engine) fn insert(&mut self, value: T) -> Tag {
        let index = match self.free.pop_front() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|index| Tag::from(*index) < INDEX_MASK)
                    .expect("fewer than 2^24 - 1 things in flight");
                self.slots.push(Slot { generation: 0, value: None });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.value.is_none(), "a free slot holds nothing");
        slot.value = Some(value);
        self.len += 1;
        (slot.generation << INDEX_BITS) | Tag::from(index)
    }

    /// What `tag` was kept for, if it is held (a tag is given back once).
    pub(in crate::engine) fn remove(&mut self, tag: Tag) -> Option<T> {
        let index = (tag & INDEX_MASK) as usize;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != tag >> INDEX_BITS {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = (slot.generation + 1) & GENERATION_MASK;
        self.free.push_back(index as u32);
        self.len -= 1;
        Some(value)
    }

    pub(in crate::engine) fn get(&self, tag: Tag) -> Option<&T> {
        let slot = self.slots.get((tag & INDEX_MASK) as usize)?;
        (slot.generation == tag >> INDEX_BITS).then_some(slot.value.as_ref()).flatten()
    }

    pub(in crate::engine) fn get_mut(&mut self, tag: Tag) -> Option<&mut T> {
        let slot = self.slots.get_mut((tag & INDEX_MASK) as usize)?;
        (slot.generation == tag >> INDEX_BITS).then_some(slot.value.as_mut()).flatten()
    }

    pub(in crate::engine) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_finds_its_value_once_and_a_reused_slot_does_not_answer_an_old_tag() {
        let mut slab = TagSlab::default();
        let a = slab.insert("a");
        let b = slab.insert("b");
        assert_ne!(a, b);
        assert_eq!(slab.remove(a), Some("a"));
        assert_eq!(slab.remove(a), None, "given back once");
        let c = slab.insert("c"); // reuses a's slot, the only free one
        assert_eq!(c & INDEX_MASK, a & INDEX_MASK);
        assert_ne!(c, a);
        assert_eq!(slab.remove(a), None, "a stale tag finds nothing");
        assert_eq!((slab.get(a), slab.get(c)), (None, Some(&"c")));
        *slab.get_mut(c).unwrap() = "c2";
        assert!(slab.get_mut(a).is_none());
        assert_eq!(slab.remove(u64::MAX), None, "nor does one never given");
        assert!(!slab.is_empty());
        assert_eq!(slab.remove(b), Some("b"));
        assert_eq!(slab.remove(c), Some("c2"));
        assert!(slab.is_empty());
    }
}
