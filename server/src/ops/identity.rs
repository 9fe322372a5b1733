//! What a running array is, beside the engine's status: its name, UUID, level and shape,
//! its drives as named and canonicalized, its block device, and the geometry a new drive
//! must have. The start fills it in (`service`); `replace`, the spares and the control
//! socket's status read it, and a swap names the new drive in it.

use zapraid_engine::{Mode, OpenSegments, RaidLevel};

/// What the server tells about itself beside the engine's status.
#[derive(Clone, Debug)]
pub struct Identity {
    pub name: String,
    pub uuid: String,
    pub level: RaidLevel,
    pub mode: Mode,
    /// The chunk size, or with several open segments the small chunk (Cs).
    pub chunk_bytes: u64,
    /// Open segments: Ns of small chunks, Nl of large chunks.
    pub open_segments: OpenSegments,
    /// The drives in array order, as the start named them, and canonicalized (absolute,
    /// links resolved: a client elsewhere finds a drive by it, however it spells it);
    /// `None` for a drive absent at start (a `MissingDrive` stands in for it).
    pub drives: Vec<Option<String>>,
    pub canonical_drives: Vec<Option<String>>,
    pub device: Option<String>,
    /// The drives' geometry, superblock zones included (a replacement must have it).
    pub drive_geometry: zapraid_zns::Geometry,
    /// Zones before the array's own on each drive (superblock, checkpoint): a new drive
    /// sets aside as many.
    pub reserved_zones: u32,
}
