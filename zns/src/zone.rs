//! The zone model: states, descriptors and zone management actions, as in the NVMe Zoned
//! Namespace command set.
//!
//! Invariants (enforced by the emulator, checked by the conformance suite): a zone's write
//! pointer never exceeds its capacity; only open zones count as open; open and closed zones
//! count as active; the write pointer of an empty zone is its start.

/// Zone state, with the NVMe ZNS encoding (high nibble of byte 1 of a zone descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ZoneState {
    Empty = 0x1,
    ImplicitlyOpen = 0x2,
    ExplicitlyOpen = 0x3,
    Closed = 0x4,
    ReadOnly = 0xd,
    Full = 0xe,
    Offline = 0xf,
}

impl ZoneState {
    /// Decodes the NVMe encoding; `None` for reserved values.
    pub fn from_nvme(code: u8) -> Option<Self> {
        Some(match code {
            0x1 => ZoneState::Empty,
            0x2 => ZoneState::ImplicitlyOpen,
            0x3 => ZoneState::ExplicitlyOpen,
            0x4 => ZoneState::Closed,
            0xd => ZoneState::ReadOnly,
            0xe => ZoneState::Full,
            0xf => ZoneState::Offline,
            _ => return None,
        })
    }

    /// The NVMe encoding.
    pub fn to_nvme(self) -> u8 {
        self as u8
    }

    /// Open zones hold an open resource.
    pub fn is_open(self) -> bool {
        matches!(self, ZoneState::ImplicitlyOpen | ZoneState::ExplicitlyOpen)
    }

    /// Open and closed zones hold an active resource.
    pub fn is_active(self) -> bool {
        self.is_open() || self == ZoneState::Closed
    }

    /// States in which a write at the write pointer may be accepted.
    pub fn is_writable(self) -> bool {
        matches!(self, ZoneState::Empty | ZoneState::ImplicitlyOpen | ZoneState::ExplicitlyOpen | ZoneState::Closed)
    }

    /// A short lower-case name for tables.
    pub fn name(self) -> &'static str {
        match self {
            ZoneState::Empty => "empty",
            ZoneState::ImplicitlyOpen => "imp-open",
            ZoneState::ExplicitlyOpen => "exp-open",
            ZoneState::Closed => "closed",
            ZoneState::ReadOnly => "read-only",
            ZoneState::Full => "full",
            ZoneState::Offline => "offline",
        }
    }
}

/// The state as the NVMe specification names it, in lower case for use inside
/// sentences ("zone 3 is implicitly open"); `name` is the short form for narrow tables.
impl std::fmt::Display for ZoneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // pad, not write: table columns set widths.
        f.pad(match self {
            ZoneState::Empty => "empty",
            ZoneState::ImplicitlyOpen => "implicitly open",
            ZoneState::ExplicitlyOpen => "explicitly open",
            ZoneState::Closed => "closed",
            ZoneState::ReadOnly => "read-only",
            ZoneState::Full => "full",
            ZoneState::Offline => "offline",
        })
    }
}

/// What a zone management send command does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneAction {
    /// Back to empty, write pointer at the zone start, data gone.
    Reset,
    /// To full: no more writes until reset.
    Finish,
    /// Explicitly open, reserving open and active resources.
    Open,
    /// To closed, releasing the open resource but keeping the active one.
    Close,
}

/// The action as a verb ("cannot reset a zone that is offline").
impl std::fmt::Display for ZoneAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            ZoneAction::Reset => "reset",
            ZoneAction::Finish => "finish",
            ZoneAction::Open => "open",
            ZoneAction::Close => "close",
        })
    }
}

/// Which zones a zone management send command applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneTarget {
    /// The zone starting at this LBA.
    Zone { start_lba: u64 },
    /// Every zone the action applies to in its state (NVMe "select all").
    All,
}

/// One zone as a zone report describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ZoneDescriptor {
    /// Index of the zone in the namespace.
    pub zone: u32,
    pub state: ZoneState,
    pub start_lba: u64,
    pub capacity_blocks: u64,
    /// Next writable LBA; for full zones, start plus capacity.
    pub write_pointer: u64,
}

impl ZoneDescriptor {
    /// Blocks written so far (for full zones: the capacity).
    pub fn written_blocks(&self) -> u64 {
        self.write_pointer - self.start_lba
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_encoding_round_trips() {
        for code in 0u8..=0xff {
            if let Some(state) = ZoneState::from_nvme(code) {
                assert_eq!(state.to_nvme(), code);
            }
        }
        assert_eq!(ZoneState::from_nvme(0x5), None);
    }

    #[test]
    fn resource_classes() {
        assert!(ZoneState::Closed.is_active() && !ZoneState::Closed.is_open());
        assert!(ZoneState::ImplicitlyOpen.is_open());
        assert!(!ZoneState::Full.is_active());
        assert!(!ZoneState::ReadOnly.is_writable());
    }

    #[test]
    fn states_and_actions_read_as_words() {
        assert_eq!(ZoneState::ImplicitlyOpen.to_string(), "implicitly open");
        assert_eq!(ZoneState::ReadOnly.to_string(), "read-only");
        assert_eq!(format!("[{:>8}]", ZoneState::Full), "[    full]");
        let e =
            crate::Error::InvalidZoneStateTransition { zone: 3, state: ZoneState::Offline, action: ZoneAction::Reset };
        assert_eq!(e.to_string(), "zone 3: cannot reset a zone that is offline");
    }
}
