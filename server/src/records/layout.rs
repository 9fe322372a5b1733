//! Where the records lie on a drive: zone 0 (`SUPERBLOCK_ZONES`) takes the array
//! superblock's generations (`superblock`) or a hot spare's record (`spare`); an array with
//! an L2P budget keeps its checkpoint copies in the zones right after it (`checkpoint`);
//! the array's own zones come after those (`zapraid_zns::ReservedZones` hides the ones
//! before them from the engine).

/// Zones at the start of each drive kept for the array superblock.
pub const SUPERBLOCK_ZONES: u32 = 1;
